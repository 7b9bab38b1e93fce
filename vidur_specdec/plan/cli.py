"""``python -m vidur_specdec plan --gpus N [--config FILE] [...] --output-dir DIR``: options and the entry point.

Contract shared with the other subcommands: :func:`add_arguments` adds this
command's options to a parser and :func:`run` takes the parsed arguments and
returns the exit status (0 done, 2 bad input: one line ``error: ...``, nothing
written). :func:`execute` is what both the command and ``vidur_specdec.plan(...)``
run: the screen (:mod:`.screen`), the search (:mod:`.search`), the answer
(:mod:`.frontier`) and the files (:mod:`.outputs`).
"""

from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path
from typing import Callable, Dict, List, Optional

from vidur_specdec import console
from vidur_specdec.config import ConfigError
from vidur_specdec.plan.inputs import OPTIONS, build_spec, flag_name


def add_arguments(ap: argparse.ArgumentParser) -> None:
    """Add the plan options (one table: :data:`vidur_specdec.plan.inputs.OPTIONS`) and the shared ones."""
    console.add_config(ap, required=False, help="a run config (the base: engine, workload, seed, ...) or a plan "
                                                "file (a plan: section and a base:; docs/plan.md)")
    console.add_output_dir(ap, required=True)
    console.add_set(ap)
    console.add_jobs(ap)
    console.add_executor(ap)
    console.add_overwrite(ap, help="discard the folder's plan journal and start over")
    for o in OPTIONS:
        ap.add_argument(o.flag, dest=o.name, default=None, metavar=o.metavar, help=o.help +
                        (f" (default {', '.join(o.default) if isinstance(o.default, tuple) else o.default})"
                         if o.default is not None and "default" not in o.help else ""))


def given_options(args: argparse.Namespace) -> Dict:
    return {o.name: getattr(args, o.name, None) for o in OPTIONS if getattr(args, o.name, None) is not None}


def execute(args: argparse.Namespace, log: Optional[Callable[[str], None]] = print,
            where: Callable[[str], str] = flag_name):
    """Run a plan from parsed arguments and write its folder; returns ``(answer, written paths)``.

    ``log(line)`` gets the progress lines (None: silent); ``where(option)`` names an option in messages (the
    flag, or the keyword from Python). Bad input raises :class:`ConfigError` before anything is written; a
    plan that finds nothing raises it after removing what it wrote.
    """
    from vidur_specdec import outfolder
    from vidur_specdec.sweep.executors import check_executor, default_jobs
    from vidur_specdec.sweep.lock import FolderLock

    say = log or (lambda line: None)
    spec = build_spec(args.config, list(getattr(args, "overrides", []) or []), given_options(args), where)
    out_dir = Path(args.output_dir)
    if out_dir.exists() and not out_dir.is_dir():
        raise ConfigError(f"--output-dir: {out_dir} exists and is not a folder")
    overwrite = bool(getattr(args, "overwrite", False))
    clear = outfolder.check(out_dir, "plan", overwrite)
    jobs = args.jobs if args.jobs is not None else default_jobs()
    if jobs < 1:
        raise ConfigError(f"--jobs: must be >= 1, got {jobs}")
    check_executor(args.executor, args.address)

    from vidur_specdec.plan import run as plan_run

    stage1 = plan_run.screen_stage(spec, say, jobs)  # ConfigError (nothing fits, nothing can meet the SLOs): nothing written
    created = not out_dir.exists()
    out_dir.mkdir(parents=True, exist_ok=True)
    lock = FolderLock(out_dir)
    lock.acquire()
    runner = None
    had_journal = False
    try:
        if clear:
            outfolder.clear(out_dir)
        runner = plan_run.make_runner(spec, out_dir, jobs, args.executor, args.address, overwrite, say)
        had_journal = runner.journal.path.exists() and not overwrite
        runner.open()
        answer = plan_run.search_stage(spec, stage1, runner, say)
        from vidur_specdec.plan.outputs import write_all

        paths = write_all(out_dir, answer)
    except BaseException as e:
        keep = isinstance(e, (KeyboardInterrupt, console.ServiceError))  # finished points resume on a rerun
        if runner is not None and not had_journal and not keep:
            runner.journal.path.unlink(missing_ok=True)
        lock.release()
        lock = None
        if created and not keep:
            shutil.rmtree(out_dir, ignore_errors=True)
        if isinstance(e, (ConfigError, KeyboardInterrupt, console.ServiceError)):
            raise
        raise ConfigError(f"plan: a point failed ({type(e).__name__}: "
                          f"{str(e).splitlines()[0] if str(e) else ''}); nothing was kept") from None
    finally:
        if lock is not None:
            lock.release()
    return answer, paths


def run(args: argparse.Namespace) -> int:
    """Run a plan from parsed arguments; returns the exit status."""
    try:
        answer, paths = execute(args, log=lambda line: print(line, file=sys.stderr, flush=True))
    except KeyboardInterrupt:
        print("\ninterrupted: finished points are saved in the output folder's journal; rerun the same command "
              "to resume", file=sys.stderr)
        return 130
    from vidur_specdec.plan.outputs import report_lines

    for line in report_lines(answer):
        print(line)
    print("wrote " + ", ".join(str(p) for p in paths))
    return 0


def main(argv: Optional[List[str]] = None) -> int:
    """``python -m vidur_specdec.plan.cli ...``: the same as ``python -m vidur_specdec plan ...``."""
    return console.run_subcommand("plan", sys.modules[__name__], argv)


if __name__ == "__main__":
    sys.exit(main())
