"""Executors: run sweep rows on a local process pool or a Ray cluster; results come back to the parent."""

from __future__ import annotations

import os
import signal
import sys
from typing import Callable, Dict, List, Optional, Sequence

from vidur_specdec.config import ConfigError
from vidur_specdec.sweep.definition import SweepRow
from vidur_specdec.sweep.worker import _warm, run_row
from vidur_specdec.console import ServiceError
import concurrent.futures as cf
import multiprocessing as mp
import socket


def _set_parent_death_signal() -> None:
    """Linux: die with the parent, so a killed sweep leaves no orphan workers."""
    if sys.platform.startswith("linux"):
        try:
            # lazy: optional dependency (ImportError handled)
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


def _worker_died(row: SweepRow, how: str):
    """The one-line error for a row whose worker died (kill -9, the out-of-memory killer): exit status 3."""
    return ServiceError(f"row {row.index} ({row.describe()}): its worker process died ({how}; killed, e.g. by the "
                        "out-of-memory killer); the finished rows are saved: rerun the same command to resume")


def default_jobs() -> int:
    """The cores this process may use."""
    try:
        return len(os.sched_getaffinity(0)) or 1
    except AttributeError:  # pragma: no cover - not Linux
        return os.cpu_count() or 1


def _run_inline(rows: Sequence[SweepRow], on_done: Callable, fn: Callable[[Dict], Dict]) -> None:
    for r in rows:
        try:
            result = fn(r.config_dict)
        except Exception as e:
            _note(e, r)
            raise
        on_done(r, result)


def run_local(rows: List[SweepRow], jobs: int, warm: Sequence[Dict], on_done: Callable,
              fn: Callable[[Dict], Dict] = run_row, inline: int = 0) -> None:
    """Run ``fn(row.config_dict)`` for rows on ``jobs`` local processes (inline when 1); ``on_done(row, result)``
    in the parent. ``fn`` must be picklable (a module-level function or a partial of one). ``inline``: the first
    so many rows run in this process while the others run on ``jobs - 1`` workers (this process keeps what the
    simulator caches as it runs, which later workers, forked from it, inherit); a row with a negative index is
    optional: when it fails, it is dropped (no ``on_done``) and the others go on."""
    if jobs <= 1 or len(rows) <= 1 or inline >= len(rows):
        _run_inline(rows, on_done, fn)
        return

    methods = mp.get_all_start_methods()
    ctx = mp.get_context("fork" if "fork" in methods else "spawn")
    remote = rows[inline:]
    pool = cf.ProcessPoolExecutor(max_workers=min(jobs - (1 if inline else 0), len(remote)), mp_context=ctx,
                                  initializer=_local_worker_init, initargs=(list(warm),))
    futures = {}
    try:
        futures = {pool.submit(fn, r.config_dict): r for r in remote}
        _run_inline(rows[:inline], on_done, fn)
        for fut in cf.as_completed(futures):
            row = futures[fut]
            try:
                result = fut.result()
            except cf.process.BrokenProcessPool:
                raise _worker_died(row, "the process pool broke") from None
            except Exception as e:
                if row.index < 0:
                    continue
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


RAY_CONNECT_TIMEOUT_S = 5.0  # TCP probe of --address; the whole check ends well under 30 s


def _split_address(address: str):
    """``host:port`` of a Ray address (``ray://host:port`` for Ray Client, or ``host:port`` of the GCS)."""
    rest = address.split("://", 1)[1] if "://" in address else address
    host, sep, port = rest.rpartition(":")
    if not sep or not host or not port.isdigit():
        raise ConfigError(f"--address: {address!r} is not host:port (or ray://host:port, or auto)")
    return host.strip("[]"), int(port)


def check_executor(executor: str, address: Optional[str]) -> None:
    """Before any output is written: an ``--address`` must accept a TCP connection, and Ray must be installed.

    Ray's own ``ray.init(address=...)`` retries an unreachable cluster for
    about a minute; this probe fails in :data:`RAY_CONNECT_TIMEOUT_S` with one
    line. ``auto`` (the cluster started on this machine) is left to Ray.
    """
    if executor != "ray":
        return
    if address and address != "auto":
        host, port = _split_address(address)
        try:
            with socket.create_connection((host, port), timeout=RAY_CONNECT_TIMEOUT_S):
                pass
        except OSError as e:
            why = "timed out" if isinstance(e, socket.timeout) else (e.strerror or str(e))
            raise ConfigError(f"--address: cannot reach a Ray cluster at {address} ({why}); "
                              "start it (ray start --head) or fix the address") from None
    try:
        # lazy: optional dependency (ImportError handled)
        import ray  # noqa: F401
    except ImportError:
        raise ConfigError("--executor ray: Ray is not installed; pip install 'vidur_specdec[ray]' "
                          "(or use --executor local)") from None


def _call(fn: Callable[[Dict], Dict], config_dict: Dict) -> Dict:
    return fn(config_dict)


def run_ray(rows: List[SweepRow], jobs: int, address: Optional[str], on_done: Callable,
             fn: Callable[[Dict], Dict] = run_row) -> None:
    try:
        # lazy: optional dependency (ImportError handled)
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
        remote = ray.remote(num_cpus=1, max_retries=0)(_call)  # fn may be a partial: Ray wants a function
        refs = {remote.remote(fn, r.config_dict): r for r in rows}
        pending = list(refs)
        try:
            while pending:
                done, pending = ray.wait(pending, num_returns=1)
                for ref in done:
                    try:
                        result = ray.get(ref)
                    except Exception as e:
                        if type(e).__name__ in ("WorkerCrashedError", "NodeDiedError", "ObjectLostError",
                                                "OwnerDiedError", "RayActorError", "LocalRayletDiedError"):
                            raise _worker_died(refs[ref], f"Ray: {type(e).__name__}") from None
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
