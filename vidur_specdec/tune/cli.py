"""``python -m vidur_specdec.main tune --config CFG --output-dir DIR [...]``: options and the entry point.

Contract shared with the command-line work: :func:`add_arguments` adds this
command's options to a parser (``--config``, ``--output-dir`` and ``--set``
only when the parser lacks them) and :func:`run` takes the parsed arguments and
returns the exit status (0 done, 2 a bad input: one line ``error: ...``, nothing
written).
"""

from __future__ import annotations

import argparse
import math
import shutil
import sys
from pathlib import Path
from typing import List, Optional

from vidur_specdec.config import MAX_K, ConfigError
from vidur_specdec.engine.resolve import load
from vidur_specdec.tune.pools import refuse_untunable
from vidur_specdec import console
from vidur_specdec.tune.points import get_axis
from vidur_specdec.tune.preflight import check_before_running
from vidur_specdec.sweep.executors import check_executor, default_jobs
from vidur_specdec.sweep.lock import FolderLock
from vidur_specdec.tune.loads import point_overloaded

# Default SLOs: MLPerf Inference v5.0's interactive Llama-2-70B scenario (TTFT p99 <= 450 ms,
# TPOT p99 <= 40 ms), the published interactive serving target closest to this project's models.
DEFAULT_SLO_TTFT_MS = 450.0
DEFAULT_SLO_TPOT_MS = 40.0
DEFAULT_SLO_PERCENTILE = 99
DEFAULT_TOLERANCE = 0.05
CHECK_MARGIN = 0.03  # the schedule must be within 3 % of the best static k and of k = 0 at each checked load


def add_arguments(ap: argparse.ArgumentParser) -> None:
    """Add the tune options to ``ap`` (shared definitions from :mod:`vidur_specdec.console`)."""
    console.add_config(ap, help="run config YAML (see configs/default.yaml)")
    console.add_output_dir(ap, required=True)
    console.add_set(ap)
    console.add_jobs(ap)
    console.add_executor(ap)
    console.add_overwrite(ap, help="discard the folder's tune journal and start over")
    ap.add_argument("--k-max", type=int, default=None,
                    help="largest static k searched (default: the config's num_speculative_tokens)")
    ap.add_argument("--objective", choices=("tpot", "throughput", "goodput"), default="tpot",
                    help="best k at a load: lowest TPOT p50 (default), highest output throughput, or highest "
                         "goodput (requests/s meeting both SLOs)")
    ap.add_argument("--slo-ttft-ms", type=float, default=DEFAULT_SLO_TTFT_MS,
                    help=f"TTFT SLO in ms at --slo-percentile (default {DEFAULT_SLO_TTFT_MS:g}, MLPerf interactive)")
    ap.add_argument("--slo-tpot-ms", type=float, default=DEFAULT_SLO_TPOT_MS,
                    help=f"TPOT SLO in ms at --slo-percentile (default {DEFAULT_SLO_TPOT_MS:g}, MLPerf interactive)")
    ap.add_argument("--slo-percentile", type=int, choices=(50, 90, 99), default=DEFAULT_SLO_PERCENTILE,
                    help="percentile the SLOs apply to (default 99)")
    ap.add_argument("--load-axis", choices=("qps", "concurrency"), default="qps",
                    help="open-loop arrival rate (workload.qps) or closed-loop concurrency (workload.concurrency)")
    ap.add_argument("--loads", default=None,
                    help="comma-separated loads on --load-axis simulated for every k and the schedule besides the "
                         "search, e.g. 1,8,32,64")
    ap.add_argument("--warmup-requests", type=int, default=None,
                    help="leave the first N requests of each point out of its metrics (workload.warmup_requests); "
                         "default on --load-axis concurrency: each point's start burst (C requests at concurrency "
                         "C), 0 keeps them")
    ap.add_argument("--compare-drafters", nargs="?", const="", default=None, metavar="DATASET",
                    help="also compare every drafter the acceptance library knows for the target, each at its "
                         "published acceptance on DATASET (default: workload.dataset, else mt-bench), at the --loads "
                         "(else the checked loads)")
    ap.add_argument("--tolerance", type=float, default=DEFAULT_TOLERANCE,
                    help=f"relative width at which a load bracket stops (default {DEFAULT_TOLERANCE:g})")


