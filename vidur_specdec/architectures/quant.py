"""Checkpoint weight formats: the format each part of a model is stored and run in, read as vLLM 0.33 reads it.

``ModelSpec.quantization`` holds vLLM's quantization method for the checkpoint
(``vllm/config/model.py`` ``_verify_quantization``; the ``quantization`` engine
argument takes the same names): ``""`` (bf16), ``fp8`` (block fp8, every linear
layer W8A8), ``mxfp4`` (gpt-oss: MXFP4 routed experts), ``modelopt`` (NVIDIA
ModelOpt FP8, per-tensor W8A8), ``modelopt_fp4`` (ModelOpt NVFP4, W4A4) and
``compressed-tensors`` (read here only in its W4A16 int4 group-32 form, the
routed experts of Kimi-K2.5). ``ModelSpec.bf16_parts`` names the parts a
quantized checkpoint keeps in bf16 (its ``exclude_modules`` / ``ignore`` list):
:func:`part_format` is the one place a part's format is decided.

Parts: ``attention`` (q/k/v; MLA's q_a, q_b, kv_a, kv_b), ``o_proj``, ``dense_mlp``
(the dense layers' gated MLP), ``shared_experts``, ``experts`` (routed), ``indexer``
(sparse attention's ``wq_b``), ``linear_attention`` (gated-delta-net projections),
``mtp`` (the checkpoint's MTP modules, whole), ``lm_head``.

A checkpoint's format and parts are read from its ``config.json`` by
:mod:`~vidur_specdec.architectures.checkpoint_format`.

Bytes per weight (:data:`FORMAT_BYTES`): NVFP4 4-bit e2m1 + one fp8 e4m3 scale per 16
values = 4.5 bits (``modelopt.py`` ``ModelOptNvFp4FusedMoE.create_weights``: uint8
pairs and ``hidden // group_size`` float8_e4m3fn scales; the per-tensor fp32 scale is
left out); int4 W4A16 group 32 = 4 bits + one bf16 scale per 32 values = 4.5 bits
(symmetric: no zero point). An NVFP4 checkpoint on a GPU without FP4 tensor cores is refused in one line
(:func:`check_device`).
"""

from __future__ import annotations

import dataclasses

from vidur_specdec.architectures.errors import ModelError

#: bytes per weight of each run format: bf16 2; fp8 e4m3 1 (+ one fp32 scale per 128x128 block, 1/4096, left out);
#: MXFP4 4 bits + one e8m0 scale byte per 32 values = 4.25 bits (OCP MX spec v1.0); NVFP4 and int4 W4A16: above
FORMAT_BYTES = {"bf16": 2.0, "fp8": 1.0, "mxfp4": 4.25 / 8.0, "nvfp4": 4.5 / 8.0, "int4": 4.5 / 8.0}
#: vLLM's quantization methods read here (``ModelSpec.quantization``)
METHODS = ("fp8", "mxfp4", "modelopt", "modelopt_fp4", "compressed-tensors")
PARTS = ("attention", "o_proj", "dense_mlp", "shared_experts", "experts", "indexer", "linear_attention", "mtp",
         "lm_head")
#: methods whose GEMMs need FP4 tensor cores (Blackwell: SM100/SM103/SM120)
FP4_METHODS = ("modelopt_fp4",)


def parts_of(spec) -> frozenset:
    """The parts ``spec``'s checkpoint keeps in bf16 (``bf16_parts``)."""
    s = getattr(spec, "bf16_parts", "") or ""
    return frozenset(p for p in s.split(",") if p)


