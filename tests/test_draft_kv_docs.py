"""docs/model.md's draft-KV table (transferred vs recomputed on the decode pool): recomputing never shortens TTFT.

The block itself is checked against its recorded runs by tests/test_recorded_doc_figures.py.
"""

import importlib.util
import sys

from conftest import REPO


def test_recomputing_the_draft_kv_never_shortens_ttft():
    spec = importlib.util.spec_from_file_location("draft_kv_recompute", REPO / "scripts" / "draft_kv_recompute.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    from scripts import recorded_runs

    res = recorded_runs.read(mod.CSV_NAME)
    for _, config, prompt in mod.ROWS:
        t, r = (res[mod.run_label(config, prompt, mode)] for mode in ("transfer", "recompute"))
        assert r["ttft_ms"] > t["ttft_ms"] and r["ttft_first_decode_ms"] > t["ttft_first_decode_ms"]
