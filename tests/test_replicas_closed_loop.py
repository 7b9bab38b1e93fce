"""Replicas behind Vidur's global schedulers, closed-loop load, and trace column layouts."""

import numpy as np
import pandas as pd
import pytest

from conftest import small
from vidur_specdec import run_vidur_sarathi, simulate
from vidur_specdec.config import ConfigError
from vidur_specdec.engine.resolve import load
from vidur_specdec.engine.workload import read_trace, read_trace_frame


def _same_times(ours: pd.DataFrame, vidur: pd.DataFrame) -> None:
    for col in ("arrived_at_s", "first_token_s", "completed_at_s"):
        np.testing.assert_array_equal(ours[col].to_numpy(), vidur[col].to_numpy(), err_msg=col)


# --------------------------------------------------------------------------- replicas


@pytest.mark.parametrize("scheduler", ["round_robin", "lor"])
def test_k0_replicas_equal_vidur_cluster(scheduler):
    """k = 0 on 3 replicas reproduces Vidur's own cluster (Sarathi, Vidur's Request) request by request."""
    cfg = small(num_requests=60, qps=20.0, method="none", parallel={"num_replicas": 3, "global_scheduler": scheduler})
    ours = simulate(cfg)
    _same_times(ours.requests, run_vidur_sarathi(cfg))
    assert set(ours.requests["replica"]) <= {0, 1, 2}
    if scheduler == "round_robin":  # Vidur's round robin: request i (in arrival order) -> replica i mod 3
        assert ours.requests["replica"].tolist() == [i % 3 for i in range(60)]


def test_k0_closed_loop_with_replicas_equals_vidur():
    cfg = small(num_requests=40, method="none", parallel={"num_replicas": 2, "global_scheduler": "lor"})
    cfg["workload"].update(arrival="closed", concurrency=6)
    del cfg["workload"]["qps"]
    _same_times(simulate(cfg).requests, run_vidur_sarathi(cfg))


def test_replicas_steps_and_summary():
    res = simulate(small(num_requests=40, qps=20.0, parallel={"num_replicas": 2}))
    s, st = res.summary, res.steps
    assert s["num_replicas"] == 2 and s["num_gpus"] == 2 and s["global_scheduler"] == "round_robin"
    assert set(st["replica"]) == {0, 1}
    assert st["step"].tolist() == list(range(len(st)))
    key = list(zip(st["start_s"], st["replica"]))
    assert key == sorted(key)  # start-time order, ties by replica id
    for rid, g in st.groupby("replica"):  # a replica runs one step at a time
        ends = (g["start_s"] + g["duration_ms"] / 1e3).to_numpy()
        assert (g["start_s"].to_numpy()[1:] >= ends[:-1] - 1e-12).all()
    # each request's steps ran on the replica its row names
    assert res.requests["replica"].isin([0, 1]).all()


def test_one_replica_unchanged_by_the_replica_keys():
    base = simulate(small(num_requests=30))
    with pytest.raises(ConfigError, match="parallel.global_scheduler: does nothing with parallel.num_replicas 1"):
        load(small(num_requests=30, parallel={"num_replicas": 1, "global_scheduler": "lor"}))
    one = simulate(small(num_requests=30, parallel={"num_replicas": 1, "global_scheduler": "round_robin"}))
    pd.testing.assert_frame_equal(base.requests, one.requests)
    pd.testing.assert_frame_equal(base.steps, one.steps)
    assert (base.steps["replica"] == 0).all() and base.summary["num_gpus"] == 1


def test_acceptance_depends_on_request_not_replica():
    """Acceptance streams are keyed by request index: placement changes queueing, not what a request accepts.

    With a token budget no step can exhaust, each step's guesses are min(k, tokens left - 1) whatever the
    batch, so every request accepts exactly the same tokens on 1 or 3 replicas.
    """
    big = {"chunk_size": 100_000}
    a = simulate(small(num_requests=30, alpha=0.6, scheduler=big)).requests
    b = simulate(small(num_requests=30, alpha=0.6, scheduler=big, parallel={"num_replicas": 3})).requests
    assert (a["restarts"] == 0).all() and (b["restarts"] == 0).all()
    assert not a["completed_at_s"].equals(b["completed_at_s"])  # placement did change the timing
    assert a["accepted_tokens"].tolist() == b["accepted_tokens"].tolist()
    assert a["decode_steps"].tolist() == b["decode_steps"].tolist()


# --------------------------------------------------------------------------- closed loop


def _in_flight(req: pd.DataFrame, t: float) -> int:
    return int(((req["arrived_at_s"] <= t) & (req["completed_at_s"] > t)).sum())


