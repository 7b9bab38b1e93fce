"""Shared pricing of drafters that run sequential passes (draft model, EAGLE-family heads).

A step's drafting is a list of sequential **passes**. Each pass carries, per
decoding request that still drafts, some query tokens over that request's own
draft KV, and asks the LM head for some rows of logits:

* pass 1 carries the request's **catch-up** tokens and the step's prefill
  chunks (the drafter builds its KV for prompts too); it needs logits at one
  position per request (and per prefill chunk). vLLM 0.33 runs this pass over
  the target's tokens of the previous step, 1 + its guesses then, rejected
  positions kept as padding (``disable_padded_drafter_batch`` False, the
  default; V1 ``vllm/v1/spec_decode/llm_base_proposer.py:554-564,679-684``,
  V2 ``target_dependent_ar/speculator.py:204-209``), so pass 1 carries that
  many tokens, not only the accepted + 1 the drafter had not seen;
* on a step whose scheduled k is 0 (a per-batch-size schedule,
  ``comp.drafter_sync``) pass 1 still runs over every decoding request, with no
  logits (vLLM keeps the drafter's KV in sync and returns no draft:
  ``llm_base_proposer.py:616-625``, V2 ``skip_sample``);
* chain drafts (no tree): pass j ≥ 2 carries one token per request whose draft
  has at least j guesses; k guesses take k passes;
* token trees: pass j ≥ 2 carries the nodes of tree level j − 1 (every node is a
  query token; tree-masked attention), and needs logits at each of them; a tree
  of depth D takes D passes.

Attention of a pass with q tokens of one request over its KV is priced with the
run's verify-attention policy (:mod:`vidur_specdec.costs.verify_cost`), the same
multi-query read the target's verify step is. Times in ms.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import List, Optional, Sequence, Tuple

from vidur_specdec.costs.profiles.params import DTYPE_BYTES
from vidur_specdec.speculation.proposers.base import guesses_of


@dataclass
class Pass:
    """One sequential drafter pass: tokens per request, KV before the pass, logit rows, prefill chunks."""

    q: List[int]  # query tokens per drafting request
    kv: List[int]  # that request's draft-KV tokens before the pass
    rows: int  # positions that need logits (LM head rows)
    prefill: List[Tuple[int, int]]  # (context before chunk, chunk tokens), pass 1 only

    @property
    def tokens(self) -> int:
        return sum(self.q) + sum(c for _, c in self.prefill)


def draft_passes(comp, tree_levels: Optional[Sequence[int]] = None) -> List[Pass]:
    """The passes of one step's drafting (see the module notes); empty when nobody guesses nor prefills
    (and the step is not a scheduled k = 0 step, whose one pass keeps the drafter's KV in sync)."""
    guesses = guesses_of(comp)
    catch = list(getattr(comp, "decode_prev_q", None) or getattr(comp, "decode_catchup", None)
                 or [1] * len(guesses))
    drafting = [i for i, g in enumerate(guesses) if g > 0]
    prefill = list(comp.prefill)
    ctx = comp.decode_ctx
    if not drafting:
        if getattr(comp, "drafter_sync", False) and guesses:  # k = 0: one pass, no logits for decodes
            q = [max(1, catch[i]) for i in range(len(guesses))]
            return [Pass(q, [max(0, ctx[i] - c + 1) for i, c in enumerate(q)], len(prefill), prefill)]
        return [Pass([], [], len(prefill), prefill)] if prefill else []
    # pass 1: catch-up tokens; the drafter's KV lags the target's by the catch-up minus the newest token
    q1 = [max(1, catch[i]) for i in drafting]
    kv1 = [max(0, ctx[i] - c + 1) for i, c in zip(drafting, q1)]
    out = [Pass(q1, kv1, len(drafting) + len(prefill), prefill)]
    if tree_levels:
        for j in range(2, len(tree_levels) + 1):
            width = tree_levels[j - 2]
            done = sum(tree_levels[:j - 2])
            out.append(Pass([width] * len(drafting), [ctx[i] + 1 + done for i in drafting],
                            width * len(drafting), []))
        return out
    for j in range(2, max(guesses) + 1):
        idx = [i for i in drafting if guesses[i] >= j]
        out.append(Pass([1] * len(idx), [ctx[i] + j - 1 for i in idx], len(idx), []))
    return out


def attention_ms(time_model, verify, p: Pass) -> float:
    """Attention of one pass per layer (ms): verify policy over decoding requests plus prefill chunks."""
    t = verify.attention_ms(time_model, p.q, p.kv) if p.q else 0.0
    return t + sum(time_model.prefill_attention_ms(kv, c) for kv, c in p.prefill)


# --------------------------------------------------------------------------- what vLLM adds to a pass

# draft logits stay in the model dtype (bf16, DTYPE_BYTES) for the argmax / the d2t scatter, as do hidden states


@dataclass(frozen=True)
class PassOverheads:
    """What one sequential drafter pass costs in vLLM beyond its layers, fc and LM head (all ms).

    Built from ``engine.*`` and ``speculative.draft_sample_method`` (:meth:`from_config`);
    defaults and sources in docs/model.md, "What a draft pass costs".
    """

    pass_ms: float = 0.0  # CUDA-graph replay / launch of the pass (graphs on)
    prepare_ms: float = 0.0  # input preparation before the pass: positions, slot mapping, attention metadata
    first_ms: float = 0.0  # more preparation before a step's first pass (inputs from the target's outputs)
    kernel_ms: float = 0.0  # one small kernel's launch + sync floor (sampling, d2t scatter)
    enforce_eager: bool = False  # no CUDA graphs: every layer's kernels launched one by one
    eager_ms_per_layer: float = 0.0  # launch cost per decoder layer per forward without graphs
    sample_passes: float = 1.0  # passes over a pass's logits to pick its guesses (greedy argmax: 1)
    device: object = None  # DeviceSpec (HBM bandwidth); None prices the byte terms at 0

    @classmethod
    def from_config(cls, cfg, device=None) -> "PassOverheads":
        e = cfg.engine
        probabilistic = getattr(cfg.speculative, "draft_sample_method", "greedy") == "probabilistic"
        return cls(e.draft_pass_ms, e.draft_prepare_ms, e.draft_first_pass_ms, e.kernel_launch_ms, e.enforce_eager,
                   e.eager_ms_per_layer, PROBABILISTIC_PASSES if probabilistic else 1.0, device)

    def bound(self, device) -> "PassOverheads":
        """The same settings priced on ``device`` (the target's GPU)."""
        return replace(self, device=device)

    def _bytes_ms(self, nbytes: float) -> float:
        bw = getattr(self.device, "hbm_bandwidth", None)
        return nbytes / bw * 1e3 if bw else 0.0

    def launch_ms(self, layers: int) -> float:
        """Launching one pass of ``layers`` decoder layers: a graph replay, or per layer (+ the LM head) eager."""
        return self.eager_ms_per_layer * (layers + 1) if self.enforce_eager else self.pass_ms

    def sample_ms(self, rows: int, vocab: int) -> float:
        """Picking a pass's guesses: argmax (greedy, vLLM's default) or sampling over ``rows × vocab`` logits."""
        if rows <= 0:
            return 0.0
        return self.kernel_ms + self._bytes_ms(self.sample_passes * rows * vocab * DTYPE_BYTES)

    def vocab_map_ms(self, rows: int, draft_vocab: int, vocab: int) -> float:
        """EAGLE-3's draft-to-target mapping: a −inf ``rows × vocab`` tensor filled, then the draft logits scattered
        into it (``llama_eagle3.py`` ``compute_logits``), and the argmax then runs over ``vocab``, not ``draft_vocab``."""
        if rows <= 0 or draft_vocab >= vocab:
            return 0.0
        return 2 * self.kernel_ms + self._bytes_ms(rows * (vocab + 2 * draft_vocab) * DTYPE_BYTES)

    def aux_hidden_ms(self, tokens: int, hidden: int, layers: int = 3) -> float:
        """The target's auxiliary hidden states for EAGLE-3: ``layers`` extra outputs of ``tokens × hidden``
        written by the target, then read and concatenated for the fused ``fc`` (written once more)."""
        if tokens <= 0:
            return 0.0
        return self.kernel_ms + self._bytes_ms(3 * layers * tokens * hidden * DTYPE_BYTES)


PROBABILISTIC_PASSES = 4.0  # softmax + Gumbel sample + caching the draft logits: read, write, read, read
