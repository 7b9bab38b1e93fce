"""The across-k acceptance model's error on curves it did not fit, by method family (docs/model.md).

Usage: python scripts/acceptance_across_k.py [--write]
For each method family, every chain curve of the acceptance library
(vidur_specdec/speculation/data/acceptance_library.csv: one drafter on one target and
dataset at two or more k) is left out in turn; the family decay is fitted on the others,
the curve is anchored at its k = 3 point (or the nearest k) and its other points are
predicted. The same with one α (the constant-α rule). ``--write`` puts the table between
the ``acceptance-across-k`` markers of docs/model.md (tests/test_acceptance_library.py
fails while the block is stale).
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import docblock  # noqa: E402  (scripts/docblock.py)

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
DOC = REPO / "docs" / "model.md"
BEGIN, END = docblock.markers("acceptance-across-k")


def pct(x) -> str:
    return "–" if x is None else f"{100 * x:.1f} %"


def block() -> str:
    from vidur_specdec.speculation import across_k, library

    lines = [BEGIN, "",
             f"Library: {len(library.rows())} rows, {library.pairs()} (target, drafter, dataset) pairs, "
             f"{len(across_k.curves())} chain curves. Error = |predicted − published| / published mean "
             f"acceptance length over the held-out points (anchor point excluded).", "",
             "| family | curves | points | decay d (all curves) | held-out points | model: mean / max error "
             "| one α: mean / max error | at the curve's largest k: model / one α |",
             "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in across_k.held_out():
        lines.append(f"| {r['family']} | {r['curves']} | {r['points']} | {r['decay']:g} | {r['held_out_points']} "
                     f"| {pct(r['model_mean'])} / {pct(r['model_max'])} | {pct(r['constant_mean'])} / "
                     f"{pct(r['constant_max'])} | {pct(r['model_at_largest_k'])} / {pct(r['constant_at_largest_k'])} |")
    lines += ["", END]
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(docblock.main(DOC, block()))
