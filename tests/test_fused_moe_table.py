"""The MoE layer priced from vLLM's measured fused-MoE tables (aiconfigurator-core 0.12.0, vLLM 0.24.0 rows)."""

import dataclasses

import pandas as pd
import pytest

from conftest import small
from vidur_specdec.architectures.models import KNOWN_MODELS
from vidur_specdec.config import ConfigError
from vidur_specdec.costs import fused_moe_table as F
from vidur_specdec.costs.moe_layer import balanced_tokens, moe_layer_ms, routed_table_ms, uniform_distinct
from vidur_specdec.costs.routing import expected_distinct
from vidur_specdec.hardware.devices import get_device

QWEN = KNOWN_MODELS["Qwen/Qwen3-30B-A3B"]
DSV3 = KNOWN_MODELS["deepseek-ai/DeepSeek-V3"]
GPTOSS = KNOWN_MODELS["openai/gpt-oss-120b"]
H100 = get_device("h100").builder_fields()


class _Zero:
    """A curve pricing the routed experts at 0 ms: what the layer adds beyond the table (router, shared experts)."""

    def ms(self, tokens):
        return 0.0


def _rows(system: str, kernel_source: str, spec, mtp: int, mep: int) -> pd.DataFrame:
    """The table's own balanced rows for one deployment, read straight from the Parquet file."""
    df = pd.read_parquet(F.table_path(system), filters=[("kernel_source", "==", kernel_source)])  # not the module's reader
    sel = ((df.kernel_source == kernel_source) & (df.hidden_size == spec.hidden_size)
           & (df.inter_size == spec.expert_ffn_size) & (df.topk == spec.experts_per_token)
           & (df.num_experts == spec.num_experts) & (df.moe_tp_size == mtp) & (df.moe_ep_size == mep)
           & (df.distribution == "balanced"))
    return df[sel].sort_values("num_tokens")


# (AIConfigurator system, model, format, tp, ep): a sample per GPU family and format, Hopper TP and EP kernels both
SAMPLE = [
    ("h100_sxm", QWEN, "", 1, 1), ("h100_sxm", QWEN, "fp8", 1, 1), ("h200_sxm", DSV3, "fp8", 8, 1),
    ("h200_sxm", DSV3, "fp8", 8, 8), ("h100_sxm", GPTOSS, "mxfp4", 1, 1), ("b200_sxm", QWEN, "", 1, 1),
    ("b200_sxm", DSV3, "fp8", 8, 8), ("b200_sxm", GPTOSS, "mxfp4", 1, 1), ("l40s", QWEN, "", 1, 1),
    ("rtx_pro_6000_server", GPTOSS, "mxfp4", 1, 1),
]


@pytest.mark.parametrize("system,spec,fmt,tp,ep", SAMPLE, ids=lambda v: getattr(v, "name", v))
def test_a_step_waking_a_rows_experts_reproduces_the_tables_own_row(system, spec, fmt, tp, ep):
    """n tokens waking the row's own min(E, n top_k) experts read exactly the table's row at n."""
    spec = dataclasses.replace(spec, quantization=fmt)
    curve = F.curve(system, spec, tp, ep)
    rows = _rows(system, curve.kernel.kernel_source, spec, 1 if ep > 1 else tp, ep)
    assert len(rows) >= 20
    E, k = spec.num_experts, spec.experts_per_token
    errs = [abs(routed_table_ms(curve, n, min(E, n * k), E, k) - lat) / lat
            for n, lat in zip(rows.num_tokens.to_numpy()[::3], rows.latency.to_numpy()[::3])]  # every third point
    assert max(errs) < 1e-9


def _routed(spec, dev, tp=1, curve=None, **kw):
    """The routed experts of one MoE layer: the layer less what the table does not time (router, shared experts)."""
    return lambda groups: (moe_layer_ms(spec, dev, tp, groups, routed=curve, **kw)[0]
                           - moe_layer_ms(spec, dev, tp, groups, routed=_Zero(), **kw)[0])


