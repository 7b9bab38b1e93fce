"""Pipeline parallelism: vLLM's layer split, a step's stage structure, two micro-batches in flight, refusals."""

import math

import pytest

from vidur_specdec.config import ConfigError
from vidur_specdec.costs import memory, pipeline
from vidur_specdec.engine.deployment import resolve
from vidur_specdec.pricing.pricer import StepPricer
from vidur_specdec.engine.resolve import load
from vidur_specdec.engine.simulation import prepare, run_prepared

PP2 = "configs/llama3.1-70b-eagle3-tp4pp2-h100.yaml"
SMALL = ["workload.num_requests=24", "workload.concurrency=12",
         "workload.prompt_tokens={dist: uniform, min: 64, max: 256}",
         "workload.output_tokens={dist: uniform, min: 32, max: 96}"]


def test_layer_split_is_vllms():
    # vllm/distributed/utils.py get_pp_indices: the remainder goes to the stages before the last
    assert pipeline.stage_layers(80, 2) == (40, 40)
    assert pipeline.stage_layers(80, 3) == (27, 27, 26)
    assert pipeline.stage_layers(61, 4) == (15, 15, 16, 15)
    assert pipeline.stage_range(80, 3, 1) == (27, 54)
    # EAGLE-3's aux layers (2, 40, 77): stage 0 of two sends the one it captured (layer 2)
    assert pipeline.aux_states_sent(80, 2, 0) == 1


@pytest.fixture(scope="module")
def pp2_run():
    """The PP 2 run, each batch's stages as priced, and the same batch priced at TP 4 with one stage."""
    one_stage = prepare(load(PP2, SMALL + ["parallel.pipeline_parallel_size=1"])).pricer
    seen = {}
    orig = StepPricer._stage

    def spy(self, plan, stage):
        out = orig(self, plan, stage)
        rec = seen.setdefault(id(plan), {"plan": plan, "stages": [], "send": 0.0})  # held: its id stays its own
        if stage == 0:  # the one-stage price of the same step
            rec["whole"] = one_stage.price(plan).total_time * 1e3
        rec["stages"].append(out.total_time * 1e3)
        rec["send"] += out.send_ms
        return out

    StepPricer._stage = spy
    try:
        res = run_prepared(prepare(load(PP2, SMALL)))
    finally:
        StepPricer._stage = orig
    return res, seen


def test_step_is_its_stages_plus_the_send(pp2_run):
    res, seen = pp2_run
    assert len(seen) == len(res.steps) and all(len(r["stages"]) == 2 for r in seen.values())
    for r in seen.values():
        # the same layers, LM head, sampling, drafter and overhead as one stage, plus the one send
        assert sum(r["stages"]) == pytest.approx(r["whole"] + r["send"], rel=1e-9)
        assert r["send"] > 0
    st = res.steps
    assert st["duration_ms"].to_numpy() == pytest.approx(st["verify_ms"] + st["draft_ms"] + st["lm_head_ms"]
                                                         + st["sampling_ms"] + st["overhead_ms"], rel=1e-9)
    assert (st["stage_ms_max"] >= st["duration_ms"] / 2 - 1e-9).all()
    assert (st["pipeline_ms"] >= st["duration_ms"] - 1e-6).all()
    assert res.summary["pipeline_parallel_size"] == 2 and res.summary["num_gpus"] == 8


def test_two_micro_batches_in_flight(pp2_run):
    res, _ = pp2_run
    st = res.steps
    # stage 0 takes the next micro-batch while stage 1 runs the last one: steps overlap in time
    busy = st["duration_ms"].sum() / 1e3
    assert busy > 1.3 * res.summary["makespan_s"]
    overlapped = (st["start_s"].to_numpy()[1:] < (st["start_s"] + st["pipeline_ms"] / 1e3).to_numpy()[:-1]).mean()
    assert overlapped > 0.6


def test_stage_memory_holds_half_the_layers():
    cfg = load(PP2, SMALL)
    dep = resolve(cfg)
    two = memory.plan(dep.model, dep.device, 16, 0.1, tp=4, pp=2)
    one = memory.plan(dep.model, dep.device, 16, 0.1, tp=4)
    assert two.target_kv_bytes_per_token * 2 == one.target_kv_bytes_per_token
    vocab = dep.model.vocab_size * dep.model.hidden_size // 4 * 2  # one vocabulary matrix per GPU, bytes
    assert two.target_weight_bytes == pytest.approx((one.target_weight_bytes - 2 * vocab) / 2 + vocab, rel=1e-6)
    assert two.num_blocks > 2 * one.num_blocks


@pytest.mark.parametrize("overrides, says", [
    (["parallel.pipeline_parallel_size=4", "model=JackFram/llama-68m", "speculative.method=ngram",
      "parallel.tensor_parallel_size=1"], "exceed"),
    (["parallel.pipeline_parallel_size=2", "model=Qwen/Qwen3-30B-A3B", "parallel.tensor_parallel_size=1"],
     "eagle3 under pipeline parallelism"),
    (["parallel.pipeline_parallel_size=2", "disaggregation.prefill_instances=1", "disaggregation.decode_instances=1"],
     "disaggregation.prefill_instances"),
    (["parallel.pipeline_parallel_size=2", "model=Qwen/Qwen3.5-122B-A10B", "device=h200"],
     "eagle3 under pipeline parallelism"),
])
def test_refusals(overrides, says):
    with pytest.raises(ConfigError) as e:
        prepare(load(PP2, SMALL + overrides))
    msg = str(e.value)
    assert msg.startswith("parallel.pipeline_parallel_size") and says in msg and "\n" not in msg


def test_uneven_split_runs_and_moe_stages():
    # 80 layers over 3 stages (27, 27, 26), as vLLM splits them; an MoE target with n-gram guesses
    res = run_prepared(prepare(load(PP2, SMALL + ["parallel.pipeline_parallel_size=3",
                                                   "parallel.tensor_parallel_size=2"])))
    assert res.summary["num_gpus"] == 6 and not math.isnan(res.summary["tpot_ms"]["p50"])
    moe = run_prepared(prepare(load(PP2, SMALL + ["model=Qwen/Qwen3-30B-A3B", "parallel.tensor_parallel_size=1",
                                                  "speculative.method=ngram", "speculative.mean_acceptance_length=2"])))
    assert (moe.steps["moe_ms"] > 0).all() and moe.summary["pipeline_parallel_size"] == 2
