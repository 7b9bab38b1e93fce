"""steps.csv under pipeline parallelism: one row per micro-batch step, its stages summed.

Vidur schedules each stage of a batch separately (``ReplicaStageScheduleEvent``);
:class:`PipelineStepRecorder` keeps one row per step (the batch, as at one
stage) so the request and acceptance columns count once, and adds its stages:

* ``duration_ms`` — the sum of the step's stage times: its layers on every
  stage, the sends between them, the engine's CPU work (first stage) and the LM
  head, sampling and drafter (last stage); the step's latency through an idle
  pipeline;
* ``stage_ms_max`` — its slowest stage (ms): with the pipeline full, steps
  leave it one per slowest stage;
* ``pp_send_ms`` — its stage-to-stage sends (ms, part of ``verify_ms``);
* ``pipeline_ms`` — first stage's start to last stage's end in simulated time
  (ms): ``duration_ms`` plus the time it waited for a stage still busy with
  another micro-batch.

Times ``*_ms`` are milliseconds, ``start_s`` seconds of simulated time.
"""

from __future__ import annotations

from typing import Dict, Tuple

import numpy as np
import pandas as pd

from vidur_specdec.engine.metrics import STEP_COLUMNS, StepRecorder

PIPELINE_COLUMNS = ["stage_ms_max", "pp_send_ms", "pipeline_ms"]
_SUMMED = ("duration_ms", "draft_ms", "verify_ms", "comm_ms", "lm_head_ms", "sampling_ms", "overhead_ms", "moe_ms")
_AT = {c: STEP_COLUMNS.index(c) for c in _SUMMED}


class PipelineStepRecorder(StepRecorder):
    """:class:`StepRecorder` for ``stages`` > 1 pipeline stages: one row per step, stage times added up."""

    def __init__(self, stages: int, track_replicas: bool = True) -> None:
        super().__init__(track_replicas)
        self.stages = stages
        self._open: Dict[Tuple[int, int], list] = {}  # (replica, batch id) -> its row

    def record(self, time: float, replica: int, stage: int, key, price) -> None:
        k = (replica, key)
        ms = price.total_time * 1e3
        send = price.send_ms
        if stage == 0:
            super().record(time, replica, stage, key, price)
            row = list(self.rows[-1]) + [ms, send, float("nan")]
            self.rows[-1] = row
            self._open[k] = row
            return
        row = self._open[k]
        parts = (ms, price.draft_ms, price.verify_ms, price.comm_ms, price.lm_head_ms, price.sampling_ms,
                 price.overhead_ms, price.moe_ms)
        for col, v in zip(_SUMMED, parts):
            row[_AT[col]] += v
        n = len(STEP_COLUMNS)
        row[n] = max(row[n], ms)
        row[n + 1] += send

    def stage_end(self, time: float, replica: int, stage: int, key) -> None:
        if stage != self.stages - 1:
            return
        row = self._open.pop((replica, key))
        row[len(STEP_COLUMNS) + 2] = (time - row[STEP_COLUMNS.index("start_s")]) * 1e3

    def steps_frame(self) -> pd.DataFrame:
        """One row per step in start-time order, ties by replica id, with the pipeline columns."""
        df = pd.DataFrame([tuple(r) for r in self.rows], columns=STEP_COLUMNS + PIPELINE_COLUMNS)
        df = df.sort_values(["start_s", "replica"], kind="stable").reset_index(drop=True)
        df["step"] = np.arange(len(df))
        return df