def test_sixteen_plain_decodes_price_below_the_balanced_row_at_sixteen_tokens():
    """16 unrelated decodes of Qwen3-30B-A3B wake about 82 of 128 experts, not the balanced row's 128."""
    curve = F.curve("h100_sxm", QWEN, 1)
    routed = _routed(QWEN, H100, curve=curve)
    woken = expected_distinct([1] * 16, 128, 8)
    assert woken == pytest.approx(uniform_distinct(16, 128, 8)) and 80 < woken < 84
    assert routed([1] * 16) == pytest.approx(curve.ms(woken / 8), rel=1e-9)  # the row that wakes 82 experts
    assert routed([1] * 16) < 0.75 * curve.ms(16)  # the balanced row at 16 tokens wakes all 128


def test_every_step_reads_the_row_of_the_experts_it_wakes():
    curve = F.curve("h100_sxm", QWEN, 1)
    routed = _routed(QWEN, H100, curve=curve)
    for groups in ([1], [1] * 4, [4], [2] * 8, [4] * 3):  # below 16 tokens: the row that wakes D experts
        d = expected_distinct(groups, 128, 8)
        assert routed(groups) == pytest.approx(curve.ms(balanced_tokens(d, 128, 8)), rel=1e-9)
    assert routed([4]) < routed([1] * 4)  # a verify block's correlated tokens wake fewer experts
    for b in (1, 4, 16, 32, 64):  # verify steps cost at least the plain decode step of the same batch
        assert routed([2] * b) >= routed([1] * b) and routed([4] * b) >= routed([2] * b)
    assert routed([1]) == pytest.approx(curve.ms(1), rel=1e-9)  # one token: the table's own one-token row
    assert routed([512]) == pytest.approx(curve.ms(512), rel=1e-3)  # a prefill chunk wakes every expert
    assert routed([4] * 64) == pytest.approx(curve.ms(256), rel=1e-3)  # every expert streaming: its rows
    d = expected_distinct([1] * 32, 128, 8)  # past E / top_k = 16 tokens: the woken experts' row + the rows' rise
    assert routed([1] * 32) == pytest.approx(curve.ms(d / 8) + curve.ms(32) - curve.ms(16), rel=1e-9)


def test_skewed_popularity_wakes_fewer_experts_and_prices_below_uniform():
    curve = F.curve("h100_sxm", QWEN, 1)
    skewed = dataclasses.replace(QWEN, moe_routing="zipf")
    uniform, zipf = _routed(QWEN, H100, curve=curve), _routed(skewed, H100, curve=curve)
    for b in (4, 16, 32):
        assert zipf([1] * b) < uniform([1] * b)
    assert zipf([1]) == pytest.approx(uniform([1])) and zipf([2048]) == pytest.approx(uniform([2048]), rel=1e-3)


def test_kernel_is_the_one_vllm_picks():
    assert F.curve("h100_sxm", QWEN, 1).kernel.name == "triton"
    fp8 = dataclasses.replace(QWEN, quantization="fp8")
    assert F.curve("h200_sxm", DSV3, 8).kernel.name == "triton"  # block fp8 without EP on Hopper
    assert F.curve("h200_sxm", DSV3, 8, 8).kernel.name == "flashinfer_cutlass"  # with EP
    assert F.curve("b200_sxm", fp8, 1).kernel.name == "flashinfer_trtllm"
    assert F.curve("h100_sxm", GPTOSS, 1).kernel.name == "oai_triton_mxfp4"
    assert F.curve("b200_sxm", GPTOSS, 1).kernel.name == "flashinfer_trtllm_mxfp4_bf16"


