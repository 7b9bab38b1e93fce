"""The engine core against the Vidur-backed reference: the same tables, byte for byte, on every example config.

The core (``simulator: core``, the default) and the reference (``simulator: vidur``:
the same schedule on Vidur's event loop, entities and Sarathi scheduler, subclassed)
run the same prepared run; ``requests.csv`` and ``steps.csv`` must be identical at
full precision. ``method: none`` on the core must also give Vidur's own Sarathi's
request times (:func:`vidur_specdec.run_vidur_sarathi`). Random configs are held
to the same in ``tests/test_properties.py``.
"""

from __future__ import annotations

import sys

import numpy as np
import pytest

from conftest import REPO
from vidur_specdec.engine import simulation
from vidur_specdec.engine.core.run import run_core
from vidur_specdec.engine.reference.run import run_reference
from vidur_specdec.engine.resolve import load
from vidur_specdec.engine.simulation import prepare, run_prepared, run_vidur_sarathi

EXAMPLES = sorted(p.name for p in (REPO / "configs").glob("*.yaml"))
SMALL = ["workload.num_requests=16"]


def tables(res) -> tuple:
    """The run's two tables as the CSV text a run writes, at full precision."""
    return res.requests.to_csv(index=False), res.steps.to_csv(index=False)


def both(cfg):
    """(core result, reference result) of one prepared run."""
    p = prepare(cfg)
    mod = sys.modules[simulation.__name__]
    return run_core(p, mod), run_reference(p, mod)


@pytest.mark.parametrize("name", EXAMPLES)
def test_every_example_config_gives_the_references_tables(name):
    core, ref = both(load(str(REPO / "configs" / name), SMALL))
    assert tables(core) == tables(ref)
    assert core.summary == ref.summary


@pytest.mark.parametrize("overrides", [
    ["parallel.num_replicas=3", "parallel.global_scheduler=round_robin", "workload.arrival=static"],
    ["parallel.num_replicas=2", "parallel.global_scheduler=lor", "workload.qps=40"],
    ["workload.arrival=closed", "workload.concurrency=4", "parallel.num_replicas=2"],
    ["scheduler.num_blocks=150", "workload.qps=40", "speculative.num_speculative_tokens=6"],  # preemption
    ["speculative.method=ngram", "speculative.proposal_rate=0.5", "engine.model_runner=v1"],
    ["speculative.method=ngram", "speculative.proposal_rate=0.5", "engine.model_runner=v2"],
    ["speculative.method=draft_model", "speculative.num_speculative_tokens_per_batch_size={1-2: 4, 3-4096: 0}",
     "workload.qps=20"],
])
def test_replicas_closed_loop_preemption_proposals_and_schedules_match_the_reference(overrides):
    core, ref = both(load(str(REPO / "configs/default.yaml"), ["workload.num_requests=24"] + overrides))
    assert tables(core) == tables(ref)
    if "scheduler.num_blocks=150" in overrides:
        assert core.summary["restarts"] > 0  # the case exercises preemption by recompute


def test_plain_decoding_on_the_core_is_vidurs_own_sarathi():
    over = ["workload.num_requests=24", "speculative.method=none", "parallel.num_replicas=2",
            "parallel.global_scheduler=lor"]
    ours = run_prepared(prepare(load(str(REPO / "configs/default.yaml"), over)))
    vidur = run_vidur_sarathi(str(REPO / "configs/default.yaml"), over)
    for col in ("arrived_at_s", "first_token_s", "completed_at_s"):
        np.testing.assert_array_equal(ours.requests[col].to_numpy(), vidur[col].to_numpy())


def test_the_core_is_the_default_and_imports_no_vidur():
    import subprocess

    code = ("import sys; from vidur_specdec import simulate; r = simulate('configs/default.yaml', "
            "['workload.num_requests=4']); print(r.config.simulator, any(m == 'vidur' or m.startswith('vidur.') "
            "for m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["core", "False"]


def test_simulator_key_is_checked():
    from vidur_specdec.config import ConfigError

    with pytest.raises(ConfigError, match="simulator"):
        load(str(REPO / "configs/default.yaml"), ["simulator=fast"])
