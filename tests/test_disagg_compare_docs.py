"""docs/model.md's colocated-vs-disaggregated table is what scripts/disagg_compare.py writes from the recorded sweep."""

import importlib.util
import sys

from conftest import REPO


def _script():
    spec = importlib.util.spec_from_file_location("disagg_compare", REPO / "scripts" / "disagg_compare.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


def test_the_docs_table_is_the_recorded_sweep_s():
    mod = _script()
    fresh = mod.build()
    begin, end = mod.markers(mod.NAME)
    doc = (REPO / "docs" / "model.md").read_text()
    assert doc[doc.index(begin):doc.index(end) + len(end)] == fresh, \
        "docs/model.md's colocated-vs-disaggregated table is stale: run scripts/disagg_compare.py --write"


def test_every_split_has_all_three_settings_and_colocated_rows_no_parts():
    table = _script().read()
    assert len(table) == 2 * 4 * 3  # two models, four deployments, three loads
    for (model, dep, gpus, qps), s in table.items():
        if dep.startswith("colocated"):
            assert set(s) == {"none", "transfer"} and s["transfer"]["ttft_queue_ms_mean"] == ""
        else:
            assert set(s) == {"none", "transfer", "recompute"}
            parts = sum(float(s["transfer"][f"ttft_{p}_ms_mean"]) for p in ("queue", "prefill", "kv_transfer",
                                                                            "first_decode"))
            assert abs(parts - float(s["transfer"]["ttft_ms_mean"])) < 1e-3 * parts
