"""One contract over every registered proposer and every verify-cost policy (like scikit-learn's check_estimator).

A proposer's step time must be >= 0, zero when nobody guesses (and nobody
prefills), non-decreasing in guesses and in batch size, and deterministic.
A verify-cost policy must be >= 0, non-decreasing in query tokens, batch and
context, price plain decodes alike, and be deterministic.
"""

import pytest

from vidur_specdec.speculation import proposers
from vidur_specdec.costs import verify_cost
from vidur_specdec.engine import deployment
from vidur_specdec.engine.resolve import load
from vidur_specdec.hardware.devices import get_device
from vidur_specdec.costs.fit_cache import load_time_model
from vidur_specdec.costs.profile_files import locate_profile
from vidur_specdec.pricing.plan import StepComposition
from vidur_specdec.speculation.proposers.base import ProposerContext

LLAMA7 = "meta-llama/Llama-2-7b-hf"
HEAD3 = "configs/heads/eagle3-llama2-7b.yaml"
#: heads for methods with no published head for the Llama-2-7B target (hypothetical, at its shape)
YAML_HEADS = {"eagle3": HEAD3, "dflash": "configs/heads/dflash-llama2-7b.yaml",
              "dspark": "configs/heads/dspark-llama2-7b.yaml"}


@pytest.fixture(scope="module")
def target():
    return load_time_model(*locate_profile("shipped", "a100", LLAMA7))


def _proposer(method, target):
    from conftest import REPO

    sets = [f"speculative.method={method}", "speculative.num_speculative_tokens=5"]
    if method in YAML_HEADS:
        sets.append(f"speculative.model={REPO / YAML_HEADS[method]}")
    cfg = load({}, sets)
    dep = deployment.resolve(cfg)  # the engine resolves the deployment and fits a drafter once, then builds
    draft_time = (deployment.time_models(cfg, dep, deployment.longest_request_tokens(cfg))[1]
                  if method == "draft_model" else None)
    p = proposers.build(cfg, target, deployment=dep, draft_time=draft_time)
    p.bind(ProposerContext(get_device("a100"), 1))
    return p


def _comp(guesses, ctx=500, catchup=1):
    n = len(guesses)
    return StepComposition(sum(guesses) + n, [1 + g for g in guesses], [ctx] * n, [], [catchup] * n)


@pytest.mark.parametrize("method", list(proposers.REGISTRY))
def test_proposer_contract(method, target):
    p = _proposer(method, target)
    assert proposers.label(method)
    # zero with no guesses
    assert p.step_time_ms(_comp([0, 0, 0])) == 0.0
    assert p.step_time_ms(StepComposition(0, [], [], [])) == 0.0
    prev_g = -1.0
    for g in range(0, 6):  # monotone in guesses
        t = p.step_time_ms(_comp([g] * 4))
        assert t >= 0.0 and t >= prev_g - 1e-12, (method, g)
        prev_g = t
    prev_b = -1.0
    for b in (1, 2, 4, 8, 16, 32, 64):  # monotone in batch
        t = p.step_time_ms(_comp([3] * b))
        assert t >= prev_b - 1e-12, (method, b)
        prev_b = t
    comp = _comp([1, 3, 5, 2])
    assert p.step_time_ms(comp) == p.step_time_ms(_comp([1, 3, 5, 2]))  # deterministic
    w, kv = p.memory_bytes(1)
    assert w >= 0 and kv >= 0


@pytest.mark.parametrize("name", list(verify_cost.REGISTRY))
def test_verify_cost_contract(name, target):
    spec = load({}, [f"speculative.verify_attention={name}"]).speculative
    v = verify_cost.build(spec)
    assert v.attention_ms(target, [], []) == 0.0
    prev = -1.0
    for q in range(1, 10):  # monotone in query tokens
        t = v.attention_ms(target, [q] * 8, [1000] * 8)
        assert t >= prev - 1e-12 and t >= 0
        prev = t
    prev = -1.0
    for b in (1, 4, 16, 64, 256):
        t = v.attention_ms(target, [4] * b, [1000] * b)
        assert t >= prev - 1e-12
        prev = t
    prev = -1.0
    for c in (0, 100, 1000, 3000):
        t = v.attention_ms(target, [4] * 8, [c] * 8)
        assert t >= prev - 1e-12
        prev = t
    plain = verify_cost.SharedKV().attention_ms(target, [1] * 9, list(range(100, 109)))
    assert v.attention_ms(target, [1] * 9, list(range(100, 109))) == pytest.approx(plain)
    assert v.attention_ms(target, [3, 5], [10, 20]) == v.attention_ms(target, [3, 5], [10, 20])


def test_unknown_method_lists_the_registered_ones():
    from vidur_specdec.config import ConfigError

    with pytest.raises(ConfigError) as e:
        load({}, ["speculative.method=lookahead"])
    msg = str(e.value)
    assert msg.startswith("speculative.method:") and "\n" not in msg
    for name in proposers.REGISTRY:
        assert name in msg


def test_drafters_pay_their_all_reduces_at_tensor_parallel_above_one():
    """A draft model and an EAGLE head at TP 4 cost more than the same passes with no collective bound."""
    from vidur_specdec.hardware.collectives import all_reduce_model
    from vidur_specdec.hardware.devices import get_device
    from vidur_specdec.speculation.proposers.base import ProposerContext
    from vidur_specdec.engine.simulation import prepare
    from vidur_specdec.engine.resolve import load

    for method, extra in (("draft_model", ["speculative.draft_model=meta-llama/Llama-3.2-1B-Instruct"]),
                          ("eagle", [])):
        cfg = load("configs/default.yaml", ["model=meta-llama/Llama-3.1-70B-Instruct", "device=h100",
                                            "parallel.tensor_parallel_size=4", f"speculative.method={method}",
                                            "workload.num_requests=20"] + extra)
        proposer = prepare(cfg).pricer.proposer
        comp = StepComposition(num_tokens=4 * 5, decode_q=[5] * 4, decode_ctx=[300] * 4, prefill=[])
        proposer.bind(ProposerContext(get_device("h100"), 4, None))
        without = proposer.step_time_ms(comp)
        proposer.bind(ProposerContext(get_device("h100"), 4, all_reduce_model("vllm_custom")))
        with_comm = proposer.step_time_ms(comp)
        assert with_comm > without, method
        proposer.bind(ProposerContext(get_device("h100"), 1, all_reduce_model("vllm_custom")))
        assert ProposerContext(get_device("h100"), 1, all_reduce_model("vllm_custom")).all_reduce_ms(20, 8192) == 0.0
