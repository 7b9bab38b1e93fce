#!/usr/bin/env bash
# Regenerate the recorded sweep results, the results page, the tables in docs/sweep.md and its reading
# paragraphs quoting them (scripts/sweep_readings.py),
# then the recorded tunes and their figures in docs/tune.md and README.md (scripts/tune_figures.py),
# the MoE step-ratio, held-out MoE-layer and builder-vs-measured MoE tables in docs/model.md and docs/profiles.md
# (scripts/moe_step_ratio.py, scripts/moe_layer_error.py, scripts/moe_builder_vs_measured.py), the
# builder-against-measured-kernel-tables error table in docs/profiles.md (scripts/kernel_error.py), and the
# colocated-vs-disaggregated sweep (sweeps/disaggregation.yaml, kept off the results page) with its table in
# docs/model.md (scripts/disagg_compare.py); then the figures recorded run by run under sweeps/results/figures/
# (scripts/recorded_runs.py) and their tables in docs/model.md: DP attention + EP against TP replicas
# (scripts/dp_vs_tp.py), PP against TP (scripts/pp_vs_tp.py), dual-batch overlap (scripts/dbo_throughput.py), Qwen3.5 MTP at a schedule threshold
# (scripts/qwen35_schedule_threshold.py), the n-gram proposal rate
# (scripts/ngram_rate.py), the EAGLE calibration (scripts/eagle_calibration.py) and the draft KV transferred or
# recomputed (scripts/draft_kv_recompute.py); then the tables recomputed from per-step prices, memory and short
# runs: the block drafter's draft cost (scripts/block_draft_cost.py), the hybrid models (scripts/hybrid_models.py),
# the sparse-attention models (scripts/sparse_models_table.py), the models aiconfigurator-core ships
# (scripts/shipped_models.py), MoE routing against the tables (scripts/routing_error.py), Blackwell over Hopper op
# by op (scripts/blackwell_ratio.py), acceptance across k
# (scripts/acceptance_across_k.py) and the config-keys table in docs/config.md (scripts/config_tables.py).
# Run after any change to the simulator, the profiles or the sweep files (about 20 minutes on 2 cores, half of it
# scripts/dp_vs_tp.py):
#   sweeps/results/regenerate.sh            (PYTHON=/path/to/python to choose the interpreter)
# tests/test_sweep_recorded.py, tests/test_report.py and tests/test_recorded_doc_figures.py fail while the
# recorded files are stale.
# One results page for all five sweeps (a Sweep selector picks one), in the order below.
set -euo pipefail
cd "$(dirname "$0")/../.."
PY=${PYTHON:-python}
SWEEPS=(specdec_39 draft_model deployments eagle moe)
# Each sweep runs in a folder of its own (the output-folder rule refuses sweeps/results, which also holds
# this script), and its CSV is copied here.
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
for name in "${SWEEPS[@]}"; do
  "$PY" -m vidur_specdec.main --config "sweeps/$name.yaml" --output-dir "$TMP/$name"
  cp "$TMP/$name/$name.csv" "sweeps/results/$name.csv"
done
CSVS=()
for name in "${SWEEPS[@]}"; do CSVS+=("sweeps/results/$name.csv"); done
"$PY" -m vidur_specdec.main report "${CSVS[@]}" -o docs/results.html --markdown docs/sweep.md
# The reading paragraphs of docs/sweep.md that quote the five CSVs (tests/test_sweep_readings.py)
"$PY" scripts/sweep_readings.py --write
"$PY" scripts/tune_figures.py
"$PY" scripts/moe_step_ratio.py --write
"$PY" scripts/moe_layer_error.py --write
"$PY" scripts/moe_builder_vs_measured.py --write
"$PY" scripts/kernel_error.py --write
"$PY" scripts/routing_error.py --write
"$PY" scripts/blackwell_ratio.py --write
# Colocated vs 1P1D vs 2P2D: its own CSV and the table in docs/model.md written from it
"$PY" -m vidur_specdec.main --config sweeps/disaggregation.yaml --output-dir "$TMP/disaggregation"
cp "$TMP/disaggregation/disaggregation.csv" sweeps/results/disaggregation.csv
"$PY" scripts/disagg_compare.py --write
# Figures recorded run by run (sweeps/results/figures/*.csv) and the tables written from them
"$PY" scripts/dp_vs_tp.py --record --write
"$PY" scripts/pp_vs_tp.py --record --write
"$PY" scripts/qwen35_schedule_threshold.py --record --write
"$PY" scripts/ngram_rate.py --record --write
"$PY" scripts/eagle_calibration.py --record --write
"$PY" scripts/draft_kv_recompute.py --record --write
"$PY" scripts/dbo_throughput.py --record --write
# Tables recomputed from per-step prices, memory and short runs
"$PY" scripts/block_draft_cost.py --write
"$PY" scripts/hybrid_models.py --write
"$PY" scripts/sparse_models_table.py --write
"$PY" scripts/shipped_models.py --write
"$PY" scripts/acceptance_across_k.py --write
"$PY" scripts/config_tables.py --write