@pytest.mark.parametrize("replicas", [1, 2])
def test_closed_loop_keeps_c_in_flight(replicas):
    c, n = 5, 40
    cfg = small(num_requests=n, parallel={"num_replicas": replicas})
    cfg["workload"].update(arrival="closed", concurrency=c)
    del cfg["workload"]["qps"]  # not read when closed, so refused
    res = simulate(cfg)
    req = res.requests
    arr = req["arrived_at_s"].to_numpy()
    assert (arr[:c] == 0).all() and (np.diff(arr) >= 0).all()  # workload order is arrival order
    # every later arrival is some earlier request's completion instant
    done = set(req["completed_at_s"])
    assert all(a in done for a in arr[c:])
    last_arrival = arr.max()
    instants = sorted(set(arr) | set(req["completed_at_s"]))
    for t in instants:
        k = _in_flight(req, t)
        assert k <= c
        if t < last_arrival or t == last_arrival:
            assert k == c, (t, k)
    again = simulate(cfg)
    pd.testing.assert_frame_equal(req, again.requests)
    pd.testing.assert_frame_equal(res.steps, again.steps)


def test_closed_loop_with_enough_concurrency_is_static():
    cfg = small(num_requests=20)
    cfg["workload"].update(arrival="closed", concurrency=20)
    del cfg["workload"]["qps"]
    closed = simulate(cfg)
    cfg["workload"].update(arrival="static", concurrency=None)
    static = simulate(cfg)
    pd.testing.assert_frame_equal(closed.requests, static.requests)


def test_closed_needs_concurrency():
    with pytest.raises(ConfigError, match=r"^workload\.concurrency: required"):
        load({"workload": {"arrival": "closed"}})
    with pytest.raises(ConfigError, match=r"^workload\.concurrency: must be"):
        load({"workload": {"arrival": "closed", "concurrency": 0}})


# --------------------------------------------------------------------------- trace layouts


def test_trace_layouts(tmp_path):
    ours = tmp_path / "ours.csv"
    pd.DataFrame({"arrived_at_s": [0.0, 0.5, 1.25], "prompt_tokens": [10, 20, 30],
                  "output_tokens": [3, 4, 5]}).to_csv(ours, index=False)
    vidur = tmp_path / "splitwise_conv.csv"  # header of Vidur's data/processed_traces/splitwise_conv.csv
    vidur.write_text("arrived_at,num_prefill_tokens,num_decode_tokens\n0.0,10,3\n0.5,20,4\n1.25,30,5\n")
    azure = tmp_path / "AzureLLMInferenceTrace_conv.csv"  # header of Azure's 2023 trace
    azure.write_text("TIMESTAMP,ContextTokens,GeneratedTokens\n"
                     "2023-11-16 18:15:47.1805900,20,4\n"  # out of order on purpose
                     "2023-11-16 18:15:46.6805900,10,3\n"
                     "2023-11-16 18:15:47.9305900,30,5\n")
    want = read_trace(ours)
    assert read_trace(vidur) == want
    got = read_trace(azure)
    assert [(g.prompt_tokens, g.output_tokens) for g in got] == [(w.prompt_tokens, w.output_tokens) for w in want]
    np.testing.assert_allclose([g.arrived_at_s for g in got], [0.0, 0.5, 1.25], atol=1e-9)
    assert list(read_trace_frame(azure).columns) == ["prompt_tokens", "output_tokens", "arrived_at_s"]
    res = simulate(small(num_requests=3, method="none"), [f"workload.arrival=trace", f"workload.trace_file={azure}"])
    assert res.requests["arrived_at_s"].tolist() == pytest.approx([0.0, 0.5, 1.25])


def test_unknown_trace_layout_names_file_and_columns(tmp_path):
    p = tmp_path / "lengths_only.csv"  # like Vidur's arxiv_summarization stats: no arrivals
    p.write_text("num_prefill_tokens,num_decode_tokens,num_total_tokens,pd_ratio\n10,3,13,3.3\n")
    with pytest.raises(ConfigError) as e:
        read_trace_frame(p)
    msg = str(e.value)
    assert "\n" not in msg and msg.startswith("workload.trace_file: ") and str(p) in msg
    assert "arrived_at_s" in msg and "TIMESTAMP" in msg and "num_prefill_tokens" in msg
    bad = tmp_path / "azure_bad.csv"
    bad.write_text("TIMESTAMP,ContextTokens,GeneratedTokens\nyesterday,10,3\n")
    with pytest.raises(ConfigError, match="TIMESTAMP must be date-time strings"):
        read_trace_frame(bad)