def test_missing_tables_and_rows_are_named():
    from vidur_specdec.costs.kernels import TableKernels

    with pytest.raises(F.MoeTableError, match="no vLLM 0.24.0 fused-MoE table for 'a100_sxm'"):
        F.curve("a100_sxm", QWEN, 1)
    fp8 = dataclasses.replace(QWEN, quantization="fp8")
    with pytest.raises(F.MoeTableError, match="missing fused-MoE rows .*moe_tp 4"):
        F.curve("h100_sxm", fp8, 4)  # 192-wide slices: vLLM's 128-block fp8 kernels refuse them too
    tables = TableKernels(get_device("h100"))
    warn = tables.warnings(4, [fp8])
    assert len(warn) == 1 and "moe_tp 4" in warn[0] and "roofline" in warn[0]
    assert tables.sources(4, [fp8])["moe"] == "built" and tables.warnings(1, [QWEN]) == []
    roof = tables.fused_moe_ms(fp8, 4, [1] * 8)
    assert roof == moe_layer_ms(fp8, H100, 4, [1] * 8)  # priced on the roofline, as the warning says


def test_pinned_package_version(monkeypatch):
    from importlib import metadata

    from vidur_specdec.costs.kernels import table_data

    monkeypatch.setattr(metadata, "version", lambda name: "0.11.0")
    monkeypatch.setattr(table_data, "_ROOT", {})  # as a fresh process finds it (the folder is located once)
    with pytest.raises(ConfigError, match="0.11.0 is installed"):
        F.table_path("h100_sxm")


def test_decode_steps_moe_ms_is_the_table_at_the_experts_they_wake():
    """steps.csv's moe_ms of decode-only steps, per MoE layer, against the table read at the experts they wake."""
    from vidur_specdec import simulate
    from vidur_specdec.engine.resolve import load

    res = simulate(load(small(num_requests=6, qps=8.0, method="none", model="Qwen/Qwen3-30B-A3B", device="h100")))
    assert res.summary["kernel_sources"]["moe"].startswith("measured: h100_sxm, vllm 0.24.0 (aiconfigurator-core 0.12.0)")
    assert res.summary["kernel_sources"]["moe_routing"].startswith("uniform (every expert alike")
    curve = F.curve("h100_sxm", QWEN, 1)
    s = res.steps[(res.steps.prefill_tokens == 0) & (res.steps.decode_reqs > 0)]
    assert len(s) > 20 and s.num_tokens.max() > 1
    for n, moe in zip(s.num_tokens, s.moe_ms / QWEN.num_moe_layers):
        router = moe_layer_ms(QWEN, H100, 1, [1] * int(n), routed=_Zero())[0]  # router GEMM and top-k
        woken = uniform_distinct(n, 128, 8)
        assert moe - router == pytest.approx(curve.ms(woken / 8), rel=1e-9)  # the row that wakes as many experts
    from vidur_specdec.costs import kernels

    built = kernels.for_run("built", get_device("h100"))  # profiles: built keeps the roofline MoE layer
    assert built.sources(1, [QWEN])["moe"] == "built" and built.warnings(1, [QWEN]) == []
    assert built.fused_moe_ms(QWEN, 1, [1] * 8) == moe_layer_ms(QWEN, H100, 1, [1] * 8)


def test_expert_parallel_reads_the_table_at_the_busiest_gpus_load():
    from vidur_specdec.costs.routing import ep_busiest_rank

    dev = get_device("h200").builder_fields()
    curve = F.curve("h200_sxm", DSV3, 8, 8)
    routed = lambda g: (moe_layer_ms(DSV3, dev, 8, g, ep=8, routed=curve)[0]  # noqa: E731
                        - moe_layer_ms(DSV3, dev, 8, g, ep=8, routed=_Zero())[0])
    woken, rows = ep_busiest_rank([1], 256, 8, 8)
    assert woken > 2  # one token's 8 experts land unevenly on 8 GPUs; the table's one-token row puts 1 on each
    # every GPU carrying the busiest one's load: its rows x 8 as the table's token count, its experts x 8 woken
    assert routed([1]) == pytest.approx(routed_table_ms(curve, rows * 8 / 8, woken * 8, 256, 8))
    assert routed([1]) > curve.ms(1)
    assert routed([1] * 512) == pytest.approx(curve.ms(ep_busiest_rank([1] * 512, 256, 8, 8)[1]), rel=1e-3)
