"""Proposers: the time a step spends making guesses before the target verifies them.

One module per proposer, each registering its class under the name
``speculative.method`` uses (vLLM's names: ``ngram``, ``draft_model``,
``eagle``, ``eagle3``, ``mtp``, ``medusa``, ``suffix``; plus ``fixed``, a constant-cost
drafter). Every proposer module is imported here, in one explicit list, so a new
proposer is one file (a :class:`~vidur_specdec.speculation.proposers.base.Proposer` subclass
decorated with :func:`~vidur_specdec.speculation.proposers.base.register`), its name in
:data:`PROPOSER_MODULES` and its docs; the config's
``method`` choices, the results page labels and the contract test
(``tests/test_proposer_contract.py``) all read :data:`REGISTRY`.

Times are ms; a proposer's time is added to the step (no overlap with the target).
"""

from __future__ import annotations

from typing import Optional

from vidur_specdec.config.registry import register_choices
from vidur_specdec.speculation.proposers.base import REGISTRY, Proposer, ProposerContext, register  # noqa: F401
from vidur_specdec.architectures.models import resolve_model

# The proposers, one module each, in one explicit list (each registers its class under its method name);
# tests/test_registries.py checks that no proposer module is left out of it.
from vidur_specdec.speculation.proposers import (  # noqa: E402,F401  (register their classes)
    dflash, draft_model, dspark, eagle, eagle3, fixed, medusa, mtp, ngram, suffix,
)

PROPOSER_MODULES = (dflash, draft_model, dspark, eagle, eagle3, fixed, medusa, mtp, ngram, suffix)


def method_names() -> tuple:
    """``speculative.method`` choices: ``none`` plus every registered proposer, in registration order."""
    return ("none",) + tuple(REGISTRY)


register_choices("speculative.method", method_names)


def label(method: str) -> str:
    """Human label of a method for tables and the results page."""
    cls = REGISTRY.get(method)
    return cls.label if cls is not None else method


def build(cfg, target_time, cache_dir=None, **context) -> Proposer:
    """The proposer for a run config (``none`` or k = 0 costs nothing); raises ConfigError on bad input.

    ``context``: ``deployment`` (resolved model/device/TP) and ``draft_time``
    (the drafter's fitted time model, ``draft_model`` only); see
    :meth:`Proposer.from_config`.
    """
    spec = cfg.speculative
    if not spec.enabled:
        return Proposer()
    return REGISTRY[spec.method].from_config(cfg, target_time, cache_dir, **context)


def lookahead_tokens(cfg) -> int:
    """vLLM's ``num_lookahead_tokens`` for a run config (tokens): see :meth:`Proposer.num_lookahead_tokens`."""
    spec = cfg.speculative
    return REGISTRY[spec.method].num_lookahead_tokens(spec.num_speculative_tokens) if spec.enabled else 0


def weights_name(cfg) -> Optional[str]:
    """The drafter's or head's weights for vLLM's ``speculative_config["model"]`` (None: ngram, fixed, none)."""
    spec = cfg.speculative
    if not spec.enabled:
        return None

    return REGISTRY[spec.method].weights_name(cfg, resolve_model(cfg.model, "model"))


def weights_columns() -> dict:
    """``{method: config key naming its weights}`` for every registered proposer that has weights."""
    return {name: cls.weights_key for name, cls in REGISTRY.items() if cls.weights_key}


def head_memory(cfg, dep) -> tuple:
    """(weight bytes, KV bytes per token) per GPU of a draft head on the target's GPUs, before any fitting.

    EAGLE-family, MTP and Medusa heads; (0, 0) for the others (a draft model is
    planned as a whole model by :func:`vidur_specdec.costs.memory.plan`).
    """
    spec = cfg.speculative
    if not spec.enabled or spec.method == "draft_model":
        return 0, 0
    return build(cfg, None, deployment=dep).memory_bytes(dep.tp)
