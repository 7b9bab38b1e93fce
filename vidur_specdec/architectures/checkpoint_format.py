"""Reading a checkpoint's weight format from its ``config.json``: vLLM's method and the parts it keeps in bf16.

A ModelOpt checkpoint's format is found where vLLM finds it: ``config.json``'s
``quantization_config`` (``quant_method`` ``modelopt`` with ``quant_algo``; ModelOpt
0.31 and later), else ``hf_quant_config.json`` beside it (``{"producer": {"name":
"modelopt"}, "quantization": {"quant_algo": ...}}``; ``transformers_utils/config.py``
and ``model_arch_config_convertor.py`` ``_normalize_quantization_config``), the
algorithm mapped as ``layers/quantization/modelopt.py`` maps it (``NVFP4`` ->
``modelopt_fp4``, ``FP8`` -> ``modelopt``, ``MIXED_PRECISION`` -> ``modelopt_mixed``).
A module is excluded as vLLM's ``ModelOptQuantConfigBase.is_layer_excluded`` decides
(exact, substring or ``fnmatch`` wildcard; a ``path*`` pattern widened to ``path``
and ``path.*`` as ``apply_vllm_mapper`` does). The KV cache takes the checkpoint's
``kv_cache_quant_algo`` / ``kv_cache_scheme`` under vLLM's default ``kv_cache_dtype:
auto`` (``utils/torch_utils.py`` ``resolve_kv_cache_dtype_string``).

Refused in one line naming the field: a format or layout the simulator cannot price (W4A16 NVFP4,
``MIXED_PRECISION``, an NVFP4 group size other than 16, a part split across formats between layers,
a quantized LM head, quantized attention on a hybrid or sliding/global-layer model). What each part's
format then costs is :mod:`~vidur_specdec.architectures.quant`'s.
"""

from __future__ import annotations

import dataclasses
import re
from fnmatch import translate
from typing import Dict, List, Mapping, Optional

from vidur_specdec.architectures.errors import ModelError
from vidur_specdec.architectures.quant import part_format


def attach_hf_quant_config(cfg: Mapping, hf_quant: Optional[Mapping]) -> Mapping:
    """``cfg`` with ``hf_quant`` (an ``hf_quant_config.json``) as its ``quantization_config`` when it has none,
    as vLLM does (ModelOpt 0.29 and before keep the format there)."""
    if not hf_quant or _qcfg(cfg) is not None:
        return cfg
    return {**cfg, "quantization_config": dict(hf_quant)}


def _qcfg(cfg: Mapping) -> Optional[Mapping]:
    text = cfg.get("text_config")
    if isinstance(text, Mapping) and text.get("quantization_config") is not None:
        return text["quantization_config"]
    return cfg.get("quantization_config")


def _err(where: str, why: str) -> ModelError:
    return ModelError(f"{where}: config.json field 'quantization_config' {why}")


def modelopt_method(q: Mapping, where: str) -> Optional[str]:
    """vLLM's method for a ModelOpt ``quantization_config`` (None when it is not one)."""
    method = str(q.get("quant_method") or "").lower()
    producer = q.get("producer") if isinstance(q.get("producer"), Mapping) else {}
    inner = q.get("quantization")
    if not method.startswith("modelopt") and not (producer.get("name") == "modelopt" and isinstance(inner, Mapping)):
        return None
    algo = str((inner if isinstance(inner, Mapping) else q).get("quant_algo") or "").upper()
    if algo == "NVFP4" or (method == "modelopt_fp4" and not algo):
        return "modelopt_fp4"
    if algo == "FP8":
        return "modelopt"
    if algo == "MIXED_PRECISION":
        raise _err(where, "quant_algo MIXED_PRECISION (modelopt_mixed: a format per layer, W4A16 NVFP4 or MXFP8 "
                   "among them) is not modeled; its layers have no measured rows")
    raise _err(where, f"ModelOpt quant_algo {algo or None!r} is not modeled (modeled: NVFP4, FP8)")


