"""docs/plan.md's table of AIConfigurator's and plan's answers is what scripts/plan_vs_aiconfigurator.py writes
from its record, and the record's simulated picks are still what this code simulates.

``SPECDEC_AIC=1`` also runs AIConfigurator's CLI (``aiconfigurator`` on PATH, or ``$AICONFIGURATOR``; skipped
where it is not installed) on the cheapest case and holds its pick to the record.
"""

import importlib.util
import json
import os
import sys

import pytest

from conftest import REPO


def _script():
    spec = importlib.util.spec_from_file_location("plan_vs_aiconfigurator",
                                                  REPO / "scripts" / "plan_vs_aiconfigurator.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


def _record(mod):
    if not mod.RECORD.is_file():
        pytest.fail("sweeps/results/figures/plan_vs_aiconfigurator.json is missing: run "
                    "scripts/plan_vs_aiconfigurator.py --record --write")
    return json.loads(mod.RECORD.read_text())


def test_the_docs_table_is_the_record():
    from scripts.docblock import block

    mod = _script()
    assert block(mod.DOC, mod.NAME) == mod.text(_record(mod)), \
        "docs/plan.md's AIConfigurator table is stale: run scripts/plan_vs_aiconfigurator.py --write"


def test_every_case_is_recorded_and_no_answer_is_made_up():
    mod = _script()
    rec = _record(mod)
    assert [c["case"] for c in rec["cases"]] == [c["case"] for c in mod.CASES]
    for c in rec["cases"]:
        a = c["aiconfigurator"]
        if "error" in a:  # not run: no pick, no prediction, no simulation of one
            assert "aiconfigurator_under_load" not in c and set(a) == {"error"}
        else:
            assert a["version"] == mod.AIC_VERSION and a["command"].startswith("aiconfigurator cli default")
            assert a["tokens_per_s_gpu"] > 0 and a["mode"] in ("agg", "disagg")
        assert c["plan"]["vllm_serve"] and c["plan_under_load"]["attainment"] >= 0


def test_the_recorded_simulations_match_this_code():
    from scripts import recorded_runs

    mod = _script()
    rec = _record(mod)
    for c in rec["cases"]:
        for key in ("plan_under_load", "aiconfigurator_under_load"):
            u = c.get(key)
            if not u or "error" in u:
                continue
            now = recorded_runs.stamp(mod.BASE, u["overrides"])
            assert {k: u[k] for k in now} == now, f"{c['case']} {key}: recorded with other code or configs; run " \
                                                 "scripts/plan_vs_aiconfigurator.py --record --write"
        # plan's pick under load is plan's own best point simulated again: the same figures
        p, u = c["plan"], c["plan_under_load"]
        assert u["tokens_per_s_gpu"] == pytest.approx(p["tokens_per_s_gpu"], abs=1e-3)
        assert u["ttft_ms_p90"] == pytest.approx(p["ttft_ms_p90"], abs=1e-3)


def test_one_recorded_pick_simulates_the_same_again():
    mod = _script()
    case = next(c for c in _record(mod)["cases"] if c["case"].startswith("Llama"))
    u = case["plan_under_load"]
    again = mod.under_load([x for x in u["overrides"] if not x.startswith("workload.")], case["plan"]["concurrency"])
    assert again == u


@pytest.mark.skipif(os.environ.get("SPECDEC_AIC") != "1", reason="SPECDEC_AIC=1 runs AIConfigurator's CLI "
                    "(minutes)")
def test_aiconfigurator_gives_the_recorded_pick():
    mod = _script()
    path = mod.find_aic(None)
    if path is None:
        pytest.skip("aiconfigurator is not installed (pip install 'vidur_specdec[aic]')")
    case = next(c for c in mod.CASES if c["case"].startswith("Llama"))
    got = mod.run_aic(path, case)
    rec = next(c for c in _record(mod)["cases"] if c["case"] == case["case"])["aiconfigurator"]
    assert got == rec
