"""docs/profiles.md's Blackwell-over-Hopper table is what scripts/blackwell_ratio.py gives now, and a decode step
costs less on every Blackwell GPU than on H200 for the dense, MLA and sparse-attention models."""

import importlib.util

from conftest import REPO


def test_blackwell_ratio_block_is_current_and_blackwell_steps_are_cheaper():
    spec = importlib.util.spec_from_file_location("blackwell_ratio", REPO / "scripts" / "blackwell_ratio.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    doc = (REPO / "docs" / "profiles.md").read_text()
    block = doc[doc.index(mod.BEGIN):doc.index(mod.END) + len(mod.END)]
    assert block == mod.table(), "docs/profiles.md's Blackwell table is stale: run python scripts/blackwell_ratio.py --write"
    for _, model in mod.MODELS:
        for b in mod.BATCHES:
            base = mod.step_parts(model, mod.BASE, b)[1]
            for gpu in mod.GPUS:
                assert mod.step_parts(model, gpu, b)[1] < base, (model, gpu, b)
            if b == 16:  # FlashInfer's all-reduce of 16 tokens: cheaper on B200 than on H200
                assert mod.step_parts(model, "b200", b)[0]["all-reduce"] < mod.step_parts(model, "h200", b)[0]["all-reduce"]
