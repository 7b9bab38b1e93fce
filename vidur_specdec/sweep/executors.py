"""Executors: run sweep rows on a local process pool or a Ray cluster; results come back to the parent."""

from __future__ import annotations

import os
import signal
import sys
from typing import Callable, Dict, List, Optional, Sequence

from vidur_specdec.config import ConfigError
from vidur_specdec.sweep.definition import SweepRow
from vidur_specdec.sweep.worker import _warm, run_row


def _set_parent_death_signal() -> None:
    """Linux: die with the parent, so a killed sweep leaves no orphan workers."""
    if sys.platform.startswith("linux"):
        try:
            import ctypes

            ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
        except Exception:  # pragma: no cover
            pass


def _local_worker_init(warm: Sequence[Dict]) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent handles Ctrl-C
    _set_parent_death_signal()
    _warm(warm)  # a no-op after fork (the parent's cache is inherited)


def _note(e: BaseException, row: SweepRow) -> None:
    if hasattr(e, "add_note"):  # Python 3.11+
        e.add_note(f"while running sweep row {row.index} ({row.describe()})")


def default_jobs() -> int:
    """The cores this process may use."""
    try:
        return len(os.sched_getaffinity(0)) or 1
    except AttributeError:  # pragma: no cover - not Linux
        return os.cpu_count() or 1


def _run_local(rows: List[SweepRow], jobs: int, warm: Sequence[Dict], on_done: Callable) -> None:
    """Run rows on ``jobs`` local processes (inline when 1); ``on_done(row, result)`` in the parent."""
    if jobs <= 1 or len(rows) <= 1:
        for r in rows:
            try:
                result = run_row(r.config_dict)
            except Exception as e:
                _note(e, r)
                raise
            on_done(r, result)
        return
    import concurrent.futures as cf
    import multiprocessing as mp

    methods = mp.get_all_start_methods()
    ctx = mp.get_context("fork" if "fork" in methods else "spawn")
    pool = cf.ProcessPoolExecutor(max_workers=min(jobs, len(rows)), mp_context=ctx,
                                  initializer=_local_worker_init, initargs=(list(warm),))
    futures = {}
    try:
        futures = {pool.submit(run_row, r.config_dict): r for r in rows}
        for fut in cf.as_completed(futures):
            row = futures[fut]
            try:
                result = fut.result()
            except Exception as e:
                _note(e, row)
                raise
            on_done(row, result)
    except BaseException:
        for f in futures:
            f.cancel()
        for p in list(getattr(pool, "_processes", {}).values()):
            try:
                p.terminate()
            except Exception:  # pragma: no cover
                pass
        pool.shutdown(wait=True, cancel_futures=True)
        raise
    pool.shutdown(wait=True)


def _run_ray(rows: List[SweepRow], jobs: int, address: Optional[str], on_done: Callable) -> None:
    try:
        import ray
    except ImportError:
        raise ConfigError("--executor ray: Ray is not installed; pip install 'vidur_specdec[ray]' "
                          "(or use --executor local)") from None
    started = False
    if not ray.is_initialized():
        kwargs = dict(include_dashboard=False, logging_level="WARNING", log_to_driver=True)
        if address:
            ray.init(address=address, **kwargs)
        else:
            ray.init(num_cpus=jobs, **kwargs)
        started = True
    try:
        remote = ray.remote(num_cpus=1, max_retries=0)(run_row)
        refs = {remote.remote(r.config_dict): r for r in rows}
        pending = list(refs)
        try:
            while pending:
                done, pending = ray.wait(pending, num_returns=1)
                for ref in done:
                    try:
                        result = ray.get(ref)
                    except Exception as e:
                        _note(e, refs[ref])
                        raise
                    on_done(refs[ref], result)
        except BaseException:
            for ref in pending:
                ray.cancel(ref, force=True)
            raise
    finally:
        if started:
            ray.shutdown()
