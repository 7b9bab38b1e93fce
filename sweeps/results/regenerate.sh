#!/usr/bin/env bash
# Regenerate the recorded sweep results, the results page and the tables in docs/sweep.md.
# Run after any change to the simulator, the profiles or the sweep files (a few minutes on 2 cores):
#   sweeps/results/regenerate.sh            (PYTHON=/path/to/python to choose the interpreter)
# tests/test_sweep_recorded.py and tests/test_report.py fail while the recorded files are stale.
# One results page for all four sweeps (a Sweep selector picks one), in the order below.
set -euo pipefail
cd "$(dirname "$0")/../.."
PY=${PYTHON:-python}
SWEEPS=(specdec_39 draft_model deployments eagle)
# each sweep runs in a scratch folder (sweeps/results also holds this script, which the output-folder rule
# refuses to write beside); only its CSV is kept
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
for name in "${SWEEPS[@]}"; do
  "$PY" -m vidur_specdec.main --config "sweeps/$name.yaml" --output-dir "$TMP/$name"
  cp "$TMP/$name/$name.csv" "sweeps/results/$name.csv"
done
CSVS=()
for name in "${SWEEPS[@]}"; do CSVS+=("sweeps/results/$name.csv"); done
"$PY" -m vidur_specdec.main report "${CSVS[@]}" -o docs/results.html --markdown docs/sweep.md
