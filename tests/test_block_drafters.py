"""Block drafters (dflash, dspark): draft time flat in k, the block bound, memory, lookahead, across-k refused."""

import pytest

from vidur_specdec.config import ConfigError
from vidur_specdec.pricing.plan import StepComposition
from vidur_specdec.engine.resolve import load
from vidur_specdec.engine.simulation import prepare
from vidur_specdec.speculation import proposers

CONFIG = "configs/llama3.1-8b-h100.yaml"
DFLASH = "z-lab/LLaMA3.1-8B-Instruct-DFlash-UltraChat"
EAGLE3 = "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B"
FLAT_TOL = 0.05  # docs/model.md: DFlash's draft time at batch 1 over k = 1..8 stays within 5 % of k = 1
MARKOV_TOL = 0.15  # DSpark adds one Markov step per guess: within 15 % at batch 1 (its Markov part aside, 5 %)

DSPARK_L31 = """name: dspark-llama3.1-8b (hypothetical)
method: dspark
hidden_size: 4096
num_heads: 32
num_kv_heads: 8
ffn_size: 14336
num_layers: 5
vocab_size: 128256
aux_layers: 5
block_size: 8
markov_rank: 256
"""


@pytest.fixture(scope="module")
def dspark_head(tmp_path_factory):
    p = tmp_path_factory.mktemp("heads") / "dspark-l31.yaml"
    p.write_text(DSPARK_L31)
    return str(p)


def _cfg(method, model, k, *extra):
    from conftest import REPO

    return load(str(REPO / CONFIG), [f"speculative.method={method}", f"speculative.model={model}",
                                     f"speculative.num_speculative_tokens={k}", "workload.num_requests=10", *extra])


def _step(b, k, ctx=1000):
    return StepComposition(b * (k + 1), [k + 1] * b, [ctx] * b, [], [k + 1] * b)


def _draft(method, model, k, b=1):
    p = prepare(_cfg(method, model, k)).pricer.proposer
    return p, p.step_time_ms(_step(b, k))


def test_dflash_draft_time_is_flat_in_k_where_eagle3_grows_linearly():
    t = {k: _draft("dflash", DFLASH, k)[1] for k in range(1, 9)}
    for k in range(2, 9):  # one drafter pass for all k guesses: measured kernels wobble, they do not grow
        assert (1 - FLAT_TOL) * t[1] <= t[k] <= (1 + FLAT_TOL) * t[1], (k, t)
    e = {k: _draft("eagle3", EAGLE3, k)[1] for k in (1, 8)}
    assert e[8] > 3 * e[1]  # a sequential drafter's time grows with k: the tolerance above would catch it


def test_dspark_backbone_flat_markov_head_one_step_per_guess(dspark_head):
    one, t1 = _draft("dspark", dspark_head, 1)
    eight, t8 = _draft("dspark", dspark_head, 8)
    s1, s8 = one.step_parts(_step(1, 1))["sequential"], eight.step_parts(_step(1, 8))["sequential"]
    assert s1 > 0 and s8 == pytest.approx(8 * s1, rel=1e-6)
    assert t8 - s8 <= (1 + FLAT_TOL) * (t1 - s1)
    assert t8 <= (1 + MARKOV_TOL) * t1


def test_block_bound_refused_in_one_line(dspark_head):
    with pytest.raises(ConfigError) as e:
        prepare(_cfg("dflash", DFLASH, 10))
    assert str(e.value).startswith("speculative.num_speculative_tokens:") and "\n" not in str(e.value)
    prepare(_cfg("dspark", dspark_head, 8))  # DSpark's anchor-first block holds block_size guesses
    with pytest.raises(ConfigError):
        prepare(_cfg("dspark", dspark_head, 9))


def test_memory_and_lookahead_slots(dspark_head):
    cfg = _cfg("dflash", DFLASH, 3)
    w, kv = proposers.build(cfg, None).memory_bytes(1)
    # config.json shape: 5 layers of (QKV 4096x(32+16)x128, O 4096x4096, gated MLP 3x4096x14336) + fc 5x4096x4096
    layer = 4096 * 128 * 48 + 4096 * 4096 + 3 * 4096 * 14336
    assert w == 2 * (5 * layer + 5 * 4096 * 4096)
    assert kv == 2 * 2 * 8 * 128 * 5  # K and V of every draft layer per context token, bf16
    assert proposers.lookahead_tokens(cfg) == 4  # vLLM: k + 1 for DFlash (bonus + k masks)
    assert proposers.lookahead_tokens(_cfg("dspark", dspark_head, 3)) == 3  # anchor-first DSpark: k
    w2, _ = proposers.build(_cfg("dspark", dspark_head, 3), None).memory_bytes(1)
    assert w2 - w == 2 * 256 * 2 * 128256  # the Markov head's w1 and w2


def test_no_guesses_no_time_and_sync_step_pays_the_context():
    p, _ = _draft("dflash", DFLASH, 3)
    assert p.step_time_ms(StepComposition(2, [1, 1], [500, 500], [], [4, 4])) == 0.0
    sync = StepComposition(2, [1, 1], [500, 500], [], [4, 4], [4, 4], True)
    parts = p.step_parts(sync)
    assert parts["context_kv"] > 0 and parts["layers"] == 0.0  # k = 0 scheduled: K/V stored, no query pass


def test_across_k_refused_for_block_drafters():
    with pytest.raises(ConfigError) as e:
        _cfg("dflash", DFLASH, 3, "speculative.acceptance_rate=null", "speculative.mean_acceptance_length=3",
             "speculative.acceptance_at_k=3")
    assert str(e.value).startswith("speculative.acceptance_at_k:") and "dflash" in str(e.value)


def test_docs_table_matches_the_model():
    """docs/model.md's block-draft block: its draft-time table is what scripts/block_draft_cost.py prices now
    (every cell), and its end-to-end run without speculation is what a re-run gives."""
    import sys
    from conftest import REPO

    sys.path.insert(0, str(REPO))
    from scripts import block_draft_cost as mod
    from scripts.docblock import block

    stale = "docs/model.md's block-draft table is stale: run scripts/block_draft_cost.py --write"
    lines = block(mod.DOC, mod.NAME).splitlines()
    fresh = mod.price_lines()
    assert lines[2:2 + len(fresh)] == fresh, stale
    (method, k, tpot), = mod.e2e(only={0})
    assert mod.e2e_line(method, k, tpot, tpot) in lines, stale
