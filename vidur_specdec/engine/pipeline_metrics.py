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

    def __init__(self, stages: int) -> None:
        super().__init__()
        self.stages = stages
        self._open: Dict[Tuple[int, int], list] = {}  # (replica, batch id) -> its row

    def on_replica_stage_schedule(self, time, replica_id, stage_id, batch_stage, execution_time) -> None:
        replica = int(getattr(replica_id, "id", replica_id))
        key = (replica, batch_stage._batch_id)  # Vidur's BatchStage has no public accessor for its batch id
        ms = execution_time.total_time * 1e3
        send = getattr(execution_time, "send_ms", 0.0)
        if stage_id == 0:
            super().on_replica_stage_schedule(time, replica_id, stage_id, batch_stage, execution_time)
            row = list(self.rows[-1]) + [ms, send, float("nan")]
            self.rows[-1] = row
            self._open[key] = row
            return
        row = self._open[key]
        parts = (ms, execution_time.draft_ms, execution_time.verify_ms, execution_time.comm_ms,
                 execution_time.lm_head_ms, execution_time.sampling_ms, execution_time.overhead_ms,
                 getattr(execution_time, "moe_ms", 0.0))
        for col, v in zip(_SUMMED, parts):
            row[_AT[col]] += v
        n = len(STEP_COLUMNS)
        row[n] = max(row[n], ms)
        row[n + 1] += send

    def on_batch_stage_end(self, time, batch_stage, replica_id, stage_id) -> None:
        if stage_id != self.stages - 1:
            return
        replica = int(getattr(replica_id, "id", replica_id))
        row = self._open.pop((replica, batch_stage._batch_id))
        row[len(STEP_COLUMNS) + 2] = (time - row[STEP_COLUMNS.index("start_s")]) * 1e3

    def steps_frame(self) -> pd.DataFrame:
        """One row per step in start-time order, ties by replica id, with the pipeline columns."""
        df = pd.DataFrame([tuple(r) for r in self.rows], columns=STEP_COLUMNS + PIPELINE_COLUMNS)
        df = df.sort_values(["start_s", "replica"], kind="stable").reset_index(drop=True)
        df["step"] = np.arange(len(df))
        return df
