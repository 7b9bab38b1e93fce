"""docs/config.md's table of the keys each method, arrival mode and setting reads, from the one table in code.

    python scripts/config_tables.py          # print the block
    python scripts/config_tables.py --write  # put it in docs/config.md

The table is :data:`vidur_specdec.config.unused.USES` (and ``ONE_OF``); tests/test_unused_keys.py checks
the doc's block equals it.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from docblock import REPO, main, markers  # noqa: E402

from vidur_specdec.config import unused  # noqa: E402

NAME = "keys-read"
DOC = REPO / "docs/config.md"


def text() -> str:
    begin, end = markers(NAME)
    return f"{begin}\n{unused.markdown()}\n{end}"


if __name__ == "__main__":
    sys.exit(main(DOC, text()))
