"""What a step costs beyond the decoder layers: LM head, logits gather, sampling, engine overhead.

Vidur's per-layer model leaves out everything after the last layer and
everything on the CPU. :class:`StepOverheads` prices, per step (all ms):

* ``lm_head_ms`` — the LM-head GEMM ``[rows x hidden] x [hidden x vocab/TP]``
  (the run's kernel source, :mod:`vidur_specdec.costs.kernels`) on every row that needs logits
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
  processing): ``step_overhead_ms`` + ``overhead_ms_per_request`` × requests;
  plus, on a step that verifies guesses (whatever the proposer),
  ``spec_step_ms`` + ``spec_ms_per_request`` × requests verified with guesses
  (speculative metadata and input preparation, the rejection sampler's launch,
  k + 1 outputs per request processed); plus the target's launch costs when
  CUDA graphs are off (``enforce_eager``: ``eager_ms_per_layer`` × (layers + 1))
  or piecewise (``graph_ms``: vLLM's model runner v1 with a per-batch-size
  schedule, :func:`piecewise_graphs`).

Defaults and their sources: docs/model.md, "One step". A step is charged
these in series with the layers (no overlap).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Tuple

from vidur_specdec.costs.kernels import as_kernels
from vidur_specdec.costs.profiles.params import DTYPE_BYTES

SAMPLING_LOGIT_BYTES = 4  # vLLM computes sampling on fp32 logits (the LM head's own output is bf16: DTYPE_BYTES)


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
    kernels: object = None  # the run's KernelSource (vidur_specdec.costs.kernels); None: the roofline on ``device``
    step_overhead_ms: float = 0.0
    overhead_ms_per_request: float = 0.0
    sampling_ms: float = 0.0
    sampling_logit_passes: float = 0.0
    lm_head: bool = True  # False: leave the LM head (and logits gather) out, as Vidur does
    spec_step_ms: float = 0.0  # per step that verifies guesses
    spec_ms_per_request: float = 0.0  # per request verified with guesses
    launch_ms: float = 0.0  # per step: eager launches (enforce_eager) or piecewise CUDA graphs

    def cost(self, batch) -> StepCost:
        """The step's LM head, sampling and engine overhead (ms)."""
        verifying = sum(1 for r, q in zip(batch.requests, batch.num_q_tokens) if r.is_prefill_complete and q > 1)
        return self.cost_rows(logit_rows(batch), len(batch.requests), verifying)

    def cost_rows(self, rows: int, num_reqs: int, verifying: int = 0, logits=None) -> StepCost:
        """The same for a step of ``num_reqs`` requests with ``rows`` positions that need logits,
        ``verifying`` of them verified with guesses; ``logits``: :meth:`logits_ms` of ``rows``, when the caller
        has it."""
        head, sample = self.logits_ms(rows) if logits is None else logits
        return StepCost(head, sample, self.overhead_for(num_reqs, verifying))

    def logits_ms(self, rows: int) -> Tuple[float, float]:
        """(LM head with its TP logits gather, sampling) in ms for ``rows`` positions that need logits."""
        head = sample = 0.0
        if rows > 0:
            sample = self.sampling_ms
            if self.model is not None and self.device is not None:
                vocab, hidden = self.model.vocab_size, self.model.hidden_size
                if self.lm_head:
                    k = as_kernels(self.kernels if self.kernels is not None else self.device)
                    head = k.lm_head_ms(hidden, vocab, self.tp, rows)
                    if self.tp > 1:
                        head += k.nccl_all_reduce_ms(self.tp, rows * vocab * DTYPE_BYTES // 2)
                sample += (self.sampling_logit_passes * rows * vocab * SAMPLING_LOGIT_BYTES
                           / self.device.hbm_bandwidth * 1e3)
        return head, sample

    def overhead_for(self, num_reqs: int, verifying: int = 0) -> float:
        """The engine's CPU work (ms) on the critical path of a step of ``num_reqs`` requests, ``verifying`` of
        them verified with guesses."""
        overhead = self.step_overhead_ms + self.overhead_ms_per_request * num_reqs + self.launch_ms
        if verifying:
            overhead += self.spec_step_ms + self.spec_ms_per_request * verifying
        return overhead


def piecewise_graphs(cfg) -> bool:
    """True when vLLM runs the target with piecewise CUDA graphs: a per-batch-size k schedule on model runner
    v1 (vLLM 0.33 ``vllm/config/vllm.py:1069-1086`` overrides FULL_AND_PIECEWISE; v2 keeps full graphs;
    v1 drops the schedule for ``suffix``, so its graphs stay full)."""
    spec = cfg.speculative
    return bool(spec.enabled and spec.num_speculative_tokens_per_batch_size and cfg.engine.model_runner == "v1"
                and spec.method != "suffix" and not cfg.engine.enforce_eager)


def launch_ms(engine, model=None, target_time=None, piecewise: bool = False) -> float:
    """What launching the target's step costs beyond full CUDA graphs (ms per step).

    ``enforce_eager``: ``eager_ms_per_layer`` × (layers + 1) (the LM head and sampler count as one more);
    piecewise graphs: ``piecewise_graph_cost`` × the target's one-token forward through its layers
    (linear ops; a constant per step, as launch costs are). 0 otherwise or without a model.
    """
    layers = getattr(model, "num_layers", 0) or 0
    if engine.enforce_eager:
        return engine.eager_ms_per_layer * (layers + 1) if layers else 0.0
    if piecewise and target_time is not None and layers:
        return engine.piecewise_graph_cost * target_time.linear_sum_ms(1) * layers
    return 0.0


def build(engine, model=None, device=None, tp: int = 1, target_time=None, piecewise: bool = False,
          kernels=None) -> StepOverheads:
    """:class:`StepOverheads` from an :class:`~vidur_specdec.config.EngineConfig` and a deployment.

    ``target_time`` (the target's fitted operator model) and ``piecewise`` (:func:`piecewise_graphs`) price
    piecewise CUDA graphs; without them the step launches as full graphs (or eagerly, ``enforce_eager``).
    """
    return StepOverheads(
        model=model, device=device, tp=int(tp), kernels=kernels,
        step_overhead_ms=engine.step_overhead_ms,
        overhead_ms_per_request=engine.overhead_ms_per_request,
        sampling_ms=engine.sampling_ms,
        sampling_logit_passes=engine.sampling_logit_passes,
        lm_head=engine.lm_head,
        spec_step_ms=engine.spec_step_ms,
        spec_ms_per_request=engine.spec_ms_per_request,
        launch_ms=launch_ms(engine, model, target_time, piecewise),
    )

