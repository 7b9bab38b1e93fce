"""docs/model.md's n-gram speedup by load, proposal rate and model runner is what scripts/ngram_rate.py gives now."""

import importlib.util
import sys

from conftest import REPO


def test_one_request_row_matches_the_docs_table():
    spec = importlib.util.spec_from_file_location("ngram_rate", REPO / "scripts" / "ngram_rate.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    doc = (REPO / "docs" / "model.md").read_text()
    block = doc[doc.index(mod.BEGIN):doc.index(mod.END)]
    recorded = next(line for line in block.splitlines() if line.startswith("| 1 |"))
    assert mod.row(1) == recorded, "docs/model.md's n-gram rate table is stale: run python scripts/ngram_rate.py --write"
