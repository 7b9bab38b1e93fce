"""What drafting costs as vLLM runs it: lookahead KV, the k = 0 drafter pass, CUDA-graph modes, per-pass parts."""

import pytest

from conftest import each_batch, small
from vidur_specdec import simulate
from vidur_specdec.config import ConfigError
from vidur_specdec.pricing.plan import StepComposition
from vidur_specdec.engine.resolve import load
from vidur_specdec.speculation.proposers.head_cost import PassOverheads, draft_passes


def _peak_spare(method, k=4):
    """Smallest and largest KV slots a decoding request holds beyond its tokens charged, over a run."""
    spare = []

    def check(sched, batch):
        bs = sched._cache_config.block_size
        for req, q in zip(batch.requests, batch.num_q_tokens):
            if req.is_prefill_complete and q > 1:
                spare.append(sched._allocation_map[req.id] * bs - (req.num_processed_tokens + q))

    with each_batch(check):
        simulate(small(num_requests=12, method=method, k=k))
    return min(spare), max(spare)


def test_eagle_family_runs_hold_k_lookahead_slots_and_ngram_none():
    for method in ("eagle", "mtp", "draft_model"):
        assert _peak_spare(method)[0] >= 4, method
    lo, _ = _peak_spare("ngram")
    assert lo < 4  # n-gram (and suffix, medusa) reserve only the step's own tokens


def test_lookahead_raises_the_blocks_a_run_needs():
    with pytest.raises(ConfigError, match="scheduler.num_blocks"):
        cfg = small(num_requests=2, method="eagle", k=8)
        cfg["workload"]["prompt_tokens"] = {"dist": "fixed", "value": 32}
        cfg["workload"]["output_tokens"] = {"dist": "fixed", "value": 32}
        cfg["scheduler"] = {"num_blocks": 5, "watermark_blocks_fraction": 0.0}  # 64 tokens fit; 64 + 8 do not
        simulate(cfg)


def _schedule_k0(method, runner="v2"):
    cfg = small(num_requests=20, method=method, k=3)
    cfg["speculative"]["num_speculative_tokens_per_batch_size"] = [[1, 4096, 0]]
    cfg["engine"] = {"model_runner": runner}
    return simulate(cfg).steps


@pytest.mark.parametrize("method,pays", [("eagle", True), ("draft_model", True), ("ngram", False)])
def test_a_scheduled_k0_step_still_pays_a_drafter_pass(method, pays):
    s = _schedule_k0(method)
    decode_only = s[(s["k"] == 0) & (s["decode_reqs"] > 0) & (s["prefill_tokens"] == 0)]
    assert len(decode_only) and (decode_only["guesses"] == 0).all()
    assert (decode_only["draft_ms"] > 0).all() == pays and ((decode_only["draft_ms"] == 0).all() != pays)


def test_piecewise_graphs_cost_only_on_v1_with_a_schedule():
    def fixed(s):  # the per-step part of overhead_ms on steps without guesses (no speculation cost)
        s = s[s["guesses"] == 0]
        return (s["overhead_ms"] - 0.005 * s["num_reqs"]).round(9)

    v1, v2 = fixed(_schedule_k0("ngram", "v1")), fixed(_schedule_k0("ngram", "v2"))
    assert (v2 == 0.5).all() and (v1 > 0.6).all() and v1.nunique() == 1  # a constant per step, as launches are
    static = simulate(small(num_requests=20, k=3, engine={"model_runner": "v1"})).steps
    plain = simulate(small(num_requests=20, k=3, engine={"model_runner": "v2"})).steps
    assert static["overhead_ms"].tolist() == plain["overhead_ms"].tolist()


def _comp(guesses, ctx=512, prev=None):
    n = len(guesses)
    return StepComposition(sum(g + 1 for g in guesses), [g + 1 for g in guesses], [ctx] * n, [],
                           [1] * n, list(prev or [1] * n))


def _eagle(method="eagle3", **engine):
    from vidur_specdec.costs.operator_model import OperatorTimeModel  # noqa: F401 (the type the proposer reads)
    from vidur_specdec.engine.resolve import priced, resolve
    from vidur_specdec.engine import deployment
    from vidur_specdec.hardware.collectives import all_reduce_model
    from vidur_specdec.speculation.proposers.base import ProposerContext

    cfg = load({"model": "meta-llama/Llama-3.1-8B-Instruct", "device": "h100",
                "speculative": {"method": method, "num_speculative_tokens": 4}, "engine": engine})
    dep = resolve(cfg).deployment
    _, prop, _ = priced(cfg, dep, deployment.longest_request_tokens(cfg))
    prop.bind(ProposerContext(dep.device, dep.tp, all_reduce_model(cfg.engine.all_reduce)))
    return prop


def test_each_pass_pays_launch_prepare_and_argmax_and_eagle3_its_vocabulary_mapping():
    e3 = _eagle("eagle3")
    passes = draft_passes(_comp([4]))
    first = e3.pass_parts(passes[0], True, e3.ctx.device, 1)
    later = e3.pass_parts(passes[1], False, e3.ctx.device, 1)
    for part in ("launch", "prepare", "sample", "vocab_map"):
        assert first[part] > 0 and later[part] > 0, part
    assert first["aux_hidden"] > 0 and later["aux_hidden"] == 0  # the target's extra outputs, read once
    assert first["prepare"] > later["prepare"]  # the first pass builds its inputs from the target's outputs
    e1 = _eagle("eagle")
    assert e1.pass_parts(passes[1], False, e1.ctx.device, 1)["vocab_map"] == 0  # EAGLE drafts the full vocabulary


def test_drafting_grows_with_k_and_eager_mode_costs_more():
    e3 = _eagle("eagle3")
    times = [e3.step_time_ms(_comp([g])) for g in range(1, 8)]
    assert all(b > a for a, b in zip(times, times[1:]))
    eager = _eagle("eagle3", enforce_eager=True)
    assert eager.step_time_ms(_comp([4])) > e3.step_time_ms(_comp([4]))


def test_padded_first_pass_carries_the_previous_steps_tokens():
    passes = draft_passes(_comp([3, 3], prev=[4, 1]))
    assert passes[0].q == [4, 1]


def test_probabilistic_drafting_reads_the_logits_more_than_greedy():
    o = PassOverheads(kernel_ms=0.005)
    from vidur_specdec.hardware.devices import get_device

    g = o.bound(get_device("h100"))
    p = PassOverheads(kernel_ms=0.005, sample_passes=4.0).bound(get_device("h100"))
    assert p.sample_ms(64, 128256) > g.sample_ms(64, 128256) > 0 == g.sample_ms(0, 128256)


def test_speculation_adds_a_fixed_cost_to_every_verify_step_whatever_the_proposer():
    for method in ("ngram", "draft_model"):
        s = simulate(small(num_requests=10, k=3, method=method)).steps
        extra = (s["overhead_ms"] - 0.5 - 0.005 * s["num_reqs"]).round(9)
        verify = s["guesses"] > 0
        assert verify.any() and (extra[verify] >= 0.25 + 0.002).all() and (extra[~verify] == 0).all()
        s0 = simulate(small(num_requests=10, k=3, method=method,
                            engine={"spec_step_ms": 0.0, "spec_ms_per_request": 0.0})).steps
        assert ((s0["overhead_ms"] - 0.5 - 0.005 * s0["num_reqs"]).round(9) == 0).all()