def part_format(spec, part: str) -> str:
    """The format ``part`` of ``spec`` runs in: ``bf16``, ``fp8``, ``nvfp4``, ``mxfp4`` or ``int4``."""
    q = getattr(spec, "quantization", "") or ""
    if not q or part in parts_of(spec) or part == "lm_head":  # every format read keeps the LM head bf16 (parse checks)
        return "bf16"
    if q == "fp8":  # every linear layer (DeepSeek-V3 style block fp8)
        return "fp8"
    if q == "mxfp4":  # gpt-oss: the routed experts only
        return "mxfp4" if part == "experts" else "bf16"
    if q == "compressed-tensors":  # W4A16 int4: the routed experts only (checked at parse)
        return "int4" if part == "experts" else "bf16"
    if q == "modelopt":
        return "fp8"
    if q == "modelopt_fp4":
        return "nvfp4"
    raise ModelError(f"model: quantization {q!r} is not a format the simulator reads")


def gemm_dtype(spec, part: str) -> str:
    """The GEMM dtype a kernel source prices ``part``'s projections at: ``bf16``, ``fp8`` (W8A8) or ``nvfp4``."""
    f = part_format(spec, part)
    return f if f in ("fp8", "nvfp4") else "bf16"


def weight_bytes(spec, part: str) -> float:
    """Bytes per weight of ``part`` as stored."""
    return FORMAT_BYTES[part_format(spec, part)]


def module_spec(spec):
    """``spec`` with its ``o_proj`` at the format of its other attention projections (itself when they agree).

    A measured attention module (MLA, DSA) is keyed by one GEMM dtype; the run subtracts the
    module's own projections at that dtype and prices its own projections apart, so the
    subtraction uses this spec.
    """
    if part_format(spec, "o_proj") == part_format(spec, "attention"):
        return spec
    parts = set(parts_of(spec))
    parts.discard("o_proj") if part_format(spec, "attention") != "bf16" else parts.add("o_proj")
    return dataclasses.replace(spec, bf16_parts=",".join(sorted(parts)))


def mtp_spec(spec):
    """The spec an MTP module of ``spec`` runs at: bf16 throughout when the checkpoint excludes it."""
    if "mtp" in parts_of(spec):
        return dataclasses.replace(spec, quantization="", bf16_parts="")
    return spec


def needs_fp4(spec) -> bool:
    return getattr(spec, "quantization", "") in FP4_METHODS


def needs_checkpoint(method: str, name: str) -> str:
    """The one-line refusal of ``quantization: method`` on ``name``, a bf16 checkpoint."""
    if method == "mxfp4":
        return f"quantization: mxfp4 needs an MXFP4 checkpoint (gpt-oss); {name} is bf16; allowed: null or fp8"
    return (f"quantization: {method} needs a checkpoint stored in that format ({name} is bf16; vLLM 0.33 reads "
            "the format from the checkpoint's quantization_config or hf_quant_config.json and fails without one: "
            "model_loader/weight_utils.py get_quant_config); allowed: null or fp8")


def check_device(spec, device) -> None:
    """Refuse, in one line, an NVFP4 checkpoint on a GPU without FP4 tensor cores.

    vLLM 0.33 would not refuse it: without FP4 tensor cores (``cutlass_fp4_supported``, capability
    100+) its NVFP4 linear kernels fall through to Marlin's weight-only FP4 (``kernels/linear/__init__.py``
    ``_POSSIBLE_NVFP4_KERNELS``; ``nvfp4/marlin.py``: "Your GPU does not have native support for FP4
    computation ... Weight-only FP4 compression will be used leveraging the Marlin kernel") and its
    MoE to the Marlin experts (``fused_moe/oracle/nvfp4.py``), which no table measures.
    """
    from vidur_specdec.config import ConfigError

    if needs_fp4(spec) and not getattr(device, "fp4_flops", 0):
        raise ConfigError(f"quantization: {spec.name} is an NVFP4 checkpoint (modelopt_fp4) and {device.name} has "
                          "no FP4 tensor cores: vLLM 0.33 would run it as weight-only FP4 through Marlin "
                          "(kernels/linear/nvfp4/marlin.py), which no table measures; use b200, b300, gb200, gb300 "
                          "or rtx_pro_6000")