def compressed_tensors_method(q: Mapping, where: str) -> str:
    """``compressed-tensors`` when ``q`` is the W4A16 int4 group-32 packing of routed experts; else refused."""
    groups = q.get("config_groups") if isinstance(q.get("config_groups"), Mapping) else {}
    w = [g.get("weights") or {} for g in groups.values() if isinstance(g, Mapping)]
    acts = [g.get("input_activations") for g in groups.values() if isinstance(g, Mapping)]
    int4 = (q.get("format") == "pack-quantized" and len(w) == 1 and w[0].get("num_bits") == 4
            and w[0].get("type") == "int" and w[0].get("group_size") == 32 and w[0].get("symmetric") is True
            and acts == [None])
    if not int4:
        fmt = q.get("format") or (w[0].get("type") if w else None)
        raise _err(where, f"compressed-tensors format {fmt!r} is not modeled (modeled: W4A16 int4 pack-quantized, "
                   "group 32, symmetric, routed experts only)")
    return "compressed-tensors"


def kv_format(q: Mapping) -> str:
    """The KV cache a ModelOpt checkpoint declares (``fp8`` or ``""``), as vLLM reads it under ``auto``."""
    inner = q.get("quantization") if isinstance(q.get("quantization"), Mapping) else q
    kv = inner.get("kv_cache_scheme") or q.get("kv_cache_scheme") or inner.get("kv_cache_quant_algo") \
        or q.get("kv_cache_quant_algo")
    if isinstance(kv, Mapping):
        return "fp8" if (kv.get("num_bits") == 8 and kv.get("type") == "float"
                         and kv.get("dynamic") is False) else ""
    return "fp8" if isinstance(kv, str) and kv.lower() == "fp8" else ""


def _exclusions(q: Mapping) -> List[str]:
    inner = q.get("quantization") if isinstance(q.get("quantization"), Mapping) else None
    ex = (inner.get("exclude_modules") if inner is not None else
          q.get("ignore", q.get("exclude_modules"))) or []
    out: List[str] = []
    for p in ex:
        p = str(p)
        if len(p) >= 2 and p.endswith("*") and p[-2] != ".":  # vLLM's apply_vllm_mapper: path* = path, path.*
            out += [p[:-1], p[:-1] + ".*"]
        else:
            out.append(p)
    return out


class _Exclusions:
    """vLLM's ``is_layer_excluded`` over one exclude list: exact, substring or ``fnmatch`` wildcard, as two regexes."""

    def __init__(self, patterns: List[str]) -> None:
        plain = [p for p in patterns if not any(c in p for c in "*?[")]
        self.subs = tuple(plain)  # exact or substring
        trees = [p for p in patterns if p.endswith(".*") and not any(c in p[:-2] for c in "*?[")]
        self.trees = tuple(p[:-1] for p in trees)  # "path.*": every module under path
        self.wild = [re.compile(translate(p)) for p in patterns if p not in plain and p not in trees]

    def __call__(self, module: str) -> bool:
        return (any(p in module for p in self.subs) or module.startswith(self.trees)
                or any(w.match(module) for w in self.wild))


def _prefix(patterns: List[str], default: str) -> str:
    """The module path above ``layers.`` the checkpoint names its decoder layers by (``model.``, ...)."""
    for p in patterns:
        i = p.find("layers.")
        if i >= 0 and not p.startswith("mtp") and "*" not in p[:i]:
            return p[:i]
    return default


# family -> module names of each part, relative to one decoder layer ("{}" is the layer's index)
_MLA_ATTN = ("self_attn.q_a_proj", "self_attn.q_b_proj", "self_attn.kv_a_proj_with_mqa", "self_attn.kv_b_proj")
_GQA_ATTN = ("self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj")
_DEEPSEEK = {"attention": _MLA_ATTN, "o_proj": ("self_attn.o_proj",), "dense_mlp": ("mlp.gate_proj",),
             "shared_experts": ("mlp.shared_experts.gate_proj",), "experts": ("mlp.experts",),
             "indexer": ("self_attn.indexer.wq_b",)}
_QWEN_MOE = {"attention": _GQA_ATTN, "o_proj": ("self_attn.o_proj",), "dense_mlp": ("mlp.gate_proj",),
             "experts": ("mlp.experts",)}
