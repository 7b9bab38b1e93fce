"""Proposals that may be empty or short: how many guesses a proposer makes per request per step.

Model-based proposers (EAGLE family, MTP, Medusa, a draft model, ``fixed``)
always propose k guesses. Proposers that look the continuation up in text —
vLLM's ``ngram`` (prompt lookup) and ``suffix`` (suffix decoding) — propose
only when the request's context finds a match, so a request makes 0..k
guesses in a step:

* ``speculative.proposal_rate`` r is the fraction of a request's decode steps
  with a match (1 = every step, the default: what this simulator charged
  before and what vLLM 0.33's default runner charges whatever the match, see
  below). With ``speculative.proposal_spread`` s each request draws its own
  rate r_i ~ Beta(r·c, (1 − r)·c), c = r(1 − r)/s² − 1 (E[r_i] = r,
  sd(r_i) = s), as ``acceptance_spread`` does for α.
* ``ngram`` matches an n-gram of ``prompt_lookup_min``..``prompt_lookup_max``
  tokens (vLLM 0.33 ``vllm/config/speculative.py``: both 5 when unset, one
  given sets the other): a request whose context is shorter than
  ``prompt_lookup_min`` never matches (vLLM ``vllm/v1/spec_decode/ngram_proposer.py``).
  A match proposes k guesses.
* ``suffix`` proposes a variable number of guesses on a match: its matched
  suffix length m is drawn uniformly in 1..``suffix_decoding_max_tree_depth``
  and it proposes ``min(k, floor(suffix_decoding_max_spec_factor · m))``
  guesses (vLLM: ``max_spec_tokens = max_spec_factor * prefix_match_length``;
  the token-frequency cut ``suffix_decoding_min_token_prob`` is not modelled:
  it only shortens proposals further, which a lower factor expresses).

What a request without a match costs depends on vLLM's model runner
(``engine.model_runner``; vLLM 0.33 ``vllm/config/vllm.py`` makes V2 the
default and runs ``suffix`` on V1 because V2 does not support it):

* **v1** (CPU proposer): it proposes nothing, so the request is verified with
  zero guesses: charged one token, no lookahead KV reserved for that step, no
  acceptance drawn, a plain decode step (``ngram_proposer.py``: no match
  returns an empty draft).
* **v2** (GPU n-gram kernels, ``vllm/v1/worker/gpu/spec_decode/ngram/speculator.py``):
  every slot without a match is filled with the last sampled token, so the
  request is charged k + 1 and accepts nothing.

Draws come from one seeded stream per request (keyed by the run seed, a tag
apart from the workload's and the acceptance streams, and the request's
index), one entry per decode step, indexed by the request's decode-step
count: the same seed gives the same proposals whatever shares the batches.
"""

from __future__ import annotations

from typing import Optional, Sequence

import numpy as np

from vidur_specdec.config.seeds import PROPOSAL_SPREAD_STREAM, PROPOSAL_STREAM, beta_around, uniform_stream

DEFAULT_PROMPT_LOOKUP = 5  # vLLM 0.33 vllm/config/speculative.py: both 5 when neither is set

VARIABLE_METHODS = ("ngram", "suffix")  # methods whose proposals may be empty or short


def prompt_lookup(spec) -> tuple:
    """(min, max) n-gram lengths as vLLM resolves them: both 5 when unset; one given sets the other."""
    lo, hi = spec.prompt_lookup_min, spec.prompt_lookup_max
    if lo is None and hi is None:
        return DEFAULT_PROMPT_LOOKUP, DEFAULT_PROMPT_LOOKUP
    if lo is None:
        return hi, hi
    if hi is None:
        return lo, lo
    return lo, hi


def runner_of(spec, engine, parallel=None) -> str:
    """The model runner a method runs on: ``suffix`` always on v1, and every method under dual-batch overlap
    (``parallel.enable_dbo``): vLLM 0.33 falls back to V1 for both (``vllm/config/vllm.py``
    ``_get_v2_model_runner_unsupported_features``)."""
    dbo = parallel is not None and parallel.enable_dbo and parallel.data_parallel_size > 1
    return "v1" if spec.method == "suffix" or dbo else engine.model_runner


class RequestProposals:
    """One request's proposals: :meth:`guesses` for its decode step ``step`` (0-based)."""

    __slots__ = ("_match", "_length", "_min_context")

    def __init__(self, match: Sequence[bool], length: Optional[Sequence[int]], min_context: int) -> None:
        self._match, self._length, self._min_context = match, length, min_context

    def guesses(self, step: int, k: int, context_tokens: int) -> int:
        """Guesses proposed (0..k) at decode step ``step`` with ``context_tokens`` tokens of context."""
        if context_tokens < self._min_context:
            return 0
        i = min(step, len(self._match) - 1)
        if not self._match[i]:
            return 0
        return k if self._length is None else min(k, int(self._length[i]))


class ProposalModel:
    """Per-request seeded match draws (and suffix proposal lengths) for ``ngram`` and ``suffix``."""

    def __init__(self, rate: float, seed: int, spread: Optional[float] = None, min_context: int = 0,
                 max_depth: Optional[int] = None, spec_factor: float = 1.0, runner: str = "v2") -> None:
        self.rate, self.spread, self._seed = float(rate), spread or 0.0, int(seed)
        self.min_context, self.max_depth, self.spec_factor = int(min_context), max_depth, float(spec_factor)
        self.runner = runner

    @classmethod
    def from_config(cls, cfg) -> Optional["ProposalModel"]:
        """The run's proposal model, or None when every decode step proposes k (the method always does,
        or ``proposal_rate`` 1 without spread and nothing else that shortens proposals)."""
        spec = cfg.speculative
        if not spec.enabled or spec.method not in VARIABLE_METHODS:
            return None
        runner = runner_of(spec, cfg.engine, cfg.parallel)
        if spec.method == "suffix":
            return cls(spec.proposal_rate, cfg.seed, spec.proposal_spread, 0,
                       spec.suffix_decoding_max_tree_depth, spec.suffix_decoding_max_spec_factor, runner)
        if spec.proposal_rate >= 1.0 and not spec.proposal_spread and spec.prompt_lookup_min is None \
                and spec.prompt_lookup_max is None:
            return None  # every step matches: identical to a fixed-k proposer
        return cls(spec.proposal_rate, cfg.seed, spec.proposal_spread, prompt_lookup(spec)[0], runner=runner)

    def request_rate(self, request_index: int) -> float:
        """The request's own proposal rate (Beta around the mean with spread, else the mean)."""
        r = beta_around(self.rate, self.spread, self._seed, PROPOSAL_SPREAD_STREAM, request_index)
        return self.rate if r is None else r

    def for_request(self, request) -> RequestProposals:
        """The proposals of one request (keyed by its workload index), one draw per decode step."""
        n = max(1, int(request.output_tokens))
        u = np.array(uniform_stream(self._seed, PROPOSAL_STREAM, request.index, 2 * n)).reshape(n, 2)
        match = u[:, 0] < self.request_rate(request.index)
        length = None
        if self.max_depth is not None:  # suffix: matched length m uniform in 1..depth, guesses factor * m
            m = 1 + np.floor(u[:, 1] * self.max_depth)
            length = np.floor(self.spec_factor * m + 1e-9).astype(int)
            match &= length > 0
        return RequestProposals(match.tolist(), None if length is None else length.tolist(), self.min_context)