def check_args(args: argparse.Namespace):
    """Every check that needs no simulation; returns (base, k_max, axis, slo, options, out_dir)."""
    overrides = list(getattr(args, "overrides", []) or [])
    if getattr(args, "warmup_requests", None) is not None:
        if args.warmup_requests < 0:
            raise ConfigError(f"--warmup-requests: must be an integer >= 0, got {args.warmup_requests}")
        overrides.append(f"workload.warmup_requests={args.warmup_requests}")
    base = load(args.config, overrides)
    refuse_untunable(base)  # a deployment of prefill and decode pools: vidur_specdec.tune.pools
    if base.speculative.num_speculative_tokens_per_batch_size is not None:
        raise ConfigError("speculative.num_speculative_tokens_per_batch_size: tune chooses the per-batch-size "
                          "schedule itself (its speculative_config.json), so a schedule in the config does nothing; "
                          "remove the key (to price a schedule you have, use run or sweep)")
    if base.speculative.method == "none":
        raise ConfigError("speculative.method: tune needs a proposer (ngram, eagle3, draft_model, ...); got none")
    if base.speculative.num_speculative_tokens == 0 and args.k_max is None:
        raise ConfigError("speculative.num_speculative_tokens: tune searches k = 0..this value, so it must be >= 1 "
                          "(or give --k-max); got 0")
    k_max = args.k_max if args.k_max is not None else base.speculative.num_speculative_tokens
    if not 1 <= k_max <= MAX_K:
        raise ConfigError(f"--k-max: must be an integer in [1, {MAX_K}], got {k_max}")
    used = base.speculative.acceptance_input()
    if used in ("acceptance_per_position", "acceptance_histogram"):
        given = len(getattr(base.speculative, used)) - (1 if used == "acceptance_histogram" else 0)
        if k_max > given:
            raise ConfigError(f"--k-max: speculative.{used} describes {given} guesses, fewer than --k-max {k_max}; "
                              f"use --k-max <= {given} or give the input for {k_max}")
    for opt, v in (("--slo-ttft-ms", args.slo_ttft_ms), ("--slo-tpot-ms", args.slo_tpot_ms)):
        if not (math.isfinite(v) and v > 0):
            raise ConfigError(f"{opt}: must be a finite number of ms > 0, got {v:g}")
    if not (math.isfinite(args.tolerance) and 0 < args.tolerance < 1):
        raise ConfigError(f"--tolerance: must be in (0, 1), got {args.tolerance}")
    axis = get_axis(args.load_axis)
    if axis.name == "concurrency":  # a --set that does nothing on this axis is refused, as a run refuses one
        from vidur_specdec.config import unused
        from vidur_specdec.config.overlay import assignments, overlay

        given = unused.leaves(overlay({}, assignments(list(getattr(args, "overrides", []) or []))))
        if any(unused.overlaps(k, "workload.num_requests") for k in given):
            raise ConfigError("workload.num_requests: does nothing with --load-axis concurrency, which sets each "
                              "point's count (22, 88, 128, 220, 440, 880 at concurrency 1, 8, 32, 64, 128, 256; "
                              "four per request in flight otherwise); set workload.requests_per_concurrency instead")
    loads = check_before_running(base, k_max, axis, getattr(args, "loads", None))
    slo = {"ttft_ms": float(args.slo_ttft_ms), "tpot_ms": float(args.slo_tpot_ms), "percentile": args.slo_percentile}
    options = {"k_max": k_max, "objective": args.objective, "tolerance": args.tolerance, "load_axis": axis.name}
    if axis.name == "concurrency" and getattr(args, "warmup_requests", None) is None \
            and base.workload.warmup_requests == 0:
        from vidur_specdec.tune.points import BURST

        options["warmup"] = BURST  # each point leaves out its start burst (tune.loads.warmup)
    if loads:
        options["loads"] = loads
    if getattr(args, "compare_drafters", None) is not None:
        from vidur_specdec.tune.drafters import candidates

        candidates(base, k_max, args.compare_drafters or None)  # a target without figures: refused before any point
        options["compare_drafters"] = args.compare_drafters
    out_dir = Path(args.output_dir)
    if out_dir.exists() and not out_dir.is_dir():
        raise ConfigError(f"--output-dir: {out_dir} exists and is not a folder")
    return base, k_max, axis, slo, options, out_dir, loads


