"""A TPOT speedup above the acceptance length comes from load, never from the step model."""

from vidur_specdec import simulate
from vidur_specdec.sweep.table import _above_acceptance


def _run(method, arrival):
    cfg = {"seed": 2, "workload": {"num_requests": 40, **arrival,
                                   "prompt_tokens": {"dist": "fixed", "value": 256},
                                   "output_tokens": {"dist": "fixed", "value": 128}},
           "speculative": {"method": method, "num_speculative_tokens": 8, "acceptance_rate": 0.8}}
    r = simulate(cfg)
    return r.requests["tpot_ms"].median(), r.summary["mean_acceptance_length"]


def test_at_fixed_concurrency_the_speedup_stays_below_the_acceptance_length():
    for c in (1, 8):
        base, _ = _run("none", {"arrival": "closed", "concurrency": c})
        spec, al = _run("ngram", {"arrival": "closed", "concurrency": c})
        assert base / spec < al


def test_at_a_fixed_arrival_rate_fewer_requests_share_each_step():
    base, _ = _run("none", {"arrival": "poisson", "qps": 8.0})
    spec, al = _run("ngram", {"arrival": "poisson", "qps": 8.0})
    assert base / spec > al  # the flagged case: lighter load, not a faster step


def test_flag_cell():
    assert _above_acceptance(5.65, {"mean_acceptance_length": 4.28}, False) == "1"
    assert _above_acceptance(3.0, {"mean_acceptance_length": 4.28}, False) == "0"
    assert _above_acceptance(1.0, {"mean_acceptance_length": 1.0}, True) == ""
    assert _above_acceptance(None, {"mean_acceptance_length": 2.0}, False) == ""
