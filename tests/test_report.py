"""The results page: self-contained, deterministic, current with the recorded CSV; report CLI errors."""

import json
import re
import subprocess
import sys

import pytest

from conftest import REPO
from vidur_specdec.config import ConfigError
from vidur_specdec.report import build_page, markdown_block, markdown_table, read_results

CSV = REPO / "sweeps" / "results" / "specdec_39.csv"
PAGE = REPO / "docs" / "results.html"
REGEN = "stale: run sweeps/results/regenerate.sh"


def cli(*args):
    return subprocess.run([sys.executable, "-m", "vidur_specdec.main", *map(str, args)], cwd=REPO,
                          capture_output=True, text=True)


@pytest.fixture(scope="module")
def page():
    return build_page(CSV, PAGE)


def test_page_is_self_contained_and_deterministic(page):
    assert page == build_page(CSV, PAGE)
    assert not re.search(r"<script[^>]+src=", page) and not re.search(r"<link[^>]+href=\"https?:", page)
    assert "Plotly" in page and "specdec-data" in page
    data = json.loads(re.search(r'<script type="application/json" id="specdec-data">(.*?)</script>', page,
                                re.S).group(1))
    assert len(data["rows"]) == 39
    assert data["meta"]["csv_href"] == "../sweeps/results/specdec_39.csv"
    for words in ("300 requests per run", "Llama-2-7b-hf", "A100", "acceptance rate is an input",
                  "not a confidence interval", "Proposals", "Attention assumption", "TPOT speedup"):
        assert words in page, words


def test_recorded_page_and_docs_tables_are_current(page):
    assert PAGE.is_file() and PAGE.read_text(encoding="utf-8") == page, f"docs/results.html {REGEN}"
    md = (REPO / "docs" / "sweep.md").read_text()
    for name in ("specdec_39", "draft_model"):
        table = markdown_table(read_results(REPO / "sweeps" / "results" / f"{name}.csv"))
        assert markdown_block(md, name) == table, f"docs/sweep.md table {name} {REGEN}"


def test_report_cli(tmp_path):
    out = tmp_path / "p.html"
    r = cli("report", CSV, "-o", out)
    assert r.returncode == 0, r.stderr
    assert out.read_bytes() == build_page(CSV, out).encode()


@pytest.mark.parametrize("content, words", [
    (None, "file not found"),
    ("a,b\n1,2\n", "not a sweep results CSV"),
])
def test_report_bad_input(tmp_path, content, words):
    src = tmp_path / "in.csv"
    if content is not None:
        src.write_text(content)
    with pytest.raises(ConfigError, match=words):
        read_results(src)
    out = tmp_path / "p.html"
    r = cli("report", src, "-o", out)
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and words in r.stderr
    assert not out.exists()
