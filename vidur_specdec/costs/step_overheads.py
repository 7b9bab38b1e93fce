"""What a step costs beyond the decoder layers: LM head, logits gather, sampling, engine overhead.

Vidur's per-layer model leaves out everything after the last layer and
everything on the CPU. :class:`StepOverheads` prices, per step (all ms):

* ``lm_head_ms`` — the LM-head GEMM ``[rows x hidden] x [hidden x vocab/TP]``
  (:func:`vidur_specdec.costs.lm_head.lm_head_ms`) on every row that needs logits
  (:func:`logit_rows`), plus at TP > 1 the gather of the logits shards to the
  sampling rank (vLLM's ``LogitsProcessor._gather_logits``), priced with the
  collective model as an all-reduce that moves the same bus bytes
  (``(n-1)/n · rows · vocab · 2`` bytes: an all-reduce of half the gathered
  tensor). It is part of the target's pass.
* ``sampling_ms`` — sampler / rejection sampler: a fixed kernel cost per step
  that samples at all, plus ``sampling_logit_passes`` passes over the fp32
  logits (rows × vocab × 4 bytes) at the device's HBM bandwidth.
* ``overhead_ms`` — the engine's per-step CPU work on the critical path
  (scheduling, input preparation, CUDA-graph replay / launch, output
  processing): ``step_overhead_ms`` + ``overhead_ms_per_request`` × requests.

Defaults and their sources: docs/model.md, "One step". A step is charged
these in series with the layers (no overlap).
"""

from __future__ import annotations

from dataclasses import dataclass
from vidur_specdec.hardware.collectives import all_reduce_ms
from vidur_specdec.costs.lm_head import lm_head_ms

LOGIT_BYTES = 4  # vLLM computes sampling on fp32 logits
LOGITS_DTYPE_BYTES = 2  # the LM head's output (bf16) as gathered across TP ranks


def logit_rows(batch) -> int:
    """Positions of the step that need logits.

    One per plain decode, ``guesses + 1`` per verify request (its
    ``num_q_tokens``), one per prefill chunk that completes its prompt (its KV
    after the chunk reaches the request's prefill target); a prefill chunk that
    does not complete the prompt needs none.
    """
    rows = 0
    for req, q, kv in zip(batch.requests, batch.num_q_tokens, batch.num_kv_tokens):
        if req.is_prefill_complete:
            rows += q
        elif kv >= req.num_prefill_tokens:
            rows += 1
    return rows


@dataclass(frozen=True)
class StepCost:
    """The parts of one step outside the decoder layers (ms)."""

    lm_head_ms: float = 0.0  # LM-head GEMM + TP logits gather
    sampling_ms: float = 0.0
    overhead_ms: float = 0.0  # engine CPU work on the critical path

    @property
    def total_ms(self) -> float:
        return self.lm_head_ms + self.sampling_ms + self.overhead_ms


@dataclass(frozen=True)
class StepOverheads:
    """Prices :class:`StepCost` for one deployment; built from ``engine.*`` by :func:`build`.

    ``model``/``device`` None (a predictor used without a deployment) prices
    the LM head and the logits passes at 0; the fixed terms still apply.
    """

    model: object = None  # ModelSpec (hidden_size, vocab_size)
    device: object = None  # DeviceSpec
    tp: int = 1
    step_overhead_ms: float = 0.0
    overhead_ms_per_request: float = 0.0
    sampling_ms: float = 0.0
    sampling_logit_passes: float = 0.0
    lm_head: bool = True  # False: leave the LM head (and logits gather) out, as Vidur does

    def cost(self, batch) -> StepCost:
        """The step's LM head, sampling and engine overhead (ms)."""
        return self.cost_rows(logit_rows(batch), len(batch.requests))

    def cost_rows(self, rows: int, num_reqs: int) -> StepCost:
        """The same for a step of ``num_reqs`` requests with ``rows`` positions that need logits."""
        head = sample = 0.0
        if rows > 0:
            sample = self.sampling_ms
            if self.model is not None and self.device is not None:
                vocab, hidden = self.model.vocab_size, self.model.hidden_size
                if self.lm_head:
                    head = lm_head_ms(self.device, hidden, vocab, self.tp, rows)
                    if self.tp > 1:
                        head += all_reduce_ms(self.device, self.tp, rows * vocab * LOGITS_DTYPE_BYTES // 2)
                sample += (self.sampling_logit_passes * rows * vocab * LOGIT_BYTES
                           / self.device.hbm_bandwidth * 1e3)
        overhead = self.step_overhead_ms + self.overhead_ms_per_request * num_reqs
        return StepCost(head, sample, overhead)


def build(engine, model=None, device=None, tp: int = 1) -> StepOverheads:
    """:class:`StepOverheads` from an :class:`~vidur_specdec.config.EngineConfig` and a deployment."""
    return StepOverheads(
        model=model, device=device, tp=int(tp),
        step_overhead_ms=engine.step_overhead_ms,
        overhead_ms_per_request=engine.overhead_ms_per_request,
        sampling_ms=engine.sampling_ms,
        sampling_logit_passes=engine.sampling_logit_passes,
        lm_head=engine.lm_head,
    )

