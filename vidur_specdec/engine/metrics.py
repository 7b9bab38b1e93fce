"""The project's own tables: requests, steps and a summary.

Vidur's ``MetricsStore`` assumes one token per iteration and calls a verify
request a prefill, so :class:`StepRecorder` replaces it inside the simulator
(same hooks, duck-typed) and records one row per engine step, named like a
real engine's step log. Times: ``*_s`` seconds of simulated time, ``*_ms``
milliseconds.
"""

from __future__ import annotations

import math
from typing import Dict, List, Mapping, Optional, Sequence

import numpy as np
import pandas as pd

REQUEST_COLUMNS = [
    "request_id", "arrived_at_s", "prompt_tokens", "output_tokens", "ttft_ms", "tpot_ms", "e2e_ms",
    "decode_steps", "guesses", "accepted_tokens", "restarts", "scheduled_at_s",
    "first_token_s", "completed_at_s", "replica",
]
STEP_COLUMNS = [
    "step", "replica", "start_s", "duration_ms", "num_reqs", "num_tokens", "decode_reqs", "guesses",
    "prefill_tokens", "ctx_tokens", "accepted_tokens", "draft_ms", "verify_ms", "comm_ms", "lm_head_ms",
    "sampling_ms", "overhead_ms", "k", "moe_ms", "experts_touched",
]
# A data-parallel group's steps add these (vidur_specdec/pricing/data_parallel.py): the target's all-to-all (ms)
# and the part of it the step waits for (part of verify_ms: all of it unless dual-batch overlap hid some), a
# drafter's own all-to-all (part of draft_ms), dbo (1: the step ran as two micro-batches), the slowest and the
# mean rank's own work (ms) and the ranks running vLLM's dummy batch
DP_COLUMNS = ["a2a_ms", "a2a_exposed_ms", "draft_a2a_ms", "dbo", "dp_slowest_rank_ms", "dp_mean_rank_ms",
              "dp_idle_ranks"]
# A run warns when more than this fraction of steps change k from the previous step
# (vLLM issue #49548: throughput collapses when the batch size hovers at a schedule boundary).
FLIP_WARN_FRACTION = 0.05


class StepRecorder:
    """Records one row per engine step (both engines call :meth:`record` when a step starts).

    ``track_replicas``: keep :attr:`replica_of` (request index -> the replica of its latest step) from the steps;
    the engine core, whose requests know their replica, turns it off and reads theirs.
    """

    def __init__(self, track_replicas: bool = True) -> None:
        self.rows: List[tuple] = []
        self.replica_of: Dict[int, int] = {}  # request index -> replica that ran its steps
        self.track_replicas = track_replicas

    def record(self, time: float, replica: int, stage: int, key, price) -> None:
        """A step starts on ``replica`` at ``time`` (s): its row, from the step plan the pricer priced
        (``price.plan``); ``key`` tells a pipelined step's stages apart (unused here)."""
        plan = price.plan
        if self.track_replicas:
            self.replica_of.update(dict.fromkeys(plan.indices, replica))
        more = price.dp_columns() if price.dp is not None else ()  # a data-parallel group: DP_COLUMNS
        self.rows.append((
            len(self.rows), replica, time, price.total_time * 1e3, len(plan.request_ids),
            plan.num_tokens, plan.num_decodes, plan.guesses_total, plan.prefill_tokens, plan.context_tokens,
            plan.accepted_total, price.draft_ms, price.verify_ms, price.comm_ms,
            price.lm_head_ms, price.sampling_ms, price.overhead_ms,
            price.k, price.moe_ms, price.experts_touched,
        ) + more)

    def stage_end(self, time: float, replica: int, stage: int, key) -> None:
        """A stage of a step ends (pipeline stages record it)."""

    # tables ------------------------------------------------------------------
    def steps_frame(self) -> pd.DataFrame:
        """One row per step in start-time order, ties by replica id; ``step`` numbers that order."""
        wide = any(len(r) > len(STEP_COLUMNS) for r in self.rows)
        rows = self.rows
        if wide:  # pools of which only one is data-parallel: the other's steps have no all-to-all (NaN there)
            pad = (math.nan,) * len(DP_COLUMNS)
            rows = [r if len(r) > len(STEP_COLUMNS) else r + pad for r in rows]
        df = pd.DataFrame(rows, columns=STEP_COLUMNS + DP_COLUMNS if wide else STEP_COLUMNS)
        df = df.sort_values(["start_s", "replica"], kind="stable").reset_index(drop=True)
        df["step"] = np.arange(len(df))
        return df


def requests_frame(requests: Sequence, replica_of: Optional[Mapping[int, int]] = None) -> pd.DataFrame:
    """One row per request (all must be completed SpecRequests), in workload order.

    ``replica_of`` maps a request's index to the replica that served it (-1 where unknown).
    """
    replica_of = replica_of or {}
    rows = []
    for r in requests:
        first = r.prefill_completed_at
        done = r.completed_at
        n = r.output_tokens
        tpot = (done - first) / (n - 1) * 1e3 if n > 1 else math.nan
        rows.append((
            r.index, r.arrived_at, r.prompt_tokens, n, (first - r.arrived_at) * 1e3, tpot,
            (done - r.arrived_at) * 1e3, r.decode_steps, r.guesses, r.accepted_tokens,
            r.num_restarts, r.scheduled_at, first, done, replica_of.get(r.index, -1),
        ))
    return pd.DataFrame(rows, columns=REQUEST_COLUMNS)


