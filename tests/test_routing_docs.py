"""The routing model's held-out figures in docs/profiles.md are what scripts/routing_error.py gives now."""

import importlib.util
from functools import lru_cache

from conftest import REPO


@lru_cache(maxsize=1)
def _script():
    spec = importlib.util.spec_from_file_location("routing_error", REPO / "scripts" / "routing_error.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_routing_error_block_is_current():
    mod = _script()
    doc = (REPO / "docs" / "profiles.md").read_text()
    block = doc[doc.index(mod.BEGIN):doc.index(mod.END) + len(mod.END)]
    assert block == mod.table(), "docs/profiles.md's routing table is stale: run python scripts/routing_error.py --write"


def test_random_gating_error_falls_and_decode_steps_get_cheaper():
    mod = _script()
    for label, before, now in mod.random_gating_errors():
        assert now < before, label
    for label, batch, woken, before, now in mod.decode_steps():
        assert now <= before + 1e-9, (label, batch)
        if batch == 16 and label.startswith("Qwen3"):
            assert now < 0.8 * before  # 82 of 128 experts woken, not the balanced row's 128


def test_the_collector_replica_keeps_its_row_sum_and_its_busiest_rank():
    import numpy as np

    mod = _script()
    rng = np.random.default_rng(1)
    for tokens in (1, 8, 64, 4096):
        whole = mod.collector_loads(rng, tokens, 256, 8, 1, 1.2)
        assert whole.sum() == tokens * 8 and (whole >= 0).all()
        rank = mod.collector_loads(rng, tokens, 256, 8, 8, 1.2)
        assert len(rank) == 32 and rank.sum() >= tokens  # the busiest of 8 ranks holds at least the mean
