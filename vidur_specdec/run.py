"""The ``run`` subcommand: simulate one run config into an output folder.

``python -m vidur_specdec run --config FILE [--output-dir DIR] [--overwrite] [--set key=value ...]``
simulates one run config and writes ``requests.csv``, ``steps.csv``,
``summary.json`` and the resolved ``config.yaml`` into the output folder
(``python -m vidur_specdec.main --config FILE``, :mod:`vidur_specdec.main`, runs it too).

Output folders (:class:`RunFolder`) never collide or mix:

* without ``--output-dir`` a fresh ``runs/<timestamp>`` folder (``-1``, ``-2``
  ... appended when taken) is created atomically before the simulation, so two
  runs started in the same second get different folders;
* an existing non-empty ``--output-dir`` is refused unless ``--overwrite``,
  and even then only when it holds nothing but a run's own files;
* the folder's parent is checked writable before the simulation;
* files are written into a temporary sibling folder and renamed into place, so
  a failed or interrupted run leaves nothing half-written. Folders get the
  normal permissions (``0777`` less the umask).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable, Optional

import yaml

from vidur_specdec import console
from vidur_specdec.config import ConfigError, read_yaml
from vidur_specdec.config.files import naming
from vidur_specdec.engine.resolve import load


FLOAT_FORMAT = "%.6f"
RUN_FILES = ("requests.csv", "steps.csv", "summary.json", "config.yaml")
ANNOUNCE_REQUESTS = 100_000  # a run of more requests (or trace lines) prints its memory estimate first
BYTES_PER_REQUEST = 4_500  # peak memory a request, measured: 200,000 requests peak at 0.98 GB (docs/config.md)


def _jsonable(x):
    if isinstance(x, dict):
        return {k: _jsonable(v) for k, v in x.items()}
    if isinstance(x, list):
        return [_jsonable(v) for v in x]
    if isinstance(x, float) and math.isnan(x):
        return None
    return x


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


class RunFolder:
    """An output folder: checked before any work, filled atomically at the end (see the module doc).

    ``path`` None means a fresh ``<default_parent>/<timestamp>`` folder, created by :meth:`reserve`.
    ``own_files`` are the names a run writes: with ``overwrite`` an existing folder may hold only those.
    """

    def __init__(self, path: Optional[str], overwrite: bool = False, own_files=RUN_FILES,
                 default_parent: str = "runs", option: str = "--output-dir"):
        self.requested = Path(path) if path else None
        self.overwrite = overwrite
        self.own_files = tuple(own_files)
        self.default_parent = Path(default_parent)
        self.option = option
        self.path: Optional[Path] = self.requested
        self._reserved = False

    # -- before the simulation
    def check(self) -> None:
        """Refuse a folder that would mix or lose results, or that cannot be written; writes nothing."""
        if self.requested is None:
            self._check_writable(self.default_parent)
            return
        p, opt = self.requested, self.option
        # lazy: start-up of `python -m vidur_specdec.main --help` (would load vidur_specdec.outfolder)
        from vidur_specdec import outfolder

        outfolder.check(p, "run", self.overwrite, opt, resumes=False)
        self._check_writable(p.parent)  # the results are renamed into place from a sibling folder

    def _check_writable(self, folder: Path) -> None:
        """The nearest existing folder at or above ``folder`` must be a folder we can create files in."""
        # lazy: start-up of `python -m vidur_specdec.main --help` (would load vidur_specdec.outfolder)
        from vidur_specdec.outfolder import check_writable

        check_writable(folder, self.option)

    def reserve(self) -> Path:
        """Create the default folder now (atomically unique); an explicit folder is only checked."""
        self.check()
        if self.requested is None:
            self.path = self._fresh()
            self._reserved = True
        return self.path

    def _fresh(self) -> Path:
        parent = self.default_parent
        try:
            parent.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise ConfigError(f"{self.option}: cannot create {parent}: {e.strerror or e}") from None
        stamp = time.strftime("%Y%m%d-%H%M%S")
        for i in range(10_000):
            p = parent / (stamp if i == 0 else f"{stamp}-{i}")
            try:
                os.mkdir(p)  # atomic: exactly one of two simultaneous runs gets each name
                return p
            except FileExistsError:
                continue
            except OSError as e:
                raise ConfigError(f"{self.option}: cannot create {p}: {e.strerror or e}") from None
        raise ConfigError(f"{self.option}: no free folder name under {parent}")  # pragma: no cover

    # -- after the simulation
    def write(self, fill: Callable[[Path], None]) -> Path:
        """Call ``fill(tmp)`` to write the files into a temporary sibling folder, then rename it into place."""
        out = self.path
        if out is None:
            out = self.reserve()
        try:
            out.parent.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise ConfigError(f"{self.option}: cannot create {out.parent}: {e.strerror or e}") from None
        tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
        old = None
        try:
            os.chmod(tmp, 0o777 & ~_umask())  # mkdtemp makes 0700; a run folder gets normal permissions
            with naming(out, tmp):  # a full disk names the file it stopped (out/requests.csv), not the temp folder
                fill(tmp)
            if out.is_dir() and any(out.iterdir()):
                if not (self.overwrite or self._reserved):
                    raise ConfigError(f"{self.option}: {out} was filled by someone else during the run; "
                                      f"the results were not written")
                self._check_again(out)
                old = Path(tempfile.mkdtemp(prefix=f".{out.name}.old.", dir=out.parent))
                os.replace(out, old / "run")
                _keep_foreign(old / "run", tmp, self.option)  # appeared since the check: kept, moved along
            os.replace(tmp, out)  # onto a missing or empty folder: atomic
        except BaseException:
            if old is not None and (old / "run").exists() and not out.exists():
                os.replace(old / "run", out)
            raise
        finally:
            if tmp.exists():
                shutil.rmtree(tmp, ignore_errors=True)
            if old is not None:
                _keep_foreign(old / "run", out, self.option)
                shutil.rmtree(old, ignore_errors=True)
        self._reserved = False
        return out

    def _check_again(self, out: Path) -> None:
        """At the swap: a file a user put in ``out`` during the run stops it (the results are not written)."""
        # lazy: start-up of `python -m vidur_specdec.main --help` (would load vidur_specdec.outfolder)
        from vidur_specdec.outfolder import foreign

        users = foreign(out, self.option)
        if users:
            raise ConfigError(f"{self.option}: {out} gained files during the run that are not this tool's output "
                              f"({', '.join(users[:3])}); the results were not written, and your files are kept")

    def discard(self) -> None:
        """Remove the reserved default folder if the run ended without writing into it."""
        if self._reserved and self.path is not None:
            try:
                self.path.rmdir()
            except OSError:
                pass
            self._reserved = False


def _keep_foreign(old_run: Path, out: Path, option: str) -> None:
    """Move any file that is not this tool's output from the replaced folder into ``out`` (never removed)."""
    if not (old_run.is_dir() and out.is_dir()):
        return
    # lazy: start-up of `python -m vidur_specdec.main --help` (would load vidur_specdec.outfolder)
    from vidur_specdec.outfolder import foreign

    for name in foreign(old_run, option):
        if not (out / name).exists():
            os.replace(old_run / name, out / name)


