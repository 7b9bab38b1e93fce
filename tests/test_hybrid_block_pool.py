"""A hybrid model's linear-attention state in the KV block pool, as vLLM's hybrid KV cache manager holds it.

Qwen3.5's gated-delta-net layers keep a fixed state per running request; vLLM raises the attention block
size until an attention page holds a state page and takes each running request's state pages from the
same pool as the KV (vllm/platforms/interface.py ``_align_hybrid_block_size``, vllm/v1/core/kv_cache_planning.py,
``MambaManager``). These tests hold the simulator to vLLM's arithmetic written out here from those files, to
the scheduler rule (a new request needs its prompt's blocks and its state pages; both leave with it), and to
pipeline stages that each hold their own layers.
"""

from __future__ import annotations

import json
import math

import pytest
import yaml

from conftest import REPO, run_command
from vidur_specdec.architectures.models import resolve_model
from vidur_specdec.costs import memory
from vidur_specdec.engine.core.request import CoreRequest
from vidur_specdec.engine.core.sarathi import SarathiRank
from vidur_specdec.engine.resolve import load
from vidur_specdec.engine.simulation import SchedulerSettings, prepare, run_prepared, simulate
from vidur_specdec.pricing.plan import decode_plan

Q397_CONFIG = str(REPO / "configs/qwen3.5-397b-a17b-mtp-h200.yaml")
Q397 = "Qwen/Qwen3.5-397B-A17B"


def test_qwen35_397b_on_eight_h200_runs_under_poisson_arrivals_at_vllms_defaults():
    # the example config (bf16, TP 8, MTP k = 3, vLLM's scheduler defaults on H200) with open-loop arrivals,
    # fast enough that more requests run at once than the closed loop's 16
    res = simulate(Q397_CONFIG, ["workload.arrival=poisson", "workload.qps=40", "workload.num_requests=48"])
    assert len(res.requests) == 48 and res.requests["e2e_ms"].notna().all()
    mem = res.summary["memory"]
    assert mem["block_size"] == 544 and mem["state_pages"] == 12  # 3 state groups x (1 + k) pages
    assert res.steps["num_reqs"].max() > 16
    assert res.summary["restarts"] == 0  # concurrency is what the pool allows: no preemption at this load


