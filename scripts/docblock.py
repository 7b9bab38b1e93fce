"""Marked blocks in the docs that a script writes and a test checks: ``<!-- NAME:begin -->`` … ``<!-- NAME:end -->``.

Used by the scripts that produce figures quoted in the docs (moe_step_ratio.py,
moe_layer_error.py, ...): each builds its block
(markers included), prints it, and with ``--write`` replaces the block in its doc.
"""

import re
import sys
from pathlib import Path
from typing import List, Optional

REPO = Path(__file__).resolve().parents[1]


def markers(name: str):
    """The begin and end markers of block ``name``."""
    return f"<!-- {name}:begin -->", f"<!-- {name}:end -->"


def block(doc: Path, name: str) -> str:
    """The block ``name`` of ``doc``, markers included."""
    begin, end = markers(name)
    text = Path(doc).read_text()
    return text[text.index(begin):text.index(end) + len(end)]


def main(doc: Path, text: str, argv: Optional[List[str]] = None) -> int:
    """Print the block ``text``; with ``--write`` in ``argv`` put it in place of its old one in ``doc``."""
    print(text)
    if "--write" in (sys.argv[1:] if argv is None else argv):
        begin = text.splitlines()[0]
        end = text.splitlines()[-1]
        old = Path(doc).read_text()
        Path(doc).write_text(re.sub(re.escape(begin) + ".*?" + re.escape(end), lambda m: text, old, flags=re.S))
        print(f"updated {Path(doc).relative_to(REPO)}")
    return 0
