"""vLLM's custom all-reduce model and the ``engine.all_reduce`` registry (collectives.ALL_REDUCE_MODELS)."""

import numpy as np
import pytest

from vidur_specdec.hardware import collectives
from vidur_specdec.hardware import custom_all_reduce as CA
from vidur_specdec.config import DEFAULT_ALL_REDUCE, ConfigError, EngineConfig
from vidur_specdec.engine.resolve import load
from vidur_specdec.hardware.devices import get_device

A100, H100 = get_device("a100"), get_device("h100")
CUSTOM, NCCL = collectives.ALL_REDUCE_MODELS["vllm_custom"], collectives.ALL_REDUCE_MODELS["nccl"]
KIB, MIB = 1024, 1024 * 1024


def _sizes():
    """16 B .. 64 MiB, dense around vLLM's kernel switch sizes and its 8 MiB limit."""
    s = set(np.unique(np.geomspace(16, 64 * MIB, 400).astype(int) // 16 * 16 + 16).tolist())
    for edge in (256 * KIB, 512 * KIB, CA.MAX_BYTES):
        s.update({edge - 16, edge, edge + 16})
    return sorted(s)


def test_registry_and_default():
    assert set(collectives.ALL_REDUCE_MODELS) == {"vllm_custom", "nccl"}
    assert EngineConfig().all_reduce == DEFAULT_ALL_REDUCE == "vllm_custom"
    assert NCCL is collectives.all_reduce_ms  # `nccl` is the calibrated NCCL model, unchanged
    two = {"model": "meta-llama/Llama-3.1-8B-Instruct", "device": "h100", "parallel": {"tensor_parallel_size": 2}}
    assert load({**two, "engine": {"all_reduce": "nccl"}}).engine.all_reduce == "nccl"


def test_bad_name_is_one_line_naming_the_key():
    with pytest.raises(ConfigError) as e:
        load({"engine": {"all_reduce": "mpi"}})
    msg = str(e.value)
    assert msg.startswith("engine.all_reduce:") and "vllm_custom" in msg and "nccl" in msg and "\n" not in msg
    with pytest.raises(ValueError, match="engine.all_reduce"):
        collectives.all_reduce_model("mpi")


@pytest.mark.parametrize("world", [1, 2, 4, 8])
def test_zero_at_one_gpu_or_no_bytes(world):
    assert CUSTOM(H100, 1, 1 << 20) == 0.0
    assert CUSTOM(H100, world, 0) == 0.0
    if world > 1:
        assert CUSTOM(H100, world, 16) > 0.0


@pytest.mark.parametrize("device", [A100, H100])
@pytest.mark.parametrize("world", [2, 4, 8])
def test_monotone_in_bytes(device, world):
    t = np.array([CUSTOM(device, world, b) for b in _sizes()])
    assert np.all(np.diff(t) >= -1e-12)


@pytest.mark.parametrize("device", [A100, H100])
@pytest.mark.parametrize("world", [2, 4, 8])
def test_custom_below_nccl_where_vllm_uses_it(device, world):
    """Every size vLLM sends to its custom kernels is priced below NCCL; small decode messages far below."""
    for b in _sizes():
        if CA.applies(world, b):
            assert CUSTOM(device, world, b) < NCCL(device, world, b)
    # a decode step's all-reduce: 8 tokens x 8,192 x 2 B = 128 KiB: about 10 us, NCCL's floor is ~48 us
    small = 8 * 8192 * 2
    assert CUSTOM(device, world, small) < 0.5 * NCCL(device, world, small)


@pytest.mark.parametrize("world", [2, 4, 8])
def test_falls_back_to_nccl_at_and_above_the_limit(world):
    for b in (CA.MAX_BYTES, CA.MAX_BYTES + 16, 64 * MIB):
        assert not CA.applies(world, b)
        assert CUSTOM(H100, world, b) == NCCL(H100, world, b)
    assert CA.applies(world, CA.MAX_BYTES - 16)
    assert CUSTOM(H100, world, CA.MAX_BYTES - 16) != NCCL(H100, world, CA.MAX_BYTES - 16)


@pytest.mark.parametrize("world", [3, 5, 16])
def test_unsupported_tp_sizes_use_nccl(world):
    for b in (2 * KIB, 128 * KIB, 4 * MIB):
        assert CUSTOM(H100, world, b) == NCCL(H100, world, b)


def test_kernel_choice_follows_vllm():
    """custom_all_reduce.cuh: 2 GPUs always one-shot; 4 GPUs below 512 KiB, 6-8 below 256 KiB."""
    assert CA.algorithm(2, CA.MAX_BYTES - 16) == "one_shot"
    assert CA.algorithm(4, 512 * KIB - 16) == "one_shot" and CA.algorithm(4, 512 * KIB) == "two_shot"
    assert CA.algorithm(8, 256 * KIB - 16) == "one_shot" and CA.algorithm(8, 256 * KIB) == "two_shot"
    assert CA.algorithm(6, 256 * KIB) == "two_shot"
    # one-shot reads the whole message from each peer; two-shot moves NCCL's bus bytes
    assert CA.bytes_in(4, 1 * KIB) == 3 * KIB
    assert CA.bytes_in(4, 1 * MIB) == pytest.approx(1.5 * MIB)


@pytest.mark.parametrize("world,edge", [(4, 512 * KIB), (8, 256 * KIB)])
def test_continuous_at_the_kernel_switch(world, edge):
    """The two-shot's extra fixed cost makes both kernels cost the same at vLLM's switch size."""
    below, at = CA.custom_all_reduce_ms(H100, world, edge - 16), CA.custom_all_reduce_ms(H100, world, edge)
    assert at == pytest.approx(below, abs=1e-4)  # within 0.1 us


def test_bandwidth_is_nccls_efficiency_on_the_device_link():
    """Nothing fitted here: NVLink figure x NCCL's large-message efficiency from collectives_fit."""
    from vidur_specdec.hardware import collectives_fit as FIT

    assert CA.effective_bandwidth(A100) == pytest.approx(FIT.BUS_BANDWIDTH)
    assert CA.effective_bandwidth(H100) == pytest.approx(FIT.BUS_BANDWIDTH * 1.5)


def test_latency_and_held_out_error_against_published_h100_rows():
    """Latency: median of the published <= 16 KiB rows; the larger rows are held out (docs/model.md)."""
    assert CA.LATENCY_MS == pytest.approx(0.0092)
    rows = CA.error_table(H100)
    held = [abs(r["err"]) for r in rows if r["role"] == "held out"]
    assert len(held) == 12
    assert np.median(held) <= 0.05 and max(held) <= 0.20  # docs/model.md: median 4.6 %, max 19.0 %


def test_deterministic():
    a = [CUSTOM(H100, w, b) for w in (2, 4, 8) for b in _sizes()]
    b = [CUSTOM(H100, w, b) for w in (2, 4, 8) for b in _sizes()]
    assert a == b


def test_end_to_end_engine_all_reduce():
    """engine.all_reduce reaches the step: the same first step pays less comm_ms with vLLM's custom all-reduce;
    runs are deterministic; TP 1 does not depend on the setting."""
    from conftest import small
    from vidur_specdec.engine.simulation import simulate

    c = small(num_requests=6, model="meta-llama/Llama-3.1-8B-Instruct", device="h100",
              speculative={"method": "none"})  # built profiles from the session's shared cache
    run = {name: simulate(c, ["parallel.tensor_parallel_size=2", f"engine.all_reduce={name}"]).steps
           for name in ("vllm_custom", "nccl")}
    first = {k: v["comm_ms"].iloc[0] for k, v in run.items()}
    assert 0 < first["vllm_custom"] < first["nccl"]
    assert (run["vllm_custom"]["comm_ms"].sum() < run["nccl"]["comm_ms"].sum())
    again = simulate(c, ["parallel.tensor_parallel_size=2", "engine.all_reduce=vllm_custom"]).steps
    assert again.equals(run["vllm_custom"])
    assert (simulate(c).steps["comm_ms"] == 0).all()  # one GPU: no all-reduce
    with pytest.raises(ConfigError, match="^engine.all_reduce: does nothing with parallel.tensor_parallel_size 1"):
        simulate(c, ["engine.all_reduce=nccl"])  # so choosing one is refused, not ignored
