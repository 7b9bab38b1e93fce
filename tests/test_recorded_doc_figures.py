"""Doc blocks written from recorded per-run results (scripts/recorded_runs.py) are current.

For each script: the block in its doc is what the script renders from its CSV under
``sweeps/results/figures/``; every recorded run's config identity, package version and
profile digest are today's; and one cheap run re-run here gives its recorded CSV line
byte for byte. Regenerate with ``PYTHONPATH=. python scripts/<script>.py --record --write``.
"""

import importlib.util
import sys
from pathlib import Path

import pytest

from conftest import REPO

sys.path.insert(0, str(REPO))  # scripts/ as a package

# script -> the run re-run on every test run (the cheapest of its file)
SCRIPTS = {"dbo_throughput": "c256 k1 dbo-on", "dp_vs_tp": "2xtp8 c64 k0", "draft_kv_recompute": "disagg-deepseek-v3-mtp-2p2d p2000 transfer",
           "eagle_calibration": "eagle3 k4", "ngram_rate": "c1 none",
           "pp_vs_tp": "tp8 pp1 c8 none", "qwen35_schedule_threshold": "static c1"}


def _script(name):
    spec = importlib.util.spec_from_file_location(name, REPO / "scripts" / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


def _stale(name):
    return f"stale: run PYTHONPATH=. python scripts/{name}.py --record --write"


@pytest.mark.parametrize("name", sorted(SCRIPTS))
def test_doc_block_is_the_recorded_runs(name):
    from scripts.docblock import block

    mod = _script(name)
    assert block(mod.DOC, mod.NAME) == mod.text(), \
        f"{mod.DOC.relative_to(REPO)}'s {mod.NAME} block is not what sweeps/results/figures/{name}.csv gives: " + _stale(name)


@pytest.mark.parametrize("name", sorted(SCRIPTS))
def test_recorded_runs_are_todays(name):
    from scripts import recorded_runs

    mod = _script(name)
    why = recorded_runs.stale(mod.CSV_NAME, mod.runs())
    assert not why, f"sweeps/results/figures/{name}.csv: {why[0]} ({len(why)} in all); " + _stale(name)


@pytest.mark.parametrize("name", sorted(SCRIPTS))
def test_one_run_reproduces_its_recorded_line(name):
    from scripts import recorded_runs

    mod = _script(name)
    run = next(r for r in mod.runs() if r[0] == SCRIPTS[name])
    fresh = recorded_runs.line(run, mod.measure(run[1], run[2]), mod.COLUMNS)
    assert fresh == recorded_runs.recorded_lines(mod.CSV_NAME)[run[0]], \
        f"sweeps/results/figures/{name}.csv: run {run[0]} re-run differs; " + _stale(name)


def test_every_script_written_doc_block_has_a_test():
    """Each marked block in docs/*.md and README.md (scripts/docblock.py) is named by some test, or its writer
    (the script of scripts/ or the module of the package that holds its name) is loaded by one, so a stale block
    fails a test."""
    import re

    here = Path(__file__).name
    tests = [p.read_text() for p in (REPO / "tests").glob("test_*.py") if p.name != here] + [repr(SCRIPTS)]
    code = {p: p.read_text() for p in [*(REPO / "scripts").glob("*.py"), *(REPO / "vidur_specdec").rglob("*.py")]
            if p.stem not in ("docblock", "recorded_runs")}
    missing = []
    for doc in [*sorted((REPO / "docs").glob("*.md")), REPO / "README.md"]:
        for name in re.findall(r"<!-- ([\w.:-]+):begin -->", doc.read_text()):
            base = name.split(":")[0]
            writers = [p.stem for p, text in code.items() if base in text]
            if not any(base in t or any(re.search(rf"\b{w}\b", t) for w in writers) for t in tests):
                missing.append(f"{doc.name}: {name} (written by {writers or 'nothing in scripts/ or the package'})")
    assert not missing, "doc blocks no test checks: " + "; ".join(missing)
