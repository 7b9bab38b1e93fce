"""One rule for values given over a config: ``--set`` over a file, a sweep row over its base, a tune point.

Every command resolves a config the same way: the mapping it starts from (a file, a sweep's
``base``, the config a tune was given) plus the assignments on top of it, through
:func:`overlay`, then the schema and the resolution (:func:`vidur_specdec.load`). An
assignment replaces what it names, and also what it makes meaningless in the mapping below it:

* **an aliased pair** — one name of vLLM's and the project's scheduler names (``scheduler.chunk_size`` /
  ``max_num_batched_tokens``, ...) replaces the mapping's other name
  (:data:`vidur_specdec.config.vllm_defaults.PARTNERS`);
* **the acceptance** — an acceptance input (``acceptance_rate``, ``mean_acceptance_length``,
  ``acceptance_per_position``, ``acceptance_histogram``, ``acceptance_trace``) replaces the mapping's other
  inputs and its ``acceptance_source`` (and ``acceptance_at_k``, unless the input is a
  ``mean_acceptance_length``, which it qualifies); ``acceptance_source: published`` replaces every acceptance
  input and ``acceptance_at_k`` (the library gives the acceptance);
* **a method switch** — ``speculative.method`` set to a proposer drops the mapping's keys that only the old
  method reads and the new one does not (the ``speculative.method`` rows of
  :data:`vidur_specdec.config.unused.USES`: ``speculative.model`` under ``draft_model``,
  ``speculative.draft_model`` under ``eagle3``, a drafter's ``engine.draft_*`` costs under ``ngram``, ...).
  Switching to ``none`` drops nothing: speculation off reads no speculative key.

A key the assignments themselves give is never dropped. :func:`assignments` turns ``--set`` strings into
``(key, value)`` pairs; a mapping value (``speculative={method: eagle3, ...}``) counts as each of its leaves.
"""

from __future__ import annotations

import copy
from typing import Any, Dict, Iterable, List, Mapping, Sequence, Tuple, Union

from vidur_specdec.config import unused
from vidur_specdec.config.files import override_list, parse_set, set_dotted
from vidur_specdec.config.vllm_defaults import PARTNERS

ACCEPTANCE_INPUTS = tuple(f"speculative.{k}" for k in unused.ACCEPTANCE_INPUTS)
SOURCE = "speculative.acceptance_source"
AT_K = "speculative.acceptance_at_k"
MEAN_LENGTH = "speculative.mean_acceptance_length"

Assignments = Sequence[Tuple[str, Any]]


def assignments(overrides: Union[str, Sequence[str], Mapping[str, Any], None]) -> List[Tuple[str, Any]]:
    """``--set`` strings (one or a list) or a ``{dotted.key: value}`` mapping as ``(key, value)`` pairs, in order."""
    if isinstance(overrides, Mapping):
        return list(overrides.items())
    return [parse_set(a) for a in override_list(overrides)]


def _given(pairs: Assignments) -> Dict[str, Any]:
    """``{leaf key: value}`` of the assignments, a mapping value counted as each of its leaves."""
    tree: Dict[str, Any] = {}
    for key, value in pairs:
        set_dotted(tree, key, value)
    out: Dict[str, Any] = {}
    for leaf in unused.leaves(tree):
        node: Any = tree
        for part in leaf.split("."):
            node = node[part]
        out[leaf] = node
    return out


def _pop(data: Dict, key: str) -> None:
    *path, last = key.split(".")
    node: Any = data
    for part in path:
        node = node.get(part) if isinstance(node, dict) else None
    if isinstance(node, dict):
        node.pop(last, None)


def _present(data: Mapping, key: str) -> bool:
    node: Any = data
    for part in key.split("."):
        if not isinstance(node, Mapping) or part not in node:
            return False
        node = node[part]
    return True


def replaced_keys(data: Mapping, pairs: Assignments) -> List[str]:
    """The keys of ``data`` (dotted) that the assignments make meaningless, by the rules of the module docstring."""
    given = _given(pairs)
    kept = lambda key: not any(unused.overlaps(key, g) for g in given)  # noqa: E731 - a given key stays
    out: List[str] = []
    for key in given:
        partner = PARTNERS.get(key)
        if partner is not None:
            out.append(partner)
    if given.get(SOURCE) == "published":
        out += list(ACCEPTANCE_INPUTS) + [AT_K]
    elif any(k in given for k in ACCEPTANCE_INPUTS):
        out += list(ACCEPTANCE_INPUTS) + [SOURCE]
        if MEAN_LENGTH not in given:
            out.append(AT_K)
    method = given.get(unused.METHOD)
    if method is not None and method != "none":
        for leaf in unused.leaves(dict(data)) if isinstance(data, Mapping) else ():
            rows = [r for r in unused.USES if r.axis == unused.METHOD and unused.overlaps(leaf, r.key)]
            if rows and any(method not in r.values for r in rows):
                out.append(leaf)
    seen: List[str] = []
    for key in out:
        if key not in seen and kept(key) and _present(data, key):
            seen.append(key)
    return seen


def without_replaced(data: Mapping, pairs: Assignments) -> Dict:
    """A copy of ``data`` without the keys the assignments replace (module docstring); nothing set yet."""
    out = copy.deepcopy(dict(data or {}))
    for key in replaced_keys(out, pairs):
        _pop(out, key)
    return out


def overlay(data: Mapping, pairs: Union[Assignments, Iterable[Tuple[str, Any]]]) -> Dict:
    """A copy of ``data`` with the assignments applied, after dropping what they replace (module docstring)."""
    pairs = list(pairs)
    out = without_replaced(data, pairs)
    for key, value in pairs:
        set_dotted(out, key, value)
    return out
