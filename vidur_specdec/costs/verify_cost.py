"""Verify-attention cost: how a step's decoding requests are priced in attention.

A decoding request charged ``q = 1 + guesses`` query tokens with ``ctx`` tokens
already in its KV cache is one of the registered policies
(``speculative.verify_attention``; :data:`REGISTRY`):

* ``shared_kv`` — its KV is read once for all q queries (a tree/multi-query
  kernel): priced as one decode read at context ``ctx + q``. Lower bound.
* ``per_token`` — q separate decode reads at growing context ``ctx+1 .. ctx+q``
  (what a plain decode kernel does with q rows): priced as ``Σq`` decode reads
  at their mean context. Upper bound; never below ``shared_kv`` by construction.
* ``interpolated`` — ``λ·per_token + (1−λ)·shared_kv``
  (``speculative.verify_interpolation_weight``).

A token tree's N nodes are N + 1 query tokens under tree-masked attention: the
same multi-query read, priced by the same policy. Plain decodes (q = 1) cost
the same under all three. Linear layers are not priced here: they are charged
on all query tokens of the step (the predictor). All times are ms per layer.
A new policy is a subclass decorated with :func:`register` (and its docs); the
contract test ``tests/test_proposer_contract.py`` runs over every one.
"""

from __future__ import annotations

from operator import mul
from typing import Dict, Sequence

from vidur_specdec.config.registry import register_choices

REGISTRY: Dict[str, type] = {}


def register(name: str):
    """Class decorator: make a policy available as ``speculative.verify_attention: NAME``."""

    def deco(cls):
        cls.name = name
        REGISTRY[name] = cls
        return cls

    return deco


def policy_names() -> tuple:
    return tuple(REGISTRY)


register_choices("speculative.verify_attention", policy_names)


class VerifyCost:
    """Base class: ``attention_ms(model, q, ctx)`` for the decoding requests of one step."""

    name = ""

    @classmethod
    def from_spec(cls, spec) -> "VerifyCost":
        return cls()

    def attention_ms(self, model, decode_q: Sequence[int], decode_ctx: Sequence[int]) -> float:
        raise NotImplementedError


def _one_read_each(model, n: int, kv_tokens: int) -> float:
    """SharedKV's price (ms): ``n`` decode reads at their mean KV (``kv_tokens`` in all, query tokens included)."""
    return model.decode_attention_ms(n, kv_tokens / n)


@register("shared_kv")
class SharedKV(VerifyCost):
    """Each request's KV read once: one decode read per request at context ctx + q."""

    def attention_ms(self, model, decode_q, decode_ctx) -> float:
        n = len(decode_q)
        if n == 0:
            return 0.0
        return _one_read_each(model, n, sum(decode_ctx) + sum(decode_q))


@register("per_token")
class PerToken(VerifyCost):
    """q separate decode reads per request at contexts ctx+1..ctx+q; never below SharedKV."""

    def attention_ms(self, model, decode_q, decode_ctx, shared_kv_ms=None) -> float:
        """``shared_kv_ms``: the SharedKV price of the same reads, when the caller already has it."""
        reads = sum(decode_q)
        if reads == 0:
            return 0.0
        if reads == len(decode_q):  # plain decodes only (q = 1 each): one read each at ctx + 1, SharedKV's very read
            return _one_read_each(model, reads, sum(decode_ctx) + reads)  # (the same exact mean: (Σctx + n) / n)
        # Σ over requests of Σ_{j=1..q} (ctx + j) = Σ q·ctx + (Σ q² + Σ q) / 2: integers but the last halving,
        # so every partial sum is exact and the total the same float whatever the grouping
        kv_sum = sum(map(mul, decode_q, decode_ctx)) + (sum(map(mul, decode_q, decode_q)) + reads) / 2
        per_token = model.decode_attention_ms(reads, kv_sum / reads)
        if shared_kv_ms is None:
            shared_kv_ms = _one_read_each(model, len(decode_q), sum(decode_ctx) + reads)
        return per_token if per_token >= shared_kv_ms else shared_kv_ms


@register("interpolated")
class Interpolated(VerifyCost):
    """Weight λ on per_token and 1−λ on shared_kv."""

    def __init__(self, weight: float = 0.5) -> None:
        if not 0.0 <= weight <= 1.0:
            raise ValueError(f"interpolation weight must be in [0, 1], got {weight}")
        self.weight = weight

    @classmethod
    def from_spec(cls, spec) -> "Interpolated":
        return cls(spec.verify_interpolation_weight)

    def attention_ms(self, model, decode_q, decode_ctx) -> float:
        lo = SharedKV.attention_ms(self, model, decode_q, decode_ctx)
        hi = PerToken.attention_ms(self, model, decode_q, decode_ctx, shared_kv_ms=lo)
        return self.weight * hi + (1.0 - self.weight) * lo


def build(spec) -> VerifyCost:
    """The policy named by ``speculative.verify_attention``."""
    try:
        cls = REGISTRY[spec.verify_attention]
    except KeyError:
        raise ValueError(f"unknown verify_attention {spec.verify_attention!r}; "
                         f"registered: {', '.join(REGISTRY)}") from None
    return cls.from_spec(spec)
