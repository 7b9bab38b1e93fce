"""The project's predictor against Vidur's random forest: training time and held-out error.

Both are trained on the same rows of a measured profile (default: Llama-2-7B,
A100, TP 1, from ../shared/vidur-profiles) and scored on the same random 20 %
of rows held out per operator table (seed 0): the 259 ``mlp.csv`` rows for the
nine linear/elementwise ops, and the decode and prefill rows of the attention
file separately.

* ours  — ``OperatorTimeModel.fit_frames`` (interpolation tables), one fit for all ops;
* vidur — one ``GridSearchCV(RandomForestRegressor)`` per op with Vidur's own
          estimator, grid, MAPE scorer and feature columns
          (``RandomForrestExecutionTimePredictor``), k-fold CV.

``--grid full`` is Vidur's default grid (n_estimators 250/500/750 × max_depth
8/16/32 × min_samples_split 2/5/10, 10-fold: 35 minutes on 2 cores for the
full profile); ``--grid reduced`` (the default here) is n_estimators 250 ×
max_depth 16/32 × min_samples_split 2/5 with 5-fold CV. Errors are the mean
and median absolute % error on the held-out rows (Vidur's MAPE definition).
Also prints the cold-start time of the project's predictor for target +
drafter (fit, no cache) and the warm start (disk-cache hit).

    python benchmarks/bench_predictor.py [--grid reduced|full] [--profiles ../shared/vidur-profiles]
"""

import argparse
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pandas as pd
from sklearn.metrics import make_scorer
from sklearn.model_selection import GridSearchCV
from vidur.config import RandomForrestExecutionTimePredictorConfig
from vidur.execution_time_predictor.random_forrest_execution_time_predictor import (
    RandomForrestExecutionTimePredictor,
)
from vidur.execution_time_predictor.sklearn_execution_time_predictor import SklearnExecutionTimePredictor

from vidur_specdec.costs.fit_cache import clear_memory_cache, load_time_model
from vidur_specdec.costs.operator_model import LINEAR_OPS, OperatorTimeModel
from vidur_specdec.costs.profile_files import locate_profile

REPO = Path(__file__).resolve().parents[1]
MAPE = SklearnExecutionTimePredictor.mean_absolute_percentage_error
GRIDS = {
    "full": RandomForrestExecutionTimePredictorConfig(),
    "reduced": RandomForrestExecutionTimePredictorConfig(num_estimators=[250], max_depth=[16, 32],
                                                         min_samples_split=[2, 5], k_fold_cv_splits=5),
}


def split(df, frac=0.2, seed=0):
    rng = np.random.default_rng(seed)
    test = np.zeros(len(df), dtype=bool)
    test[rng.choice(len(df), size=max(1, int(round(frac * len(df)))), replace=False)] = True
    return df[~test], df[test]


def vidur_fit(cfg, X, y):
    """Vidur's own estimator, grid and scorer (``SklearnExecutionTimePredictor._train_model``)."""
    shim = SimpleNamespace(_config=cfg)
    gs = GridSearchCV(
        estimator=RandomForrestExecutionTimePredictor._get_estimator(shim),
        param_grid=RandomForrestExecutionTimePredictor._get_grid_search_params(shim),
        scoring=make_scorer(MAPE, greater_is_better=False),
        cv=cfg.k_fold_cv_splits if len(X) >= cfg.k_fold_cv_splits else 2,
        n_jobs=cfg.num_training_job_threads,
    )
    gs.fit(X, y)
    return gs.best_estimator_


