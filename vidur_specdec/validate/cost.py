"""The simulator's cost model for one step of arbitrary composition.

:meth:`CostModel.composition_ms` prices a step exactly as the simulator's
predictor does: per layer, the linear/elementwise ops over the step's tokens
(``OperatorTimeModel.linear_sum_ms``), verify/decode attention under the
configured ``speculative.verify_attention`` policy, and prefill attention per
chunk; times the target's layer count; plus the configured proposer's time.
For a composition the simulator itself produced this equals its
``verify_ms`` and ``draft_ms``; :meth:`CostModel.step_ms` adds the LM head,
sampling and engine overhead (:mod:`vidur_specdec.costs.step_overheads`) to give
the whole step, its ``duration_ms``.

A step log gives only sums, so :func:`split_sums` rebuilds a composition from
them; the approximation (and the direction of its error) is:

* guesses are spread evenly over the decoding requests (``spec_tokens /
  decode_reqs``, integers differing by at most one). Exact for
  ``shared_kv``; ``per_token`` attention is convex in a request's guesses, so
  an uneven real split costs a little more than predicted (under-prediction).
  The ``fixed`` proposer is priced by the longest draft, which the even
  split can only under-state.
* context (``ctx_tokens``, summed over all requests) is given to the decoding
  requests, evenly; prefill chunks are taken to start at context 0 (a fresh
  prompt) unless no request decodes. Decode attention is priced at the mean
  context anyway, so this is exact when every prefill chunk is a prompt's
  first; a chunk that continues a long prompt moves its context onto the
  decodes: decode attention is then over-predicted and that chunk's prefill
  attention under-predicted.
* prefill tokens are spread evenly over the requests that do not decode.
  Prefill attention grows faster than linearly with chunk length, so uneven
  chunks cost more than predicted (under-prediction).

The linear part, usually most of a step, is exact (it depends on the
step's token count only).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import List, Optional, Sequence, Tuple
from vidur_specdec.costs import verify_cost
from vidur_specdec.hardware.collectives import all_reduce_model
from vidur_specdec.speculation.proposers.base import ProposerContext

Composition = Tuple[List[int], List[int], List[Tuple[int, int]]]


@dataclass
class CostModel:
    """Target operator times, its layer count, the verify-attention policy and the proposer."""

    target: object  # vidur_specdec.engine.predictor.OperatorTimeModel
    num_layers: int
    verify: object  # vidur_specdec.costs.verify_cost.VerifyCost
    proposer: object  # vidur_specdec.speculation.proposers.Proposer
    model: str = ""
    overheads: object = None  # vidur_specdec.costs.step_overheads.StepOverheads: LM head, sampling, engine overhead

    @classmethod
    def from_config(cls, cfg) -> "CostModel":
        """The cost model a simulation of ``cfg`` (a RunConfig) uses: same profiles, policy, proposer."""
        # lazy: start-up cost of pandas
        from vidur_specdec.engine import deployment
        from vidur_specdec.engine.resolve import priced, resolve
        from vidur_specdec.costs import step_overheads

        spec = cfg.speculative
        dep = resolve(cfg).deployment
        if dep.dp > 1:  # a step log is one engine's; a data-parallel group's step needs every rank's batch
            from vidur_specdec.config import ConfigError

            raise ConfigError("parallel.data_parallel_size: validate prices one engine's step log; a data-parallel "
                              "group (> 1) is not modelled here")
        target, proposer, _ = priced(cfg, dep, deployment.longest_request_tokens(cfg))
        proposer.bind(ProposerContext(dep.device, dep.tp, all_reduce_model(cfg.engine.all_reduce), dep.kernels))
        return cls(target, dep.model.num_layers, verify_cost.build(spec), proposer, cfg.model,
                   step_overheads.build(cfg.engine, dep.model, dep.device, dep.tp, target,
                                        step_overheads.piecewise_graphs(cfg), kernels=dep.kernels))

    def composition_ms(self, decode_q: Sequence[int], decode_ctx: Sequence[int],
                       prefill: Sequence[Tuple[int, int]], num_tokens: Optional[int] = None) -> Tuple[float, float]:
        """(target forward ms, proposer ms) of one step.

        ``decode_q[i]``: tokens charged to decoding request i (1 + guesses);
        ``decode_ctx[i]``: its tokens in KV before the step; ``prefill``:
        (context before the chunk, chunk tokens) per prefill chunk;
        ``num_tokens`` defaults to the sum of all of them.
        """
        # lazy: start-up cost of pandas, scipy, sklearn, vidur
        from vidur_specdec.engine.predictor import StepComposition

        n = int(num_tokens if num_tokens is not None else sum(decode_q) + sum(c for _, c in prefill))
        m = self.target
        layer = m.linear_sum_ms(n)
        if len(decode_q):
            layer += self.verify.attention_ms(m, list(decode_q), list(decode_ctx))
        layer += sum(m.prefill_attention_ms(kv, c) for kv, c in prefill)
        comp = StepComposition(n, list(decode_q), list(decode_ctx), list(prefill))
        return layer * self.num_layers, float(self.proposer.step_time_ms(comp))


    def beyond_layers_ms(self, decode_q: Sequence[int], prefill: Sequence[Tuple[int, int]]) -> float:
        """LM head + sampling + engine overhead (ms) of a step, as the simulator charges them.

        Every prefill chunk is taken to complete its prompt (one LM-head row
        each): a step log does not say which chunk is a prompt's last, so this
        over-predicts by one row per non-final chunk (microseconds).
        """
        if self.overheads is None:
            return 0.0
        rows = int(sum(decode_q)) + len(prefill)
        verifying = sum(1 for q in decode_q if q > 1)
        return self.overheads.cost_rows(rows, len(decode_q) + len(prefill), verifying).total_ms

    def step_ms(self, decode_q: Sequence[int], decode_ctx: Sequence[int], prefill: Sequence[Tuple[int, int]],
                num_tokens: Optional[int] = None) -> float:
        """The whole step (ms): target forward + proposer + what the step costs beyond the layers."""
        t, d = self.composition_ms(decode_q, decode_ctx, prefill, num_tokens)
        return t + d + self.beyond_layers_ms(decode_q, prefill)


def _spread(total: int, n: int) -> List[int]:
    """``total`` split into ``n`` integers that differ by at most one."""
    if n <= 0:
        return []
    base, rem = divmod(int(total), n)
    return [base + 1] * rem + [base] * (n - rem)


def split_sums(num_reqs: int, decode_reqs: int, spec_tokens: int, prefill_tokens: int,
               ctx_tokens: int) -> Composition:
    """A composition rebuilt from a step log's sums (see the module notes for the error's direction)."""
    d = int(decode_reqs)
    prefill_reqs = max(int(num_reqs) - d, 1 if prefill_tokens > 0 else 0)
    decode_q = [1 + g for g in _spread(spec_tokens, d)]
    chunks = [c for c in _spread(prefill_tokens, prefill_reqs) if c > 0]
    if d > 0:
        decode_ctx = _spread(ctx_tokens, d)
        prefill = [(0, c) for c in chunks]
    else:
        decode_ctx = []
        prefill = list(zip(_spread(ctx_tokens, len(chunks)), chunks)) if chunks else []
    return decode_q, decode_ctx, prefill
