"""Dual-batch overlap (vLLM's ``--enable-dbo``): when a data-parallel group's step splits, and what overlaps what.

vLLM 0.33.0 with ``--enable-dbo`` on a data-parallel + expert-parallel deployment
runs a step as two micro-batches, each on its own CPU thread, that hand the GPU
to each other at the MoE layer's communication points so that one micro-batch's
DeepEP dispatch and combine run while the other computes (``docs/design/dbo.md``;
``vllm/v1/worker/ubatching.py``, the yields in ``FusedMoEModularKernel.forward``).
vLLM 0.33 picks its V1 model runner for it (the V2 runner does not support DBO
unless ``VLLM_USE_V2_MODEL_RUNNER=1``, and never with speculative decoding:
``vllm/config/vllm.py`` ``_get_dbo_unsupported_features``), so the split is the
V1 runner's (``vllm/v1/worker/gpu_model_runner.py``
``_determine_batch_execution_and_padding``, ``vllm/v1/worker/dp_utils.py``,
``vllm/v1/worker/ubatch_utils.py``):

* **whether** (:meth:`DualBatchOverlap.split_point`): every rank must want to
  split: its step is a *uniform decode* (every request's query exactly
  ``1 + num_speculative_tokens`` tokens) of at least
  ``dbo_decode_token_threshold`` tokens, or any other step of at least
  ``dbo_prefill_token_threshold`` tokens; a rank running vLLM's dummy batch has
  too few. Then the ranks pad to the largest rank's tokens N and the split is
  abandoned if the smallest rank's second micro-batch would be empty
  (``N // 2 >= n_min``, ``is_last_ubatch_empty``);
* **where** (:func:`cut`): at token ``N // 2`` of each rank's step, requests in
  the step's order (decodes first, then prefill chunks, as vLLM orders them): a
  request across the cut is split, its second part attending to its first part's
  KV (``maybe_create_ubatch_slices``);
* **what overlaps what** (:func:`moe_layer_ms`): per MoE layer, the schedule of
  the design doc, micro-batches 0 and 1, ``A`` the attention block (projections,
  attention, norms, MoE router), ``S`` the shared experts, ``E`` the routed
  experts, ``D``/``C`` dispatch/combine::

      compute: | A0  | E1 | S1 + E0 | S0 + A1 |
      comm:    | D1  | D0 |   C1    |   C0    |

  each slot lasting the longer of its two rows. The dense leading layers have no
  all-to-all: both micro-batches run them one after the other.

Times in ms; token counts in tokens.
"""

from __future__ import annotations

from typing import List, NamedTuple, Optional, Sequence, Tuple

from vidur_specdec.pricing.plan import StepPlan, plan_from_lists

MICRO_BATCHES = 2  # vLLM 0.33 ParallelConfig.num_ubatches with enable_dbo


class DualBatchOverlap(NamedTuple):
    """A deployment's DBO settings: vLLM's two thresholds (tokens per rank) and its uniform decode query length
    (``1 + num_speculative_tokens``; 1 without speculation)."""

    decode_threshold: int
    prefill_threshold: int
    decode_query_len: int

    def wants(self, part: StepPlan) -> bool:
        """One rank's vote (``check_ubatch_thresholds``): its tokens against the threshold of its kind of step,
        a uniform decode when every request's query is ``decode_query_len`` tokens (V1's ``_is_uniform_decode``
        reads query lengths only: a one-token chunk finishing a loaded prompt counts at k = 0)."""
        comp = part.composition
        lens = list(comp.decode_q) + [c for _, c in comp.prefill]
        uniform = bool(lens) and all(x == self.decode_query_len for x in lens)
        return part.num_tokens >= (self.decode_threshold if uniform else self.prefill_threshold)

    def split_point(self, parts: Sequence[StepPlan]) -> Optional[int]:
        """The token at which every rank's step splits (``N // 2``), or None when the group runs it whole."""
        if not all(self.wants(p) for p in parts):
            return None
        tokens = [p.num_tokens for p in parts]
        half = max(tokens) // MICRO_BATCHES
        return None if half >= min(tokens) else half


def cut(part: StepPlan, at: int) -> Tuple[StepPlan, StepPlan]:
    """A rank's step as its two micro-batches, split at token ``at`` (requests in step order; a request across the
    cut split in two, the second part after the first's KV). Only what the layers read is kept: each request's
    tokens and context (the drafter, LM head and sampler run once over the merged step)."""
    comp = part.composition
    halves = ([[], [], []], [[], [], []])  # per micro-batch: decode tokens, decode context, (context, chunk)
    seen = 0
    for q, ctx in zip(comp.decode_q, comp.decode_ctx):
        seen = _place(halves, seen, at, q, ctx, decode=True)
    for ctx, c in comp.prefill:
        seen = _place(halves, seen, at, c, ctx, decode=False)
    return tuple(plan_from_lists(dq, dc, pre) for dq, dc, pre in halves)


def _place(halves, seen: int, at: int, n: int, ctx: int, decode: bool) -> int:
    """Put a request's ``n`` tokens (after ``ctx`` of context) into the micro-batches; returns the tokens placed."""
    first = max(0, min(n, at - seen))
    for i, (k, c) in enumerate(((first, ctx), (n - first, ctx + first))):
        if k <= 0:
            continue
        if decode:
            halves[i][0].append(k)
            halves[i][1].append(c)
        else:
            halves[i][2].append((c, k))
    return seen + n


class LayerParts(NamedTuple):
    """One MoE layer of a split step (ms; each the slowest rank's where ranks differ): ``a0``/``a1`` the attention
    blocks, ``s1`` micro-batch 1's shared experts, ``s0a1`` micro-batch 0's shared experts then micro-batch 1's
    attention block, ``e0``/``e1`` the routed experts on the busiest GPU, ``d0``/``d1``/``c0``/``c1`` dispatch and
    combine."""

    a0: float
    a1: float
    s1: float
    s0a1: float
    e0: float
    e1: float
    d0: float
    d1: float
    c0: float
    c1: float


def moe_layer_ms(p: LayerParts) -> Tuple[float, float]:
    """(compute on the critical path, all-to-all left exposed) of one MoE layer under the overlap schedule
    (module docstring), ms: the layer lasts their sum."""
    slots: List[Tuple[float, float]] = [(p.a0, p.d1), (p.e1, p.d0), (p.s1 + p.e0, p.c1), (p.s0a1, p.c0)]
    compute = sum(c for c, _ in slots)
    exposed = sum(max(0.0, m - c) for c, m in slots)
    return compute, exposed