_MINIMAX = {"attention": _GQA_ATTN, "o_proj": ("self_attn.o_proj",), "experts": ("block_sparse_moe.experts",)}
_HYBRID = {"attention": _GQA_ATTN, "o_proj": ("self_attn.o_proj",), "dense_mlp": ("mlp.gate_proj",),
           "shared_experts": ("mlp.shared_expert.gate_proj",), "experts": ("mlp.experts",),
           "linear_attention": ("linear_attn.in_proj_qkv", "linear_attn.out_proj")}
_GEMMA4 = {"attention": _GQA_ATTN, "o_proj": ("self_attn.o_proj",), "dense_mlp": ("mlp.gate_proj",),
           "shared_experts": ("mlp.gate_proj",), "experts": ("experts",)}
_LLAMA = {"attention": _GQA_ATTN, "o_proj": ("self_attn.o_proj",), "dense_mlp": ("mlp.gate_proj",)}
LAYOUTS: Dict[str, Mapping] = {
    **{a: _DEEPSEEK for a in ("DeepseekV3ForCausalLM", "DeepseekV32ForCausalLM", "GlmMoeDsaForCausalLM")},
    "Qwen3MoeForCausalLM": _QWEN_MOE, "MiniMaxM2ForCausalLM": _MINIMAX,
    **{a: _HYBRID for a in ("Qwen3_5MoeForConditionalGeneration", "Qwen3_5ForConditionalGeneration",
                            "Qwen3NextForCausalLM", "Qwen3_5MoeForCausalLM", "Qwen3_5ForCausalLM")},
    **{a: _GEMMA4 for a in ("Gemma4ForConditionalGeneration", "Gemma4ForCausalLM")},
    **{a: _LLAMA for a in ("LlamaForCausalLM", "Qwen3ForCausalLM")},
}
# default module path above ``layers.`` of a family's checkpoint
_DEFAULT_PREFIX = {a: "model.language_model." for a in ("Qwen3_5MoeForConditionalGeneration",
                                                         "Qwen3_5ForConditionalGeneration",
                                                         "Gemma4ForConditionalGeneration")}


def _layers_of(spec, part: str, arch: str, types) -> List[int]:
    """Indices of the decoder layers that hold ``part``."""
    L = spec.num_layers
    if part in ("attention", "o_proj"):
        return [i for i in range(L) if types is None or types[i] != "linear_attention"]
    if part == "linear_attention":
        return [i for i in range(L) if types is not None and types[i] == "linear_attention"]
    if part == "dense_mlp":
        if arch.startswith("Gemma4") and spec.is_moe:
            return []  # Gemma 4's MLP beside the experts is its shared_experts part
        return list(range(spec.dense_layers if spec.is_moe else L))
    if part in ("shared_experts", "experts"):
        if not spec.is_moe or (part == "shared_experts" and not spec.shared_ffn_size):
            return []
        return list(range(spec.dense_layers, L))
    if part == "indexer":
        return list(range(L)) if spec.index_topk else []
    return []


