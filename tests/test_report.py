"""The results page: self-contained, deterministic, one dataset per sweep CSV, current with the recorded
CSVs; markdown tables per deployment; report CLI errors (nothing written on any of them)."""

import csv
import json
import re

import pytest

from conftest import REPO, run_command
from vidur_specdec.config import ConfigError
from vidur_specdec.report import (
    build_page,
    deployment_label,
    deployments,
    markdown_block,
    markdown_table,
    read_results,
    sweep_info,
)

RESULTS = REPO / "sweeps" / "results"
CSV = RESULTS / "specdec_39.csv"
# the recorded sweeps, in the order sweeps/results/regenerate.sh puts them on docs/results.html
NAMES = ["specdec_39", "draft_model", "deployments", "eagle", "moe"]
CSVS = [RESULTS / f"{n}.csv" for n in NAMES]
PAGE = REPO / "docs" / "results.html"
REGEN = "stale: run sweeps/results/regenerate.sh"


def page_data(page):
    return json.loads(re.search(r'<script type="application/json" id="specdec-data">(.*?)</script>', page,
                                re.S).group(1))


def cli(*args):
    return run_command(*args)


@pytest.fixture(scope="module")
def page():
    return build_page(CSV, PAGE)


def test_page_is_self_contained_and_deterministic(page):
    assert page == build_page(CSV, PAGE)
    assert not re.search(r"<script[^>]+src=", page) and not re.search(r"<link[^>]+href=\"https?:", page)
    assert "Plotly" in page and "specdec-data" in page
    (data,) = page_data(page)["datasets"]
    assert len(data["rows"]) == 39 and len(data["deployments"]) == 1
    assert data["deployments"][0].startswith("Llama-2-7b-hf on A100")
    assert data["name"] == "specdec_39" and data["description"].startswith("Llama-2-7B")
    assert data["meta"]["csv_href"] == "../sweeps/results/specdec_39.csv"
    for words in ("300 requests per run", "Llama-2-7b-hf", "A100", "acceptance rate is an input",
                  "not a confidence interval", "Proposals", "Attention assumption", "TPOT speedup"):
        assert words in page, words


def test_recorded_page_and_docs_tables_are_current():
    for p in CSVS:
        assert p.is_file(), f"{p} is missing: {REGEN}"
    recorded = build_page(CSVS, PAGE)
    assert PAGE.is_file() and PAGE.read_text(encoding="utf-8") == recorded, f"docs/results.html {REGEN}"
    datasets = page_data(recorded)["datasets"]
    assert [d["name"] for d in datasets] == NAMES
    # the deployment sweep's four deployments each get an entry of the deployment selector
    assert datasets[2]["deployments"] == ["Llama-3.1-8B-Instruct on H100, TP 1", "Llama-3.1-8B-Instruct on H200, TP 1",
                                          "Llama-3.1-70B-Instruct on H100, TP 4", "Llama-3.1-70B-Instruct on A100, TP 8"]
    assert set(datasets[3]["method_labels"]) == {"ngram", "eagle", "eagle3"}
    # the MoE sweep: seven deployments (Qwen3.5 and DeepSeek-V3.2 among them), MTP and EAGLE-3 on MoE targets
    assert len(datasets[4]["deployments"]) == 7 and {"mtp", "eagle3"} <= set(datasets[4]["method_labels"])
    md = (REPO / "docs" / "sweep.md").read_text()
    for name, path in zip(NAMES, CSVS):
        table = markdown_table(read_results(path))
        assert markdown_block(md, name) == table, f"docs/sweep.md table {name} {REGEN}"


def test_page_holds_one_dataset_per_sweep_with_its_deployments(tmp_path):
    """Two CSVs: one dataset each, named and described by their sweep files; deployments split per row."""
    rows = read_results(CSV)
    # a second sweep: the reference CSV with its TP column set to 1 below 12 requests/s and to 2 above
    (tmp_path / "results").mkdir()
    other = tmp_path / "results" / "two_tp.csv"
    with open(CSV, newline="") as f:
        rd = csv.DictReader(f)
        fields = list(rd.fieldnames) + [c for c in ("tensor_parallel_size",) if c not in rd.fieldnames]
        raw = list(rd)
    with open(other, "w", newline="") as f:
        w = csv.DictWriter(f, fields, lineterminator="\n")
        w.writeheader()
        for r, parsed in zip(raw, rows):
            w.writerow(dict(r, tensor_parallel_size="1" if parsed["qps"] < 12 else "2"))
    (tmp_path / "two_tp.yaml").write_text("sweep:\n  name: two_tp\n  description: >-\n    Two tensor-parallel\n"
                                          "    sizes.\nbase: {}\n")
    assert sweep_info(other) == {"name": "two_tp", "description": "Two tensor-parallel sizes."}
    assert sweep_info(tmp_path / "nowhere.csv") == {"name": "nowhere", "description": ""}
    page = build_page([CSV, other], tmp_path / "p.html")
    assert page == build_page([CSV, other], tmp_path / "p.html")
    first, second = page_data(page)["datasets"]
    assert first["name"] == "specdec_39" and second["name"] == "two_tp"
    assert second["deployments"] == ["Llama-2-7b-hf on A100, TP 1", "Llama-2-7b-hf on A100, TP 2"]
    assert [r["dep"] for r in second["rows"]] == [0 if r["qps"] < 12 else 1 for r in rows]
    assert second["meta"]["csv_href"] == "results/two_tp.csv"
    assert 'id="source-0"' in page and 'id="source-1" hidden' in page and "Two tensor-parallel sizes." in page
    # markdown: one section per deployment, each with its own baselines
    md = markdown_table(read_results(other))
    assert md.count("**Llama-2-7b-hf on A100, TP ") == 2 and md.count("No-speculation baselines") == 2
    assert [d[:3] for d in deployments(read_results(other))] == [("meta-llama/Llama-2-7b-hf", "a100", 1),
                                                                 ("meta-llama/Llama-2-7b-hf", "a100", 2)]
    assert deployment_label(("m/x", "h100", 4, 2)) == "x on H100, TP 4, 2 replicas"


def test_report_cli(tmp_path):
    out = tmp_path / "p.html"
    r = cli("report", CSV, "-o", out)
    assert r.returncode == 0, r.stderr
    assert out.read_bytes() == build_page(CSV, out).encode()
    two = RESULTS / "draft_model.csv"
    r = cli("report", CSV, two, "-o", out)
    assert r.returncode == 0, r.stderr
    assert out.read_bytes() == build_page([CSV, two], out).encode()


def test_report_cli_checks_everything_before_writing(tmp_path):
    md = tmp_path / "t.md"
    text = "<!-- recorded-table:specdec_39:begin -->\n<!-- recorded-table:specdec_39:end -->\n"
    md.write_text(text)
    out = tmp_path / "p.html"
    # draft_model has no block in t.md: neither the page nor the markdown is written
    r = cli("report", CSV, RESULTS / "draft_model.csv", "-o", out, "--markdown", md)
    assert r.returncode == 2 and "recorded-table:draft_model" in r.stderr and r.stderr.count("\n") == 1
    assert not out.exists() and md.read_text() == text
    r = cli("report", CSV, CSV, "-o", out)
    assert r.returncode == 2 and "two CSVs are named specdec_39.csv" in r.stderr and not out.exists()
    r = cli("report", CSV, "--markdown", md)
    assert r.returncode == 0, r.stderr
    assert markdown_block(md.read_text(), "specdec_39") == markdown_table(read_results(CSV))


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
