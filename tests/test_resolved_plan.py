"""One resolved plan: a run's input is never changed, its prepared plan is frozen and content-hashed, and the
engines, tune and validate run from the plan alone."""

from __future__ import annotations

import copy
import dataclasses

import pytest

from conftest import REPO
from vidur_specdec.engine.resolve import load
from vidur_specdec.engine.simulation import Prepared, prepare, run_prepared

DEFAULT = str(REPO / "configs/default.yaml")
SMALL = ["workload.num_requests=12"]


def test_loading_never_changes_the_callers_input():
    data = {"workload": {"num_requests": 8}, "scheduler": {"max_num_batched_tokens": None}}
    before = copy.deepcopy(data)
    cfg = load(data)
    assert data == before  # a mapping is read, not written
    first = cfg.to_dict()
    again = load(cfg, ["speculative.num_speculative_tokens=2"])  # a RunConfig given back is read, not written
    assert cfg.to_dict() == first and again.speculative.num_speculative_tokens == 2
    assert cfg.scheduler.max_num_batched_tokens is not None  # resolution filled vLLM's default into its own copy


def test_a_prepared_run_is_frozen_and_its_digest_names_what_decides_the_result():
    p = prepare(load(DEFAULT, SMALL))
    assert isinstance(p, Prepared) and isinstance(p.specs, tuple) and isinstance(p.warnings, tuple)
    with pytest.raises(dataclasses.FrozenInstanceError):
        p.specs = ()
    same = prepare(load(DEFAULT, SMALL))
    assert p.digest == same.digest and len(p.digest) == 16
    for change in (["seed=1"], ["workload.num_requests=13"], ["speculative.num_speculative_tokens=3"],
                   ["scheduler.max_num_seqs=64"], ["device=h100"]):
        assert prepare(load(DEFAULT, SMALL + change)).digest != p.digest, change


def test_the_engine_runs_from_the_plan_alone_and_says_which_plan():
    p = prepare(load(DEFAULT, SMALL))
    a, b = run_prepared(p), run_prepared(p)  # nothing in the plan is used up by a run
    assert a.requests.to_csv() == b.requests.to_csv() and a.steps.to_csv() == b.steps.to_csv()
    assert a.summary["plan_digest"] == p.digest
    top = prepare(load(str(REPO / "configs/disagg-llama70b-eagle3-1p1d.yaml"), ["workload.num_requests=6"]))
    assert run_prepared(top).summary["plan_digest"] == top.digest != top.pool("decode").prepared.digest
