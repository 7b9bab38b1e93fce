"""docs/sweep.md's table of what this round's regeneration moved is what scripts/recorded_moves.py computes."""

import subprocess
import sys

import pytest

from conftest import REPO


def test_recorded_moves_table_is_current():
    sys.path.insert(0, str(REPO / "scripts"))
    import docblock
    import recorded_moves

    have = subprocess.run(["git", "cat-file", "-e", f"{recorded_moves.BEFORE}^{{commit}}"], cwd=REPO,
                          capture_output=True)
    if have.returncode:
        pytest.skip(f"commit {recorded_moves.BEFORE} is not in this checkout's history")
    assert docblock.block(recorded_moves.DOC, "recorded-moves") == recorded_moves.table(), \
        "docs/sweep.md's recorded-moves table is stale: run PYTHONPATH=. python scripts/recorded_moves.py --write"