def execute(args: argparse.Namespace, log=print):
    """Run a tune from parsed arguments and write its folder; returns (result, evaluator, written paths).

    ``log(line)`` gets the progress and warning lines (None: silent). Bad input raises
    :class:`ConfigError` before anything is written; a failed point raises it after the tune's own files
    are removed. Shared by the command (:func:`run`) and ``vidur_specdec.tune(...)`` (:mod:`.api`).
    """
    say = log or (lambda line: None)
    lock = None
    try:
        base, k_max, axis, slo, options, out_dir, loads = check_args(args)
        # lazy: optional dependency (ImportError handled)
        from vidur_specdec import outfolder

        clear = outfolder.check(out_dir, "tune", bool(getattr(args, "overwrite", False)))  # the one folder rule
        jobs = args.jobs if args.jobs is not None else default_jobs()
        if jobs < 1:
            raise ConfigError(f"--jobs: must be >= 1, got {jobs}")
        check_executor(args.executor, args.address)
        # lazy: optional dependency (ImportError handled)
        from vidur_specdec.engine.simulation import prepare
        from vidur_specdec.tune.choose import choose_schedule
        from vidur_specdec.tune.points import Evaluator, Setting, build_config, setting_overrides
        from vidur_specdec.tune.search import OBJECTIVES, Tuner
        from vidur_specdec.tune.outputs import write_all

        for k in (0, k_max):  # profiles found, memory fits, predictors fitted (workers inherit them)
            top = build_config(base, setting_overrides(base, Setting(k)))
            prepare(top)
        from vidur_specdec import provenance

        # where the numbers come from: the k_max point's kernels and acceptance (summary.json, the first line)
        options_prov = provenance.for_config(top)
        ev = Evaluator(base, axis, out_dir, slo, options, jobs, args.executor, args.address,
                       bool(getattr(args, "overwrite", False)))
        created = not out_dir.exists()
        out_dir.mkdir(parents=True, exist_ok=True)
        lock = FolderLock(out_dir)
        lock.acquire()
        if clear:  # --overwrite of another command's results: the folder holds only this tune's
            # lazy: optional dependency (ImportError handled)
            from vidur_specdec.outfolder import clear as clear_folder

            clear_folder(out_dir)
        had_journal = ev.journal.path.exists()
        ev.open()
        say(f"tune: {base.model}, {base.speculative.method}, k 0..{k_max}, load axis {axis.name}, "
            f"SLOs TTFT p{slo['percentile']} <= {slo['ttft_ms']:g} ms and TPOT p{slo['percentile']} <= "
            f"{slo['tpot_ms']:g} ms, on {jobs} {args.executor} worker{'s' if jobs > 1 else ''} -> {out_dir}")
        say("tune: " + provenance.line(options_prov, top.speculative))
        # lazy: optional dependency (ImportError handled)
        from vidur_specdec.tune.vllm_config import tune_warnings

        from vidur_specdec.tune.pools import decode_view

        notes = tune_warnings(decode_view(base))  # the decode pool's engine keys (colocated: the run's)
        for line in notes:
            say(line)
        tuner = Tuner(ev, k_max, args.tolerance, OBJECTIVES[args.objective], slo, loads,
                      getattr(args, "compare_drafters", None))
        try:
            res = tuner.tune(lambda limit: choose_schedule(base, k_max, args.tolerance, limit))
            paths = write_all(out_dir, ev, res, options, tuner.meets, notes, options_prov)
        except Exception as e:  # noqa: BLE001 - reported as one line below
            # a failed tune leaves nothing that blocks the same command's rerun (its journal, a new folder)
            if not had_journal:
                ev.journal.path.unlink(missing_ok=True)
            lock.release()
            lock = None
            if created:
                shutil.rmtree(out_dir, ignore_errors=True)
            if isinstance(e, ConfigError):
                raise
            raise ConfigError(f"tune: a point failed ({type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}); "
                              "nothing was kept") from None
    finally:
        if lock is not None:
            lock.release()
    return res, ev, paths