def _vllm_concurrency(summary_memory: dict) -> tuple:
    """vLLM 0.33's figures for Qwen3.5-397B-A17B + MTP (k = 3) at TP 8, bf16, written out from its sources."""
    tp, k = 8, 3
    kv1 = 2 * max(1, 2 // tp) * 256 * 2  # FullAttentionSpec page per token: K and V, 2 KV heads of 256 (1 per GPU)
    conv = (2 * 16 * 128 + 64 * 128) // tp * (4 - 1 + k) * 2  # gated_delta_net_state_shape: conv state, bf16
    ssm = 64 // tp * 128 * 128 * 4  # recurrent state, mamba_ssm_dtype float32
    mamba_page = conv + ssm
    block = 16 * math.ceil(mamba_page / (16 * kv1))  # _align_hybrid_block_size (kernel block 16)
    page = block * kv1
    # layers: 15 full attention + the MTP layer (same spec) = 16; 45 gated delta net -> group size 16, 3 state groups
    group_size, state_groups = 16, 3
    free = summary_memory["usable_bytes"] - summary_memory["target_weight_bytes"] - summary_memory["draft_weight_bytes"]
    num_blocks = free // (group_size * page)  # get_kv_cache_config_from_groups
    L = 262144  # max_model_len (max_position_embeddings)
    per_request = math.ceil(L / block) + state_groups * (1 + k)  # get_max_concurrency_for_kv_cache_config
    conc = num_blocks / per_request
    return block, num_blocks, conc, f"GPU KV cache size: {int(conc * L):,} tokens, Maximum concurrency for " \
                                    f"{L:,} tokens per request: {conc:.2f}x"


def test_printed_maximum_concurrency_is_vllms_formula(tmp_path):
    out = tmp_path / "run"
    r = run_command("run", "--config", Q397_CONFIG, "--set", "workload.arrival=poisson", "--set",
                    "workload.num_requests=8", "--output-dir", out, module="vidur_specdec")
    assert r.returncode == 0, r.stderr
    mem = json.loads((out / "summary.json").read_text())["memory"]
    block, num_blocks, conc, line = _vllm_concurrency(mem)
    assert (mem["block_size"], mem["num_blocks"]) == (block, num_blocks) == (544, 4221)
    assert line in r.stdout and mem["kv_cache_max_concurrency"] == round(conc, 4)
    assert mem["kv_cache_size_tokens"] == int(conc * 262144)


def test_an_attention_only_model_prints_its_concurrency_too(tmp_path):
    r = run_command("run", "--config", REPO / "configs/default.yaml", "--set", "workload.num_requests=4",
                    "--output-dir", tmp_path / "run", module="vidur_specdec")
    mem = json.loads((tmp_path / "run" / "summary.json").read_text())["memory"]
    conc = mem["num_blocks"] / math.ceil(4096 / 16)  # Llama-2-7B: one group, 256 blocks at max_model_len
    assert f"Maximum concurrency for 4,096 tokens per request: {conc:.2f}x" in r.stdout
    assert "state_pages" not in mem and mem["block_size"] == 16


def _rank(num_blocks: int, state: int, watermark: float = 0.0) -> SarathiRank:
    return SarathiRank(SchedulerSettings(chunk_size=4096, batch_size_cap=8, state_blocks=state), num_blocks, 16,
                       watermark)


def test_a_new_request_needs_its_prompt_blocks_and_its_state_pages_above_the_watermark():
    rank = _rank(20, 3, watermark=0.1)  # 2 blocks of watermark
    a, b = CoreRequest(0, 0, 0.0, 100, 4), CoreRequest(1, 1, 0.0, 130, 4)  # 7 and 9 prompt blocks
    rank.add(a)
    rank.add(b)
    step = rank.next_step()
    assert [r.id for r in step.requests] == [0]  # b's 9 blocks + 3 pages would leave 20 - 10 - 12 < 2 free
    assert rank.allocated == 7 + 3 and rank.alloc == {0: 7}  # state pages counted, not in the KV map
    assert _rank(20, 0, watermark=0.1).can_allocate(b)  # without state b would fit
    rank.free(0)
    assert rank.allocated == 0 and rank.can_allocate(b)  # the pages left with the request


def test_preemption_by_recompute_frees_the_victims_state_pages():
    rank = _rank(8, 3)  # two requests of one block and three pages each fill the pool
    a, b = CoreRequest(0, 0, 0.0, 16, 8), CoreRequest(1, 1, 0.0, 16, 8)
    rank.add(a)
    rank.add(b)
    step = rank.next_step()
    assert len(step.requests) == 2 and rank.allocated == 8
    rank.end_step(step, 0.01)
    step = rank.next_step()  # each decode needs a free block: the newest request is preempted
    assert [r.id for r in step.requests] == [0] and b.num_restarts == 1 and rank.queue == [b]
    # b's block and pages left with it; a took a block for its next token (17 tokens: prompt + first output)
    assert rank.alloc == {0: 2} and rank.allocated == 2 + 3


def test_hybrid_preemption_gives_the_references_tables():
    from conftest import each_batch
    from test_engine_core import both, tables

    cfg = load(Q397_CONFIG, ["workload.num_requests=24", "scheduler.num_blocks=60", "workload.concurrency=24"])
    core, ref = both(cfg)
    assert tables(core) == tables(ref)
    assert core.summary["restarts"] > 0  # the pool's 60 blocks hold fewer than 24 requests' KV and state
    seen = []

    def check(sched, batch):  # every formed step: the pool holds each admitted request's KV and its 12 pages
        held = sum(sched._allocation_map.values()) + 12 * len(sched._allocation_map)
        seen.append(sched._num_allocated_blocks)
        assert sched._num_allocated_blocks == held <= sched._cache_config.num_blocks

    with each_batch(check):
        simulate(cfg)
    assert max(seen) > 48  # the pool ran near full


def test_a_model_of_linear_attention_only_holds_one_block_and_k_pages(tmp_path):
    d = resolve_model("Qwen/Qwen3.5-122B-A10B").to_dict()
    d.update(name="linear-only", linear_layers=48, mtp_layers=0, max_model_len=32768)
    d.pop("full_attention_layer_ids")
    path = tmp_path / "model.yaml"
    path.write_text(yaml.safe_dump(d))
    res = simulate(Q397_CONFIG, [f"model={path}", "parallel.tensor_parallel_size=4", "speculative.method=ngram",
                                 "workload.num_requests=12"])
    mem = res.summary["memory"]
    # vLLM: no attention backend, so one state group of every layer whose block is max_model_len tokens; a
    # request holds cdiv(tokens + k x max_model_len, max_model_len) = 1 + k of them
    assert (mem["block_size"], mem["state_pages"], mem["target_kv_bytes_per_token"]) == (32768, 3, 0)
    assert mem["kv_cache_max_concurrency"] == round(mem["num_blocks"] / 4, 4)
    assert len(res.requests) == 12


def test_pipeline_stages_of_a_hybrid_model_hold_and_price_their_own_layers():
    cfg = load(Q397_CONFIG, ["parallel.tensor_parallel_size=4", "parallel.pipeline_parallel_size=2",
                             "workload.num_requests=12"])
    p = prepare(cfg)
    m = p.model
    # layer_types: full attention every fourth layer -> stage 0 (layers 0-29) holds 7, stage 1 (30-59) 8
    stages = [memory.stage_plan(m, "h200", 16, p.cfg.scheduler.memory_margin_fraction, None, 4, None, (0, 0), 1, 2,
                                s, num_spec=3) for s in range(2)]
    kv1 = 2 * 1 * 256 * 2
    assert [s.target_kv_bytes_per_token for s in stages] == [7 * kv1, 8 * kv1]
    pricer = p.pricer
    assert [round(layer.full_share, 6) for layer in pricer.stage_layer] == [round(7 / 30, 6), round(8 / 30, 6)]
    plan = decode_plan(16, 3, 2048)
    staged = sum(pricer.price(plan, s).layer_ops[2] * 30 for s in range(2))  # decode attention, all layers
    whole = pricer.layer.ops(plan)[2] * 60  # the model's mean layer over 60 layers
    assert staged == pytest.approx(whole, rel=1e-9)
    assert pricer.price(plan, 0).layer_ops[2] != pytest.approx(pricer.price(plan, 1).layer_ops[2], rel=1e-6)
    res = run_prepared(p)
    assert len(res.requests) == 12 and res.summary["pipeline_parallel_size"] == 2
    assert res.summary["memory"]["state_pages"] == 12


def test_eagle3_under_pipeline_parallelism_is_refused_on_a_hybrid_target():
    from vidur_specdec.config import ConfigError

    with pytest.raises(ConfigError, match="eagle3 under pipeline parallelism") as e:
        prepare(load(Q397_CONFIG, ["parallel.tensor_parallel_size=4", "parallel.pipeline_parallel_size=2",
                                   "speculative.method=eagle3", "speculative.model=null"]))
    assert "\n" not in str(e.value)
