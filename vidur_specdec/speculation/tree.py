"""Token trees in vLLM's ``speculative_token_tree`` format.

A tree is a list of tuples, one per node, each the path of child indices from
the root (``(0,)`` is the root's first child, ``(0, 1)`` that child's second
child); the root (the last verified token) is implicit. vLLM takes it as a
string literal (``"[(0,), (1,), (0, 0)]"``, read with ``ast.literal_eval``) and
sorts it breadth-first (``vllm/config/speculative.py``); without one, k guesses
are the chain ``[(0,), (0, 0), ...]``. Here a YAML list of lists is accepted as
well. A valid tree: every node a non-empty tuple of integers ≥ 0, no node
twice, every node's parent present, and each node's children numbered
0..m−1 (they are its top-m candidates).

Every node is a query token of the verify step (tree-masked attention): a
request is charged N + 1 tokens for N nodes. Drafting takes one pass per level;
acceptance is over the depth of the accepted path (0..depth).
"""

from __future__ import annotations

import ast
from collections import Counter
from dataclasses import dataclass
from typing import Optional, Tuple

from vidur_specdec.config import ConfigError

KEY = "speculative.speculative_token_tree"


@dataclass(frozen=True)
class TokenTree:
    """Nodes sorted breadth-first, and node counts per level (level 1 = the root's children)."""

    nodes: Tuple[Tuple[int, ...], ...]
    levels: Tuple[int, ...]

    @property
    def num_nodes(self) -> int:
        return len(self.nodes)

    @property
    def depth(self) -> int:
        return len(self.levels)


def parse_tree(value) -> Optional[TokenTree]:
    """A TokenTree from vLLM's string form or a list; None for None; ConfigError (one line) if invalid."""
    if value is None:
        return None
    raw = value
    if isinstance(value, (list, tuple)) and value and all(isinstance(v, str) for v in value):
        # `--set key=[(0,), (1,)]` unquoted: YAML splits the tuples at their commas; rejoin them
        value = "[" + ",".join(value) + "]"
    if isinstance(value, str):
        try:
            raw = ast.literal_eval(value)
        except (ValueError, SyntaxError):
            raise ConfigError(f"{KEY}: not a list of tuples: {value!r}") from None
    if not isinstance(raw, (list, tuple)) or not raw:
        raise ConfigError(f"{KEY}: must be a non-empty list of tuples (paths of child indices), got {value!r}")
    nodes = []
    for n in raw:
        if (not isinstance(n, (list, tuple)) or not n
                or any(not isinstance(i, int) or isinstance(i, bool) or i < 0 for i in n)):
            raise ConfigError(f"{KEY}: node {n!r} is not a non-empty tuple of child indices >= 0")
        nodes.append(tuple(n))
    dup = [n for n, c in Counter(nodes).items() if c > 1]
    if dup:
        raise ConfigError(f"{KEY}: node {dup[0]} appears twice")
    have = set(nodes)
    for n in sorted(nodes, key=lambda t: (len(t), t)):
        if len(n) > 1 and n[:-1] not in have:
            raise ConfigError(f"{KEY}: node {n} has no parent {n[:-1]}")
        if n[-1] > 0 and n[:-1] + (n[-1] - 1,) not in have:
            raise ConfigError(f"{KEY}: node {n} has no elder sibling {n[:-1] + (n[-1] - 1,)}; "
                              "children are numbered 0..m-1")
    nodes.sort(key=lambda t: (len(t), t))
    depth = max(len(n) for n in nodes)
    levels = tuple(sum(1 for n in nodes if len(n) == d) for d in range(1, depth + 1))
    return TokenTree(tuple(nodes), levels)


def acceptance_positions(spec) -> int:
    """Positions the acceptance model covers for a ``speculative`` config: k, or a token tree's depth."""
    tree = parse_tree(spec.speculative_token_tree)
    return tree.depth if tree is not None else spec.num_speculative_tokens