def ape(y, p):
    y, p = np.asarray(y, float), np.asarray(p, float)
    return np.abs(p - y) / y * 100


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--profiles", default=str(REPO.parent / "shared" / "vidur-profiles"))
    ap.add_argument("--model", default="meta-llama/Llama-2-7b-hf")
    ap.add_argument("--grid", choices=sorted(GRIDS), default="reduced")
    args = ap.parse_args()

    mlp_path, att_path = locate_profile(args.profiles, "a100", args.model)
    mlp = pd.read_csv(mlp_path)
    att = pd.read_csv(att_path)
    mlp = mlp[mlp["num_tensor_parallel_workers"] == 1]
    att = att[att["num_tensor_parallel_workers"] == 1]
    mlp_tr, mlp_te = split(mlp)
    dec = att[~att["is_prefill"].astype(bool)]
    pre = att[att["is_prefill"].astype(bool)]
    dec_tr, dec_te = split(dec)
    pre_tr, pre_te = split(pre)

    t0 = time.perf_counter()
    ours = OperatorTimeModel.fit_frames(mlp_tr, pd.concat([dec_tr, pre_tr]))
    ours_s = time.perf_counter() - t0

    tables = {op: (mlp_tr, mlp_te, ["num_tokens"], f"time_stats.{op}.median") for op in LINEAR_OPS}
    tables["attn_decode"] = (dec_tr, dec_te, ["batch_size", "kv_cache_size"], "time_stats.attn_decode.median")
    tables["attn_prefill"] = (pre_tr, pre_te, ["kv_cache_size", "prefill_chunk_size"],
                              "time_stats.attn_prefill.median")

    def ours_predict(op, te):
        if op == "attn_decode":
            return [ours.decode_attention_ms(int(b), kv) for b, kv in zip(te["batch_size"], te["kv_cache_size"])]
        if op == "attn_prefill":
            return [ours.prefill_attention_ms(kv, int(c)) for kv, c in zip(te["kv_cache_size"], te["prefill_chunk_size"])]
        return [ours.linear_ms(op, int(n)) for n in te["num_tokens"]]

    cfg = GRIDS[args.grid]
    rows, vidur_s = [], 0.0
    for op, (tr, te, feats, target) in tables.items():
        t0 = time.perf_counter()
        rf = vidur_fit(cfg, tr[feats], tr[target])
        vidur_s += time.perf_counter() - t0
        e_v = ape(te[target], rf.predict(te[feats]))
        e_o = ape(te[target], ours_predict(op, te))
        rows.append((op, len(tr), len(te), e_o.mean(), np.median(e_o), e_v.mean(), np.median(e_v)))

    print(f"profile: {mlp_path.parent} (TP 1); held out: random 20 % per table, seed 0; Vidur grid: {args.grid}")
    print(f"{'op':26s} {'train':>5s} {'test':>5s} | {'ours MAPE':>9s} {'median':>7s} | {'vidur MAPE':>10s} {'median':>7s}")
    for op, ntr, nte, om, omed, vm, vmed in rows:
        print(f"{op:26s} {ntr:5d} {nte:5d} | {om:8.2f}% {omed:6.2f}% | {vm:9.2f}% {vmed:6.2f}%")
    o_all = np.mean([r[3] for r in rows])
    v_all = np.mean([r[5] for r in rows])
    print(f"{'mean over ops':26s} {'':5s} {'':5s} | {o_all:8.2f}% {'':7s} | {v_all:9.2f}%")
    print(f"training time: ours {ours_s:.2f} s (all ops), vidur {vidur_s:.1f} s ({args.grid} grid) "
          f"-> {vidur_s / ours_s:.0f}x")

    # cold and warm start of the simulator's own path (shipped target + drafter profiles)
    with tempfile.TemporaryDirectory() as cache:
        clear_memory_cache()
        t0 = time.perf_counter()
        for m in ("meta-llama/Llama-2-7b-hf", "JackFram/llama-160m"):
            load_time_model(*locate_profile("shipped", "a100", m), cache_dir=cache)
        cold = time.perf_counter() - t0
        clear_memory_cache()
        t0 = time.perf_counter()
        for m in ("meta-llama/Llama-2-7b-hf", "JackFram/llama-160m"):
            load_time_model(*locate_profile("shipped", "a100", m), cache_dir=cache)
        warm = time.perf_counter() - t0
    print(f"shipped target + drafter: cold start {cold:.2f} s (fit), warm start {warm:.3f} s (disk cache)")


if __name__ == "__main__":
    main()
