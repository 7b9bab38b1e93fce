#!/usr/bin/env bash
# Regenerate the recorded sweep results, the results page and the tables in docs/sweep.md.
# Run after any change to the simulator, the profiles or the sweep files (about 2 minutes on 2 cores):
#   sweeps/results/regenerate.sh            (PYTHON=/path/to/python to choose the interpreter)
# tests/test_sweep_recorded.py fails while the recorded files are stale.
set -euo pipefail
cd "$(dirname "$0")/../.."
PY=${PYTHON:-python}
"$PY" -m vidur_specdec.main --config sweeps/specdec_39.yaml --output-dir sweeps/results --overwrite
"$PY" -m vidur_specdec.main --config sweeps/draft_model.yaml --output-dir sweeps/results --overwrite
"$PY" -m vidur_specdec.main report sweeps/results/specdec_39.csv -o docs/results.html --markdown docs/sweep.md
"$PY" -m vidur_specdec.main report sweeps/results/draft_model.csv --markdown docs/sweep.md
