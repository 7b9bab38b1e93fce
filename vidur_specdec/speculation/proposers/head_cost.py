"""Shared pricing of drafters that run sequential passes (draft model, EAGLE-family heads).

A step's drafting is a list of sequential **passes**. Each pass carries, per
decoding request that still drafts, some query tokens over that request's own
draft KV, and asks the LM head for some rows of logits:

* pass 1 carries the request's **catch-up** tokens — the tokens advanced in its
  previous step (accepted + 1), which the drafter has not seen yet — and the
  step's prefill chunks (the drafter builds its KV for prompts too); it needs
  logits at one position per request (and per prefill chunk);
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

from dataclasses import dataclass
from typing import List, Optional, Sequence, Tuple

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
    """The passes of one step's drafting (see the module notes); empty when nobody guesses nor prefills."""
    guesses = guesses_of(comp)
    catch = list(getattr(comp, "decode_catchup", None) or [1] * len(guesses))
    drafting = [i for i, g in enumerate(guesses) if g > 0]
    prefill = list(comp.prefill)
    if not drafting:
        return [Pass([], [], len(prefill), prefill)] if prefill else []
    ctx = comp.decode_ctx
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
