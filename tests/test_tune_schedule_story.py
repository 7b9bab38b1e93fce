"""The tune's answer agrees with itself: the schedule's ranges are wide and each change pays its price, the
headline's k at each load is the schedule's k at that load's batch size, and capacity is read at the SLO's
percentile (the recorded 70B EAGLE-3 tune with vLLM's serve defaults, and small synthetic tables)."""

import json

import pytest

from conftest import REPO
from vidur_specdec.speculation.schedule import KSchedule
from vidur_specdec.tune.capacity import sentence
from vidur_specdec.tune.choose import MIN_RANGE_WIDTH, change_price, range_gains, ranges_with_priced_changes
from vidur_specdec.tune.page import answer

RECORDED = REPO / "sweeps" / "results" / "tune" / "eagle3-70b" / "summary.json"


def _total(value, ranges, width):
    score = sum(value[b - 1][k] for lo, hi, k in ranges for b in range(lo, hi + 1))
    return score - sum(change_price(value, ranges[i][0], ranges[i - 1][2], ranges[i][2], width)
                       for i in range(1, len(ranges)))


def _brute(value, width):
    """Every split of 1..n into ranges of >= width sizes, every k: the best total (small n only)."""
    n, K = len(value), len(value[0])
    best = {}

    def go(start, prev, acc):
        if start > n:
            t = _total(value, acc, width)
            best[tuple(acc)] = t
            return
        for end in range(start + width - 1, n + 1):
            if n - end != 0 and n - end < width:
                continue
            for k in range(K):
                if k != prev:
                    go(end + 1, k, acc + [(start, end, k)])

    go(1, -1, [])
    return max(best.values())


def test_alternating_best_k_gives_one_range_not_one_size_ranges():
    # k = 1 best at odd sizes, k = 0 at even ones, by a little: no range narrower than the minimum
    value = [[1.0, 0.99] if b % 2 else [0.99, 1.0] for b in range(1, 41)]
    r = ranges_with_priced_changes(value, MIN_RANGE_WIDTH)
    assert len(r) == 1 and r[0][:2] == (1, 40)


def test_a_real_change_is_kept_and_a_worthless_one_is_not():
    big = [[0.6, 1.0]] * 30 + [[1.0, 0.6]] * 30  # k = 1 then k = 0, each by 40 %
    assert ranges_with_priced_changes(big, 8) == [(1, 30, 1), (31, 60, 0)]
    # an island of 5 sizes where the other k is better never becomes a range of 5
    island = [[1.0, 0.99]] * 20 + [[0.95, 1.0]] * 5 + [[1.0, 0.99]] * 20
    assert all(hi - lo + 1 >= 8 for lo, hi, _ in ranges_with_priced_changes(island, 8))
    # an island of 9 sizes better by 0.1 % next to sizes where it is 50 % worse cannot pay its edges
    flat_pricey = [[1.0, 0.5]] * 16 + [[0.999, 1.0]] * 9 + [[1.0, 0.5]] * 16  # edges cost a lot
    assert ranges_with_priced_changes(flat_pricey, 8) == [(1, 41, 0)]


@pytest.mark.parametrize("seed", range(6))
def test_the_programme_is_exact_on_small_tables(seed):
    import numpy as np

    rng = np.random.default_rng(seed)
    value = rng.uniform(0.8, 1.0, size=(20, 3)).tolist()
    r = ranges_with_priced_changes(value, 4)
    assert all(hi - lo + 1 >= 4 for lo, hi, _ in r) and r[0][0] == 1 and r[-1][1] == 20
    assert all(a[2] != b[2] and a[1] + 1 == b[0] for a, b in zip(r, r[1:]))
    assert _total(value, r, 4) == pytest.approx(_brute(value, 4), abs=1e-6)
    gains = range_gains(value, r, 4)
    assert [g["width"] for g in gains] == [hi - lo + 1 for lo, hi, _ in r]
    assert sum(g["mean_relative_value"] * g["width"] for g in gains) - sum(g.get("change_price", 0) for g in gains) \
        == pytest.approx(_total(value, r, 4), abs=1e-4)


def test_recorded_70b_tune_tells_one_story():
    s = json.loads(RECORDED.read_text())
    assert s["engine_args"]["max_num_seqs"] == 1024  # vLLM's serve default on an H100 (not the shipped 128)
    sched = s["schedule"]
    assert all(hi - lo + 1 >= MIN_RANGE_WIDTH for lo, hi, _ in sched)
    lookup = KSchedule([tuple(r) for r in sched], s["speculative_config"]["num_speculative_tokens"], sched[-1][1])
    head = answer(s, s["load_unit"])
    for c in s["checks"]:
        k = lookup.k_for(max(1, int(round(c["batch_size_p50"]))))
        assert c["schedule_k"] == k
        # the headline names the schedule's k at this load's batch size, and the best static k where it differs
        assert f"k = {k} at concurrency" in head or (k == 0 and "off at" in head)
        if c["best_static_k"] != k:
            assert f"the best static k is {c['best_static_k']}" in head
    pct = s["slo"]["percentile"]
    assert f"TTFT p{pct}" in head
    why = sentence(s["capacity_explained"], lambda x: f"concurrency {x}", True)
    assert f"p{pct}" in why and "does not" in why
    failed = s["capacity_explained"]["none"]["at_failed"]
    assert failed["failed"] and (failed[f"ttft_ms_p{pct}"] > s["slo"]["ttft_ms"]
                                 or failed[f"tpot_ms_p{pct}"] > s["slo"]["tpot_ms"])