def _pct(x: pd.Series) -> Dict[str, float]:
    x = x.dropna().to_numpy(float)
    if len(x) == 0:
        return {"p50": math.nan, "p90": math.nan, "p99": math.nan, "mean": math.nan}
    p = np.percentile(x, [50, 90, 99])
    return {"p50": float(p[0]), "p90": float(p[1]), "p99": float(p[2]), "mean": float(x.mean())}


def k_flips(steps: pd.DataFrame) -> int:
    """Steps whose k differs from the previous step of the same replica (0 without a per-batch-size schedule).

    Each replica's scheduler keeps its own k, so steps are compared within a replica, not across
    the interleaved rows of several.
    """
    if "k" not in steps or len(steps) < 2:
        return 0
    groups = steps.groupby("replica", sort=True)["k"] if "replica" in steps else [(0, steps["k"])]
    return int(sum((k.to_numpy()[1:] != k.to_numpy()[:-1]).sum() for _, k in groups))


def flip_warning(summary: Dict) -> str:
    """One warning line when k flips on more than :data:`FLIP_WARN_FRACTION` of steps, else ''."""
    flips, n = summary.get("k_flips", 0), summary.get("num_steps", 0)
    if n and flips > FLIP_WARN_FRACTION * n:
        return (f"warning: k changed on {flips} of {n} steps ({flips / n:.0%}): the batch size hovers at a "
                "boundary of speculative.num_speculative_tokens_per_batch_size (vLLM issue #49548 reports "
                "throughput collapsing there); widen that range or move the boundary")
    return ""


def summarize(req: pd.DataFrame, steps: pd.DataFrame, extra: Dict) -> Dict:
    """Run summary: latency percentiles (ms), throughput (output tokens/s), acceptance drawn."""
    decode = int(req["decode_steps"].sum())
    accepted = int(req["accepted_tokens"].sum())
    guesses = int(req["guesses"].sum())
    span = float(req["completed_at_s"].max() - req["arrived_at_s"].min())
    out = {
        "num_requests": int(len(req)),
        "ttft_ms": _pct(req["ttft_ms"]),
        "tpot_ms": _pct(req["tpot_ms"]),
        "e2e_ms": _pct(req["e2e_ms"]),
        "output_tokens": int(req["output_tokens"].sum()),
        "makespan_s": span,
        "throughput_tok_s": float(req["output_tokens"].sum() / span) if span > 0 else math.nan,
        "num_steps": int(len(steps)),
        "decode_steps": decode,
        "mean_acceptance_length": (decode + accepted) / decode if decode else math.nan,
        "guesses": guesses,
        "accepted_tokens": accepted,
        "accepted_per_guess": accepted / guesses if guesses else math.nan,
        "mean_step_ms": float(steps["duration_ms"].mean()) if len(steps) else math.nan,
        "draft_ms_total": float(steps["draft_ms"].sum()),
        "verify_ms_total": float(steps["verify_ms"].sum()),
        "comm_ms_total": float(steps["comm_ms"].sum()),
        "lm_head_ms_total": float(steps["lm_head_ms"].sum()),
        "sampling_ms_total": float(steps["sampling_ms"].sum()),
        "overhead_ms_total": float(steps["overhead_ms"].sum()),
        "restarts": int(req["restarts"].sum()),
        "k_flips": k_flips(steps),
    }
    out.update(extra)
    return out


def data_parallel_summary(steps: pd.DataFrame, dp: int, redundant: int) -> Dict:
    """A data-parallel run's summary keys: ranks, EPLB's spare copies, and shares of the summed step time
    (``a2a_share``: the target's all-to-all the steps wait for, its exposed part; ``draft_a2a_share``: a drafter's
    own; ``dp_wait_share``: ranks waiting for the slowest rank, slowest minus mean); ``dbo_steps``: the share of
    steps run as two micro-batches (dual-batch overlap)."""
    total = float(steps["duration_ms"].sum()) if len(steps) else 0.0
    wide = "a2a_ms" in steps

    def share(x) -> float:
        return round(float(x) / total, 6) if total > 0 and wide else 0.0

    return {"data_parallel_size": dp, "num_redundant_experts": redundant,
            "a2a_share": share(steps["a2a_exposed_ms"].sum()) if wide else 0.0,
            "draft_a2a_share": share(steps["draft_a2a_ms"].sum()) if wide else 0.0,
            "dbo_steps": round(float(steps["dbo"].mean()), 6) if wide and len(steps) else 0.0,
            "dp_wait_share": share((steps["dp_slowest_rank_ms"] - steps["dp_mean_rank_ms"]).sum()) if wide else 0.0}