def run(args: argparse.Namespace) -> int:
    """Run a tune from parsed arguments; returns the exit status."""
    try:
        res, ev, paths = execute(args, log=lambda line: print(line, file=sys.stderr, flush=True))
    except KeyboardInterrupt:
        print("\ninterrupted: finished points are saved in the output folder's journal; rerun the same command "
              "to resume", file=sys.stderr)
        return 130
    _report(res, ev.axis, ev)
    print("wrote " + ", ".join(str(p) for p in paths))
    return 0


def _report(res, axis, ev) -> None:
    f = axis.fmt
    for k in sorted(res.crossover):
        c = res.crossover[k]
        where = (f"{f(c)} {axis.name} (between {f(res.crossover_bracket[k][0])} and {f(res.crossover_bracket[k][1])})"
                 if c is not None else f"none ({res.crossover_note.get(k, '')})")
        print(f"crossover k={k}: {where}")

    ref = res.ttft_reference.get("ttft_ms_p50")
    over = sorted({p.load for p in ev.points if point_overloaded(p.metrics, ref)})
    if over:
        print("overloaded (left out of crossovers and best k): " + ", ".join(f(x) for x in over) + f" {axis.name}")
    cap = res.capacity
    print(f"capacity under the SLOs: {f(cap['none']) if cap.get('none') is not None else '-'} without speculation, "
          f"{f(cap['speculative']) if cap.get('speculative') is not None else '-'} with the schedule")
    print("best static k: " + ", ".join(f"{f(x)}: {k}" for x, k in res.best_k.items()))
    print("schedule: " + ", ".join(f"{lo}-{hi}: {k}" for lo, hi, k in res.schedule))
    end = max(hi for _, hi, _ in res.schedule) if res.schedule else None
    from vidur_specdec.tune.pools import max_batch

    cap_b = max_batch(ev.base)
    if end is not None and end < cap_b:  # the schedule ends where the simulated batches end (tune.choose)
        print(f"schedule ends at batch size {end}, the largest a simulated load reached without overload; batch "
              f"sizes {end + 1}-{cap_b} take its last k ({res.schedule[-1][2]}, vLLM's rule past the last range), "
              "which no simulation backs: add --loads to reach them")
    if res.drafters is not None:
        from vidur_specdec.tune.drafters import lines

        for line in lines(res.drafters, axis.name):
            print(line)
    for c in res.checks:
        sb, s0 = c["shortfall_vs_best"], c["shortfall_vs_k0"]
        print(f"check at {f(c['load'])} {axis.name}: schedule {100 * (sb or 0):+.1f} % against the best static "
              f"k={c['best_static_k']}, {100 * (s0 or 0):+.1f} % against k=0 (negative: better)")
        if (sb is not None and sb > CHECK_MARGIN) or (s0 is not None and s0 > CHECK_MARGIN):
            print(f"warning: at {f(c['load'])} {axis.name} the schedule is more than {CHECK_MARGIN:.0%} worse than "
                  "a static k; prefer that k there", file=sys.stderr)
        if c.get("overloaded"):
            print(f"warning: at {f(c['load'])} {axis.name} the schedule's run is overloaded (queue waits or TTFT "
                  "growth, docs/tune.md); lower k at the batch sizes that load reaches", file=sys.stderr)
        n = c.get("num_steps") or 0
        if n and (c.get("k_flips") or 0) > 0.05 * n:
            print(f"warning: at {f(c['load'])} {axis.name} the schedule changes k on {c['k_flips']} of {n} steps "
                  "(vLLM issue #49548)", file=sys.stderr)


def main(argv: Optional[List[str]] = None) -> int:
    """``python -m vidur_specdec.tune.cli ...``: the same as ``python -m vidur_specdec tune ...``."""
    return console.run_subcommand("tune", sys.modules[__name__], argv)


if __name__ == "__main__":
    sys.exit(main())
