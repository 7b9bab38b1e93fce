"""EAGLE-3 and EAGLE speedups at batch 1 against vLLM's published ones (docs/model.md, "What a draft pass costs").

Usage: PYTHONPATH=. python scripts/eagle_calibration.py [--record] [--write]
Source: vllm-project/vllm issue #20780 (Llama-3.1-8B-Instruct on one H100, batch 1,
MT-Bench, yuhuili's EAGLE and EAGLE-3 heads): mean acceptance length and TPOT per K.
The simulator gets the published acceptance length as input and predicts the
speedup (TPOT without / with speculation) on the workload of
scripts/check_eagle_published.py. EAGLE-3 at K = 2 and 7 is what the draft-pass
defaults were fitted to; every other row is held out. ``--record`` runs the 13 runs and
records each run's TPOT in ``sweeps/results/figures/eagle_calibration.csv`` (scripts/recorded_runs.py);
the table is always written from that file, printed, and with ``--write`` put between the
``eagle-calibration`` markers of docs/model.md. tests/test_recorded_doc_figures.py re-renders
the block from the CSV, checks the CSV against the current configs and code, and re-runs one run.
"""

import importlib.util
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import docblock  # noqa: E402  (scripts/docblock.py)

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
from scripts import recorded_runs  # noqa: E402

DOC = REPO / "docs" / "model.md"
NAME = "eagle-calibration"
CSV_NAME = "eagle_calibration"
BEGIN, END = docblock.markers(NAME)
COLUMNS = ("tpot_ms_p50",)
TARGET, DEVICE = "meta-llama/Llama-3.1-8B-Instruct", "h100"
HEADS = {"eagle3": "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B", "eagle": "yuhuili/EAGLE-LLaMA3.1-Instruct-8B"}
VANILLA_TPOT_MS = 7.07
# K: (acceptance length EAGLE-3, TPOT EAGLE-3 ms, acceptance length EAGLE, TPOT EAGLE ms), issue #20780
PUBLISHED = {2: (2.36, 4.32, 2.10, 4.37), 3: (2.79, 4.09, 2.29, 4.29), 4: (3.08, 4.05, 2.39, 4.48),
             5: (3.32, 4.13, 2.43, 4.71), 6: (3.46, 4.20, 2.45, 4.94), 7: (3.54, 4.29, 2.47, 5.20)}
FITTED = {("eagle3", 2), ("eagle3", 7)}


def _workload():
    spec = importlib.util.spec_from_file_location("check_eagle_published", REPO / "scripts" / "check_eagle_published.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # its dataclasses look their module up
    spec.loader.exec_module(mod)
    return mod.WORKLOAD


def overrides(method: str = "none", k: int = 0) -> list:
    """The run of ``method`` at ``k`` with the published acceptance length (``none``: no speculation)."""
    base = _workload() + [f"model={TARGET}", f"device={DEVICE}"]
    if method == "none":
        return base + ["speculative.method=none"]
    al = PUBLISHED[k][0] if method == "eagle3" else PUBLISHED[k][2]
    return base + [f"speculative.method={method}", f"speculative.model={HEADS[method]}",
                   f"speculative.num_speculative_tokens={k}", f"speculative.mean_acceptance_length={al}"]


def label(method: str = "none", k: int = 0) -> str:
    return "none" if method == "none" else f"{method} k{k}"


def runs() -> list:
    """Every run: (label, config, overrides), in the CSV's order (no config file: the defaults)."""
    return [(label(), None, overrides())] + [(label(m, k), None, overrides(m, k))
                                             for k in PUBLISHED for m in ("eagle3", "eagle")]


def measure(config, over) -> dict:
    """One run's recorded numbers: TPOT p50 (ms)."""
    from vidur_specdec import simulate

    return {"tpot_ms_p50": simulate(config, over).summary["tpot_ms"]["p50"]}


def simulated_speedup(method: str, k: int, res: dict) -> float:
    """Simulated TPOT speedup of ``method`` at ``k`` with the published acceptance length (recorded runs)."""
    return res[label()]["tpot_ms_p50"] / res[label(method, k)]["tpot_ms_p50"]


def published_speedup(method: str, k: int) -> float:
    return VANILLA_TPOT_MS / (PUBLISHED[k][1] if method == "eagle3" else PUBLISHED[k][3])


def row(k: int, res: dict) -> str:
    cells = []
    for method in ("eagle3", "eagle"):
        pub, sim = published_speedup(method, k), simulated_speedup(method, k, res)
        err = f"{100 * (sim - pub) / pub:+.1f} %".replace("-", "−") + (" (fitted)" if (method, k) in FITTED else "")
        cells += [f"{pub:.2f}×", f"{sim:.2f}×", err]
        if method == "eagle3":  # the share of the acceptance length a user gets back as speedup
            al = PUBLISHED[k][0]
            cells += [f"{100 * pub / al:.0f} %", f"{100 * sim / al:.0f} %"]
    return f"| {k} | " + " | ".join(cells) + " |"


def text(res=None) -> str:
    """The block, from the recorded runs (``res``: :func:`recorded_runs.read`'s)."""
    res = res or recorded_runs.read(CSV_NAME)
    return "\n".join([BEGIN, "| K | EAGLE-3 published | simulated | error | share of acceptance length, published "
                      "| simulated | EAGLE published | simulated | error |",
                      "|---:|---:|---:|---:|---:|---:|---:|---:|---:|", *(row(k, res) for k in PUBLISHED), END])


def main() -> int:
    return recorded_runs.script_main(CSV_NAME, runs, measure, COLUMNS, DOC, text)


if __name__ == "__main__":
    sys.exit(main())
