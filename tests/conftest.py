"""Shared fixtures: the measured Vidur profiles beside the checkout and small run configs."""

import contextlib
import os
from pathlib import Path

import pytest

# Hypothesis profiles of the randomised tests (``HYPOTHESIS_PROFILE=nightly`` draws more): ci draws few
# examples, derandomised, without shrinking (a failure prints its input as drawn)
try:
    from hypothesis import HealthCheck, Phase, settings

    settings.register_profile("ci", max_examples=60, deadline=None, derandomize=True, print_blob=True,
                              database=None, phases=[Phase.explicit, Phase.generate],
                              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                                     HealthCheck.function_scoped_fixture])
    settings.register_profile("nightly", max_examples=600, deadline=None, print_blob=True,
                              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                                     HealthCheck.function_scoped_fixture])
    settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))
except ImportError:  # pragma: no cover (hypothesis is a test dependency)
    pass

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared"
MEASURED = SHARED / "vidur-profiles"


def pytest_configure(config):
    """Once per session, before the workers start: the package's bytecode written beside its sources. An editable
    install leaves none, and where ``PYTHONDONTWRITEBYTECODE`` is set no process writes it, so every worker and
    every command a test starts would compile the whole package again (about half a second each); a stale file is
    recompiled in memory by Python, never used."""
    if hasattr(config, "workerinput"):  # a pytest-xdist worker: the controller has done it
        return
    import compileall

    compileall.compile_dir(str(REPO / "vidur_specdec"), quiet=2)


@pytest.fixture(scope="session", autouse=True)
def _private_predictor_cache(request, tmp_path_factory):
    """The tests' fitted predictors and built profiles: out of the user's home (subprocesses inherit it),
    shared by every test of a session and kept between sessions in pytest's cache folder
    (``.pytest_cache``). Entries are keyed by the bytes of their inputs and of the code that fits or
    builds them, so a kept entry is never stale. ``SPECDEC_TEST_COLD_CACHE=1`` (or ``-p no:cacheprovider``)
    starts from an empty one."""
    cache = getattr(request.config, "cache", None)
    if cache is None or os.environ.get("SPECDEC_TEST_COLD_CACHE") == "1":
        path = tmp_path_factory.mktemp("xdg-cache")
    else:
        path = cache.mkdir("xdg-cache")
    os.environ["XDG_CACHE_HOME"] = str(path)


@pytest.fixture(scope="session")
def measured_profiles() -> str:
    if not (MEASURED / "a100/meta-llama/Llama-2-7b-hf/mlp.csv").is_file():
        pytest.skip("../shared/vidur-profiles is not beside this checkout")
    return str(MEASURED)


@contextlib.contextmanager
def each_batch(check):
    """While in use, ``check(scheduler, batch)`` sees every batch the speculative replica scheduler forms
    (a spy on its ``_get_next_batch``, Vidur's hook; restored on exit). Runs go to the Vidur-backed reference
    meanwhile, whose scheduler state the checks read; the engine core is held to the reference's tables
    (tests/test_engine_core.py), so what holds there holds on the core."""
    from vidur_specdec.engine import simulation
    from vidur_specdec.engine.reference.run import run_reference
    from vidur_specdec.engine.reference.scheduler import SpecSarathiReplicaScheduler

    orig = SpecSarathiReplicaScheduler._get_next_batch
    orig_core = simulation.run_core

    def spy(sched, time):
        batch = orig(sched, time)
        if batch is not None:
            check(sched, batch)
        return batch

    SpecSarathiReplicaScheduler._get_next_batch = spy
    simulation.run_core = run_reference
    try:
        yield
    finally:
        SpecSarathiReplicaScheduler._get_next_batch = orig
        simulation.run_core = orig_core


def unwritable_folder(tmp_path, name: str):
    """A path a command cannot create: under a read-only folder, or (for root, who may write anywhere) under /sys."""
    if os.geteuid() == 0:
        return Path("/sys") / name
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o500)
    return locked / "out"


def one_error_line(capsys, rc, *needles, code=2) -> str:
    """The command ended with status ``code`` and one ``error:`` line on stderr holding every needle, no traceback."""
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert rc == code and "Traceback" not in err, err
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    for n in needles:
        assert n in lines[0], lines[0]
    return lines[0]


def small(num_requests=60, qps=4.0, method="ngram", k=4, alpha=0.7, **extra):
    """A small run config (shipped profiles) as a dict; ``extra`` merges top-level sections."""
    cfg = {
        "seed": 1,
        "workload": {
            "num_requests": num_requests,
            "qps": qps,
            "prompt_tokens": {"dist": "uniform", "min": 32, "max": 768},
            "output_tokens": {"dist": "uniform", "min": 8, "max": 256},
        },
        "speculative": {"method": method, "num_speculative_tokens": k, "acceptance_rate": alpha},
    }
    for section, values in extra.items():
        if isinstance(values, dict):
            cfg.setdefault(section, {}).update(values)
        else:
            cfg[section] = values
    return cfg


# ``python -m MODULE`` -> the function its ``__main__`` calls with the argument list
_MAINS = {"vidur_specdec": "vidur_specdec.cli", "vidur_specdec.main": "vidur_specdec.main"}


def run_command(*args, module: str = "vidur_specdec.main", cwd=None, env=None, **_ignored):
    """``python -m MODULE ARGS`` run in this process: the module's ``main(argv)`` with stdout and stderr
    captured and the working folder set to ``cwd`` (default: the checkout), returned as the
    ``subprocess.CompletedProcess`` that ``subprocess.run(..., capture_output=True, text=True)`` gives.

    It skips the interpreter's start-up and imports (about 2.5 s of CPU a command), which the suite would
    otherwise pay a hundred times. A test that needs a fresh interpreter (a signal, start-up imports,
    several processes at once, the console entry point itself) uses ``subprocess`` directly. ``env``: only
    the variables that differ from this process's are applied, for the call's duration.
    """
    import importlib
    import io
    import subprocess
    import sys

    main = importlib.import_module(_MAINS[module]).main
    argv = [str(a) for a in args]
    out, err = io.StringIO(), io.StringIO()
    changed = {k: v for k, v in (env or {}).items() if os.environ.get(k) != v}
    saved = {k: os.environ.get(k) for k in changed}
    here = os.getcwd()
    old_out, old_err = sys.stdout, sys.stderr
    try:
        os.environ.update(changed)
        os.chdir(cwd or REPO)
        sys.stdout, sys.stderr = out, err
        try:
            rc = main(argv)
        except SystemExit as e:  # argparse's usage errors and --help
            rc = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    finally:
        sys.stdout, sys.stderr = old_out, old_err
        os.chdir(here)
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    return subprocess.CompletedProcess([sys.executable, "-m", module, *argv], rc, out.getvalue(), err.getvalue())