def _fill(result) -> Callable[[Path], None]:
    def fill(tmp: Path) -> None:  # each write names its file if it fails (a full disk names none itself)
        with naming(tmp / "requests.csv"):
            result.requests.to_csv(tmp / "requests.csv", index=False, float_format=FLOAT_FORMAT)
        with naming(tmp / "steps.csv"):
            result.steps.to_csv(tmp / "steps.csv", index=False, float_format=FLOAT_FORMAT)
        with naming(tmp / "summary.json"):
            (tmp / "summary.json").write_text(json.dumps(_jsonable(result.summary), indent=2, sort_keys=True) + "\n")
        with naming(tmp / "config.yaml"):
            (tmp / "config.yaml").write_text(yaml.safe_dump(result.config.to_input(), sort_keys=False))
    return fill


# --------------------------------------------------------------------------- the run subcommand


def kv_cache_lines(prepared) -> list:
    """vLLM's KV cache line of each replica (each pool's under disaggregation): its pool's tokens and its
    maximum concurrency at ``max_model_len`` tokens per request (``summary.json`` ``memory``)."""
    def line(mem) -> str:
        note = mem.pool_note()
        return mem.vllm_line() + (f" ({note})" if note else "")

    pools = getattr(prepared, "pools", None)
    if pools:
        return [f"{pool.role} instance: {line(pool.prepared.memory)}" for pool in pools]
    return [line(prepared.memory)]


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Options of ``python -m vidur_specdec run``."""
    console.add_config(p)
    console.add_set(p)
    console.add_output_dir(p, help="output folder (default: a fresh runs/<timestamp>); must be new or empty")
    console.add_overwrite(p, help="replace the run already in --output-dir")


def is_sweep_file(path: str) -> bool:
    from vidur_specdec.sweep.definition import is_sweep

    return is_sweep(read_yaml(path))


def run(args: argparse.Namespace) -> int:
    """Simulate one run config; every check (config, profiles, memory, output folder) comes first."""
    if is_sweep_file(args.config):
        raise ConfigError(f"--config: {args.config} is a sweep file (a top-level sweep:, grid: or rows: key); "
                          f"run it with `{console.PROG} sweep --config {args.config}`")
    return run_one(args)


def run_one(args: argparse.Namespace) -> int:
    """Simulate the run config of ``args`` (``config``, ``overrides``, ``output_dir``, ``overwrite``); exit status."""
    cfg = load(args.config, args.overrides)
    RunFolder(args.output_dir, overwrite=getattr(args, "overwrite", False)).check()  # before any work
    # lazy: start-up cost of scipy, sklearn, vidur
    from vidur_specdec.engine.simulation import prepare, run_prepared

    prepared = prepare(cfg)
    for w in prepared.warnings:  # values that run but are probably wrong (also in summary.json)
        print(f"warning: {w}", file=sys.stderr)
    # lazy: start-up of `python -m vidur_specdec.main --help`
    from vidur_specdec.speculation.proposers.pairing import describe_proposer

    pairing = describe_proposer(cfg)["proposer_pairing_warning"]  # a head trained for another target
    if pairing:
        print(pairing, file=sys.stderr)
    n = len(prepared.specs)
    if n > ANNOUNCE_REQUESTS:  # a long run says so, with its memory estimate, before it starts
        print(f"run: {n:,} requests: about {n * BYTES_PER_REQUEST / 1e9:.1f} GB of memory "
              f"({BYTES_PER_REQUEST / 1e3:.1f} KB a request, docs/config.md); Ctrl-C stops it, writing nothing",
              file=sys.stderr, flush=True)
    folder = RunFolder(args.output_dir, overwrite=getattr(args, "overwrite", False))
    folder.reserve()
    try:
        t0 = time.perf_counter()
        result = run_prepared(prepared)
        wall = time.perf_counter() - t0
        out_dir = folder.write(_fill(result))
    except KeyboardInterrupt:
        folder.discard()
        print("\ninterrupted: nothing was written", file=sys.stderr)
        return console.EXIT_INTERRUPTED
    finally:
        folder.discard()
    s = result.summary
    print(f"{s['num_requests']} requests, {s['method']} k={s['num_speculative_tokens']}, "
          f"{s['verify_attention']}: TTFT p50 {s['ttft_ms']['p50']:.1f} ms, TPOT p50 {s['tpot_ms']['p50']:.2f} ms, "
          f"E2E p50 {s['e2e_ms']['p50']:.0f} ms, {s['throughput_tok_s']:.0f} tok/s "
          f"({s['mean_acceptance_length']:.2f} mean acceptance length: tokens per decode step; "
          f"simulated in {wall:.1f} s)")
    from vidur_specdec import provenance

    print(provenance.line(s, result.config.speculative))  # where the numbers come from
    for line in kv_cache_lines(prepared):
        print(line)
    print(f"wrote {out_dir}/requests.csv, steps.csv, summary.json")
    # lazy: start-up of `python -m vidur_specdec.main --help` (would load vidur_specdec.engine.metrics)
    from vidur_specdec.engine.metrics import flip_warning

    flips = flip_warning(s)
    if flips:  # k flipping at a schedule boundary (vLLM issue #49548)
        print(flips, file=sys.stderr)
    return 0
