"""docs/model.md's draft-KV table (transferred vs recomputed on the decode pool) is what scripts/draft_kv_recompute.py gives now."""

import importlib.util
import sys

from conftest import REPO


def test_one_row_pair_matches_the_docs_table():
    spec = importlib.util.spec_from_file_location("draft_kv_recompute", REPO / "scripts" / "draft_kv_recompute.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    label, config, prompt = mod.ROWS[0]
    fresh = mod.rows_text(label, prompt, mod.measure(config, prompt))
    begin, end = mod.markers(mod.NAME)
    doc = (REPO / "docs" / "model.md").read_text()
    block = doc[doc.index(begin):doc.index(end)].splitlines()
    i = block.index(fresh[0]) if fresh[0] in block else -1
    assert block[i:i + 2] == fresh, "docs/model.md's draft-KV table is stale: run scripts/draft_kv_recompute.py --write"
    t, r = (float(x.split("|")[4].replace(",", "")) for x in fresh)
    assert r > t  # recomputing the draft KV never shortens TTFT
