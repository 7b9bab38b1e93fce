"""Verify-attention cost: how a step's decoding requests are priced in attention.

A decoding request charged ``q = 1 + guesses`` query tokens with ``ctx`` tokens
already in its KV cache is one of:

* ``shared_kv`` — its KV is read once for all q queries (a tree/multi-query
  kernel): priced as one decode read at context ``ctx + q``. Lower bound.
* ``per_token`` — q separate decode reads at growing context ``ctx+1 .. ctx+q``
  (what a plain decode kernel does with q rows): priced as ``Σq`` decode reads
  at their mean context. Upper bound; never below ``shared_kv`` by construction.
* ``interpolated`` — ``λ·per_token + (1−λ)·shared_kv``.

Plain decodes (q = 1) cost the same under all three. Linear layers are not
priced here: they are charged on all query tokens of the step (the predictor).
All times are ms per layer.
"""

from __future__ import annotations

from typing import Sequence


class VerifyCost:
    """Base class: ``attention_ms(model, q, ctx)`` for the decoding requests of one step."""

    name = ""

    def attention_ms(self, model, decode_q: Sequence[int], decode_ctx: Sequence[int]) -> float:
        raise NotImplementedError


class SharedKV(VerifyCost):
    """Each request's KV read once: one decode read per request at context ctx + q."""

    name = "shared_kv"

    def attention_ms(self, model, decode_q, decode_ctx) -> float:
        n = len(decode_q)
        mean_kv = (sum(decode_ctx) + sum(decode_q)) / n
        return model.decode_attention_ms(n, mean_kv)


class PerToken(VerifyCost):
    """q separate decode reads per request at contexts ctx+1..ctx+q; never below SharedKV."""

    name = "per_token"

    def attention_ms(self, model, decode_q, decode_ctx) -> float:
        reads = sum(decode_q)
        # Σ over requests of Σ_{j=1..q} (ctx + j) = Σ q·ctx + q(q+1)/2
        kv_sum = sum(q * c + q * (q + 1) / 2 for q, c in zip(decode_q, decode_ctx))
        per_token = model.decode_attention_ms(reads, kv_sum / reads)
        return max(per_token, SharedKV.attention_ms(self, model, decode_q, decode_ctx))


class Interpolated(VerifyCost):
    """Weight λ on per_token and 1−λ on shared_kv."""

    name = "interpolated"

    def __init__(self, weight: float) -> None:
        if not 0.0 <= weight <= 1.0:
            raise ValueError(f"interpolation weight must be in [0, 1], got {weight}")
        self.weight = weight

    def attention_ms(self, model, decode_q, decode_ctx) -> float:
        lo = SharedKV.attention_ms(self, model, decode_q, decode_ctx)
        hi = PerToken.attention_ms(self, model, decode_q, decode_ctx)
        return self.weight * hi + (1.0 - self.weight) * lo


def build(spec) -> VerifyCost:
    """The policy named by ``speculative.verify_attention``."""
    if spec.verify_attention == "shared_kv":
        return SharedKV()
    if spec.verify_attention == "per_token":
        return PerToken()
    if spec.verify_attention == "interpolated":
        return Interpolated(spec.verify_interpolation_weight)
    raise ValueError(f"unknown verify_attention {spec.verify_attention!r}")
