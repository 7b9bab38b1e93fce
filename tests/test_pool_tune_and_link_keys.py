"""Keys read or refused beyond one run's own section: a prefill pool's speculative keys (a prefill instance never
verifies), a schedule in a config given to tune (tune chooses it), the KV link a pool's card really has, a
trace's workload category under published acceptance, and `validate pin` on prefill and decode pools."""

import functools
import json
from types import SimpleNamespace

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import run_command
from vidur_specdec.config import ConfigError
from vidur_specdec.config import unused
from vidur_specdec.engine.resolve import load

BASE = {"seed": 3, "model": "meta-llama/Llama-3.1-8B-Instruct", "device": "h100",
        "workload": {"num_requests": 8, "qps": 4.0},
        "speculative": {"method": "eagle3", "num_speculative_tokens": 3, "acceptance_rate": 0.6}}
PD = {"prefill_instances": 1, "decode_instances": 1}
VALUES = {"acceptance_rate": 0.5, "mean_acceptance_length": 2.0, "acceptance_spread": 0.1,
          "verify_attention": "per_token", "verify_interpolation_weight": 0.3, "proposal_rate": 0.5,
          "ngram_cost_ms": 1.0, "draft_sample_method": "probabilistic", "num_speculative_tokens": 2,
          "acceptance_per_position": [0.8, 0.6], "fixed_cost_ms": 2.0, "suffix_cost_ms": 0.2,
          "num_speculative_tokens_per_batch_size": {"1-8": 2}, "acceptance_factors": ["context"],
          "prompt_lookup_max": 4}


@settings(max_examples=30)
@given(key=st.sampled_from(sorted(VALUES)), role=st.sampled_from(["prefill", "decode"]))
def test_a_prefill_pools_decoding_keys_are_refused_naming_them(key, role):
    d = json.loads(json.dumps(BASE))
    d["disaggregation"] = {**PD, role: {"speculative": {key: VALUES[key]}}}
    try:
        load(d)
    except ConfigError as e:
        msg = str(e)
        assert "\n" not in msg
        if role == "prefill" and key in unused.PREFILL_UNREAD:
            assert msg.startswith(f"disaggregation.prefill.speculative.{key}: does nothing")
        return
    assert not (role == "prefill" and key in unused.PREFILL_UNREAD)


def test_tune_refuses_a_schedule_in_its_config(tmp_path):
    c = tmp_path / "c.yaml"
    c.write_text(yaml.safe_dump({**BASE, "speculative": {**BASE["speculative"],
                                                         "num_speculative_tokens_per_batch_size": {"1-16": 3}}}))
    r = run_command("tune", "--config", c, "--output-dir", tmp_path / "t", module="vidur_specdec")
    assert r.returncode == 2 and r.stderr.startswith("error: speculative.num_speculative_tokens_per_batch_size: "
                                                     "tune chooses"), r.stderr
    assert not (tmp_path / "t").exists()


def _top(device, gpus_p, gpus_d, dev_d=None):
    from vidur_specdec.hardware.devices import get_device

    mem = SimpleNamespace(target_kv_bytes_per_token=1024, draft_kv_bytes_per_token=0)

    def pool(dev, gpus):
        dep = SimpleNamespace(device=get_device(dev), tp=gpus)
        return SimpleNamespace(deployment=dep, gpus=gpus, prepared=SimpleNamespace(memory=mem))

    pools = {"prefill": pool(device, gpus_p), "decode": pool(dev_d or device, gpus_d)}
    return SimpleNamespace(pool=lambda role: pools[role])


@settings(max_examples=40)
@given(device=st.sampled_from(["h100", "h200", "b200", "l40s", "rtx_pro_6000", "a100"]),
       other=st.sampled_from([None, "h100", "l40s"]), link=st.sampled_from(["auto", "nvlink", "pcie",
                                                                            "infiniband_ndr", "roce_400g"]),
       gp=st.sampled_from([1, 2, 4, 8]), gd=st.sampled_from([1, 2, 4, 8]))
def test_the_kv_link_is_one_the_cards_have(device, other, link, gp, gd):
    from vidur_specdec.engine import kv_transfer
    from vidur_specdec.hardware.devices import get_device

    cfg = SimpleNamespace(disaggregation=SimpleNamespace(kv_link=link, kv_transfer_latency_ms=None,
                                                         draft_kv="transfer"))
    top = _top(device, gp, gd, other)
    dec = get_device(other or device)
    try:
        kl = kv_transfer.build_link(cfg, top)
    except ConfigError as e:
        assert str(e).startswith("disaggregation.kv_link: ") and "\n" not in str(e)
        assert link in ("nvlink", "pcie")
        return
    assert kl.bandwidth > 0 and kl.latency_ms >= 0
    if kl.name in ("nvlink", "pcie"):  # in one node: the decode card's own link, never NVLink on a PCIe card
        assert kl.name == ("pcie" if dec.interconnect == "pcie" else "nvlink") and gp + gd <= 8
        assert other is None or other == device


@functools.lru_cache(maxsize=1)
def _published():
    return load(None, ["model=meta-llama/Llama-3.1-8B-Instruct", "device=h100", "speculative.method=eagle3",
                       "speculative.model=RedHatAI/Llama-3.1-8B-Instruct-speculator.eagle3",
                       "speculative.num_speculative_tokens=3", "speculative.acceptance_source=published"])


@settings(max_examples=25)
@given(cats=st.lists(st.one_of(st.none(), st.sampled_from(["chat", "coding", "math", "qa", "summarisation",
                                                           "mixed", "poetry"]), st.text(max_size=6)),
                     min_size=1, max_size=6))
def test_a_trace_category_without_a_published_factor_is_refused(cats):
    from vidur_specdec.speculation import acceptance as A
    from vidur_specdec.speculation.acceptance_factors import category_factors

    cfg = _published()
    model = A.build(cfg.speculative, cfg.seed)
    cats = [None if c == "" else c for c in cats]
    known = category_factors()
    try:
        model.set_categories(cats, "chat")
    except ConfigError as e:
        assert "\n" not in str(e) and str(e).startswith("workload.trace_file: request ")
        assert any(c is not None and c not in known for c in cats)
        return
    assert all(c is None or c in known for c in cats)


def test_validate_pin_writes_each_pools_serve_line_with_its_kv_transfer_config(tmp_path):
    c = tmp_path / "pd.yaml"
    c.write_text(yaml.safe_dump({**BASE, "disaggregation": {"prefill_instances": 1, "decode_instances": 2,
                                                            "decode": {"tensor_parallel_size": 2}}}))
    r = run_command("validate", "pin", "--config", c, "--out", tmp_path / "pin", module="vidur_specdec")
    assert r.returncode == 0, r.stderr
    body = json.loads((tmp_path / "pin" / "vllm_pinned.json").read_text())
    assert set(body["pools"]) == {"prefill", "decode"}
    for role, tp in (("prefill", 1), ("decode", 2)):
        line = body["pools"][role]["vllm_serve"]
        assert f"--tensor-parallel-size {tp}" in line and "--speculative-config" in line
        kv = json.loads(line.split("--kv-transfer-config ")[1].strip("'"))
        assert kv == {"kv_connector": "NixlConnector", "kv_role": "kv_both"}