def checkpoint_parts(cfg: Mapping, spec, arch: str, where: str) -> dict:
    """``bf16_parts`` and ``kv_cache_dtype`` of ``spec`` (parsed from ``cfg``) under its checkpoint's format."""
    q = _qcfg(cfg)
    if not isinstance(q, Mapping) or spec.quantization not in ("modelopt", "modelopt_fp4", "compressed-tensors"):
        return {}
    if spec.quantization == "compressed-tensors":
        return {"bf16_parts": _compressed_tensors_parts(q, spec, where)}
    inner = q.get("quantization") if isinstance(q.get("quantization"), Mapping) else q
    if spec.quantization == "modelopt_fp4":
        group = inner.get("group_size", 16)
        if group != 16:
            raise _err(where, f"NVFP4 group_size {group!r} is not 16 (one fp8 scale per 16 values, as vLLM reads it)")
        groups = inner.get("config_groups") if isinstance(inner.get("config_groups"), Mapping) else {}
        if groups and all(isinstance(g, Mapping) and g.get("input_activations") is None for g in groups.values()):
            raise _err(where, "NVFP4 with no activation quantization (vLLM 0.33 runs it as W4A16_NVFP4, modelopt.py "
                       "ModelOptNvFp4Config._from_config) is not modeled; no table measures its kernels")
    layout = LAYOUTS.get(arch)
    if layout is None:
        raise _err(where, f"{spec.quantization} on {arch}: which parts its exclude list keeps in bf16 is not "
                   "mapped for this architecture")
    patterns = _exclusions(q)
    prefix = _prefix(patterns, _DEFAULT_PREFIX.get(arch, "model."))
    excluded = _Exclusions(patterns)
    text = cfg.get("text_config") if isinstance(cfg.get("text_config"), Mapping) else cfg
    types = _layer_types(text, spec)
    bf16 = []
    for part, suffixes in layout.items():
        layers = _layers_of(spec, part, arch, types)
        if not layers:
            continue
        hit = [any(excluded(f"{prefix}layers.{i}.{s}") for s in suffixes) for i in layers]
        if all(hit):
            bf16.append(part)
        elif any(hit):
            raise _err(where, f"keeps {part} in bf16 in {sum(hit)} of its {len(hit)} layers (exclude_modules); a "
                       "part split across formats is not modeled")
    if spec.mtp_layers:
        mtp = [f"{prefix}layers.{spec.num_layers + j}.mlp.experts" for j in range(spec.mtp_layers)] + \
              [f"mtp.layers.{j}.mlp.experts" for j in range(spec.mtp_layers)]
        if any(excluded(m) for m in mtp):
            bf16.append("mtp")
    root = prefix[:-len("model.")] if prefix.endswith("model.") else ""
    if not (excluded("lm_head") or excluded(f"{root}lm_head")):
        raise _err(where, f"quantizes lm_head ({spec.quantization}); an LM head in that format is not modeled")
    spec2 = dataclasses.replace(spec, bf16_parts=",".join(sorted(bf16)))
    if spec.linear_layers or spec.global_head_dim or spec.chunked_layers:
        mixed = [p for p in ("attention", "o_proj", "linear_attention") if part_format(spec2, p) != "bf16"
                 and (p != "linear_attention" or spec.linear_layers)]
        if mixed:
            raise _err(where, f"quantizes the {', '.join(mixed)} projections ({spec.quantization}) of a hybrid or "
                       "sliding/global-layer model; only bf16 attention projections are modeled there")
    if spec.quantization == "modelopt" and spec.is_moe:
        raise _err(where, "ModelOpt FP8 (per-tensor) experts: their fused-MoE kernel is not registered; modeled for "
                   "dense models")
    return {"bf16_parts": spec2.bf16_parts, "kv_cache_dtype": kv_format(q) or spec.kv_cache_dtype}


def _layer_types(text: Mapping, spec):
    """A hybrid model's layer types (``linear_attention`` / ``full_attention``), else None."""
    if not spec.linear_layers:
        return None
    types = text.get("layer_types")
    if isinstance(types, list) and len(types) == spec.num_layers:
        return types
    n = text.get("full_attention_interval") or 4
    return ["full_attention" if (i + 1) % n == 0 else "linear_attention" for i in range(spec.num_layers)]


def _compressed_tensors_parts(q: Mapping, spec, where: str) -> str:
    """W4A16 int4: the checkpoint must leave everything but the routed experts unquantized (its ``ignore``)."""
    ignore = [str(p) for p in q.get("ignore") or []]
    need = {"lm_head": "lm_head", "attention": "self_attn", "shared_experts": "shared_experts",
            "dense_mlp": "mlp.gate_proj"}
    for part, mod in need.items():
        if part == "shared_experts" and not spec.shared_ffn_size:
            continue
        if part == "dense_mlp" and not spec.dense_layers:
            continue
        ok = any(p == mod or (p.startswith("re:") and _re_match(p[3:], f"model.layers.0.{mod}.weight"))
                 for p in ignore) or mod == "lm_head" and "lm_head" in ignore
        if not ok:
            raise _err(where, f"compressed-tensors int4 quantizes the {part} too; only int4 routed experts are "
                       "modeled")
    if not spec.is_moe:
        raise _err(where, "compressed-tensors int4 on a dense model: its W4A16 GEMMs have no measured rows")
    return ""


def _re_match(pattern: str, name: str) -> bool:
    import re

    try:
        return re.match(pattern, name) is not None
    except re.error:
        return False
