"""Which published pair stands for a (target, drafter) the acceptance library has no row for: the nearest, named.

A run that takes its acceptance from the library (``speculative.acceptance_source: published``, or no
acceptance given) uses the first of these that has chain rows:

1. **the pair itself** (or the same model's other checkpoint: ``nvidia/Qwen3.5-397B-A17B-NVFP4`` for
   ``Qwen/Qwen3.5-397B-A17B``, same family and size, :func:`same_model`);
2. **the same drafter on another target** (a head's rows on the target it was measured on);
3. **another drafter of the same method on the same target** (another EAGLE-3 head of the same model);
4. **the same method on the target a head was trained for** (a head trained on Llama-3.3-70B used on
   Llama-3.1-70B: the Llama-3.3-70B rows; :attr:`HeadSpec.trained_for
   <vidur_specdec.speculation.proposers.heads.HeadSpec>`);
5. **the same method on a sibling**: the same model family (:func:`~vidur_specdec.speculation.library.family`,
   registered siblings included) at another size, the nearest in parameters (Qwen3.5-397B's MTP for
   Qwen3.5-122B).

Within a step the pair nearest in size comes first, then the one with rows on the dataset asked for (a chat-like
one when none is named), then the one with more rows, then file order. Steps 2-5 are *borrowed*: the run
says so in a ``warning:`` line and ``summary.json`` (``acceptance_borrowed``) names the pair and the step.
"""

from __future__ import annotations

from typing import Dict, List, Optional, Sequence, Tuple

from vidur_specdec.speculation import library
from vidur_specdec.speculation.library import family, same_model, size_gap

def _trained_for(drafter: str) -> Optional[str]:
    # lazy: the proposers package imports the cost layer; the library is read without it
    from vidur_specdec.speculation.proposers.heads import KNOWN_HEADS

    head = KNOWN_HEADS.get(drafter)
    return head.trained_for if head is not None and head.trained_for else None


def _chat_like(rows: Sequence[library.Row], dataset: Optional[str]) -> bool:
    if dataset is not None:
        return any(r.dataset == dataset or r.category == dataset for r in rows)
    return any(r.category in ("chat", "mixed") for r in rows)


def nearest_pair(target: str, drafter: str, method: str, dataset: Optional[str] = None,
                 structure: str = "chain") -> Tuple[List[library.Row], Optional[str]]:
    """(rows of the nearest published pair, None for the pair itself or the step that borrowed them)."""
    rows = [r for r in library.rows() if r.structure == structure]
    by_pair: Dict[Tuple[str, str], List[library.Row]] = {}
    for r in rows:
        by_pair.setdefault((r.target, r.drafter), []).append(r)
    trained = _trained_for(drafter)
    own_drafter = lambda d: d == drafter or (method == "mtp" and same_model(d, target))  # noqa: E731
    steps = (
        (None, lambda t, d, m: same_model(t, target) and own_drafter(d)),
        # a checkpoint measured on another target (not MTP, whose drafter is the target; not n-gram or suffix,
        # whose drafter name is the method's)
        ("the same drafter on another target",
         lambda t, d, m: d == drafter and method != "mtp" and drafter != method),
        ("another {m} drafter on the same target", lambda t, d, m: m == method and same_model(t, target)),
        ("the same method on the target the head was trained for",
         lambda t, d, m: m == method and trained is not None and same_model(t, trained)),
        ("the same method on a sibling model: same family, the nearest size published",
         lambda t, d, m: m == method and family(t) == family(target)),
    )
    for why, match in steps:
        found = [(t, d) for (t, d), rs in by_pair.items() if rs[0].method == method and match(t, d, method)]
        if not found:
            continue
        found.sort(key=lambda p: (size_gap(p[0], target), not _chat_like(by_pair[p], dataset),
                                  -len(by_pair[p]), by_pair[p][0].line))
        t, d = found[0]
        note = None if why is None else why.format(m=method)
        return by_pair[(t, d)], note
    return [], None
