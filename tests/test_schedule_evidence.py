"""Schedules inside the evidence: ranges end where simulated batches end, k changes only above the tolerance,
closed-loop points leave out their start burst."""

from types import SimpleNamespace

import pytest

from conftest import REPO
from vidur_specdec.engine.resolve import load
from vidur_specdec.tune.choose import choose_schedule, merge_small_gains, ranges_with_priced_changes
from vidur_specdec.tune.loads import workload_overrides
from vidur_specdec.tune.outputs import schedule_evidence
from vidur_specdec.tune.points import AXES, Point, Setting
from vidur_specdec.tune.search import TuneResult, Tuner


def _values(n, dip=(20, 70), dip_gain=0.03):
    """Relative values of k = 0..3 over n batch sizes: k = 3 best, k = 1 better by ``dip_gain`` inside ``dip``."""
    out = []
    for b in range(1, n + 1):
        row = [0.6, 0.9, 0.95, 1.0]
        if dip[0] <= b <= dip[1]:
            row = [0.6, 1.0, 0.95, 1.0 / (1.0 + dip_gain)]
        out.append(row)
    return out


def test_a_change_of_k_that_gains_less_than_the_tolerance_is_merged_away():
    v = _values(100, dip_gain=0.03)
    priced = ranges_with_priced_changes(v, 8)
    assert [k for *_, k in priced] == [3, 1, 3]  # the flip the priced programme keeps (it gains over its edges)
    assert merge_small_gains(v, priced, 0.05) == [(1, 100, 3)]  # 3 % < 5 %: no k = 3 / k = 1 / k = 3 flip
    big = _values(100, dip_gain=0.30)
    kept = merge_small_gains(big, ranges_with_priced_changes(big, 8), 0.05)
    assert [k for *_, k in kept] == [3, 1, 3]  # 30 % > 5 %: the change is worth it and stays


def test_the_schedule_covers_only_the_batch_sizes_asked_for():
    cfg = load(REPO / "configs" / "default.yaml", ["workload.num_requests=8"])
    ranges, table = choose_schedule(cfg, 2, 0.05, limit=20)
    assert ranges[0][0] == 1 and ranges[-1][1] == 20 and table["batch_size_limit"] == 20
    assert all(r["change_gain"] > 0.05 for r in table["ranges"][1:])


def _tuner(points, ref=10.0):
    ev = SimpleNamespace(points=points, axis=AXES["concurrency"], base=None)
    t = Tuner.__new__(Tuner)
    t.ev, t.ttft_reference_ms = ev, ref
    return t


def _pt(metrics):
    return Point(0, "grid", 1.0, Setting(0), {}, None, "x", metrics)


def test_evidence_ends_at_the_largest_batch_a_non_overloaded_point_reached():
    pts = [_pt({"batch_size_max": 12, "overloaded": 0, "ttft_ms_p50": 20.0}),
           _pt({"batch_size_max": 40, "overloaded": 0, "ttft_ms_p50": 30.0}),
           _pt({"batch_size_max": 128, "overloaded": 1, "ttft_ms_p50": 30.0}),  # queue grows: not evidence
           _pt({"batch_size_max": 90, "overloaded": 0, "ttft_ms_p50": 500.0})]  # TTFT 50x the reference
    assert _tuner(pts).evidence_top() == 40
    res = TuneResult(schedule=[(1, 24, 3), (25, 40, 2)], schedule_table={"merged": []}, evidence_top=40)
    ev = schedule_evidence(res, 1024)
    assert ev["schedule_ends_at"] == 40 and ev["largest_batch_simulated"] == 40
    assert ev["beyond"].startswith("batch sizes 41-1024 take the last range's k (2")


@pytest.mark.parametrize("burst, warm_cfg, want", [(True, 0, 8), (True, 3, 3), (False, 0, 0)])
def test_closed_loop_points_leave_out_their_start_burst(burst, warm_cfg, want):
    base = load(REPO / "configs" / "default.yaml", [f"workload.warmup_requests={warm_cfg}",
                                                    "workload.num_requests=40"])
    ov = workload_overrides(base, AXES["concurrency"], 8, burst)
    assert ov.get("workload.warmup_requests", warm_cfg) == want
    assert ov["workload.num_requests"] == 88 + want  # the measured count stays the dataset's
    assert "workload.warmup_requests" not in workload_overrides(base, AXES["qps"], 2.0, burst)
