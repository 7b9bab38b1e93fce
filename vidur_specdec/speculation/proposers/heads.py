"""Draft heads that run on the target's GPUs: EAGLE, EAGLE-3, MTP and Medusa, by name or from YAML.

``speculative.model`` (vLLM's key for the drafter / head checkpoint) names a
head below by its Hugging Face name, or is the path of a YAML file with the
fields of :class:`HeadSpec`; null takes the known head of ``speculative.method``
for the target (matched by ``targets``). Dimensions are the checkpoints'
``config.json`` values.

An EAGLE-family head is ``num_layers`` decoder layers at the target's width
(priced by the target's own operator model, so the layer shape must equal the
target's), fed through an input projection ``fc`` of ``fc_in_factor × hidden →
hidden`` (EAGLE: token embedding ⊕ target feature, 2×; EAGLE-3: three target
layers' features, 3×, only on the first pass); EAGLE-3's attention input is
``attn_in_factor = 2`` × hidden (embedding ⊕ hidden), doubling its QKV
projection. EAGLE and MTP share the target's LM head (full vocabulary);
EAGLE-3 has its own over ``draft_vocab_size`` tokens. A Medusa head is
``num_heads`` parallel residual blocks (hidden → hidden) each with its own LM
head over the full vocabulary. A block drafter (DFlash, DSpark) is
``num_layers`` decoder layers of its own shape fed, through ``fc``
(``aux_layers × hidden → hidden``), the hidden states of ``aux_layers`` target
layers; it proposes up to ``block_size`` positions in one pass (DSpark adds a
rank-``markov_rank`` sequential head) and, like EAGLE-3, may have its own LM
head over ``draft_vocab_size`` tokens.
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Optional, Tuple


from vidur_specdec.config import ConfigError
from vidur_specdec.costs.profiles.params import DTYPE_BYTES
from vidur_specdec.config.files import parse_yaml_text  # duplicate keys refused, as in any config file

BLOCK_METHODS = ("dflash", "dspark")  # block drafters: their layers are priced at their own shape


@dataclass(frozen=True)
class HeadSpec:
    """One draft head's shape (counts, not bytes)."""

    name: str
    method: str  # eagle | eagle3 | mtp | medusa
    hidden_size: int
    num_heads: int = 0  # attention query heads (EAGLE-family)
    num_kv_heads: int = 0
    ffn_size: int = 0
    num_layers: int = 1  # decoder layers per pass (EAGLE-family); MTP: stacked modules; Medusa: residual blocks per head
    vocab_size: int = 32000  # the target's vocabulary (embedding and, if shared, LM head)
    draft_vocab_size: Optional[int] = None  # EAGLE-3: its own LM head's vocabulary
    medusa_heads: int = 0  # Medusa: parallel heads (max guesses)
    targets: Tuple[str, ...] = ()  # target models it is the default head of (speculative.model null)
    head_dim_override: int = 0  # attention head width when not hidden / heads (gpt-oss 64, Qwen3 128)
    moe: bool = False  # MTP of an MoE target: the module's decoder layer is an MoE layer with its own experts
    trained_for: str = ""  # the target whose hidden states it was trained on (its model card); "" unknown
    aux_layers: int = 0  # block drafters: target layers whose hidden states feed fc (len(target_layer_ids))
    block_size: int = 0  # block drafters: positions one drafter pass was trained to fill (config.json block_size)
    markov_rank: int = 0  # DSpark: rank of its sequential Markov head (config.json markov_rank)

    @property
    def is_block(self) -> bool:
        """A block drafter (DFlash, DSpark): one pass proposes the whole block."""
        return self.method in BLOCK_METHODS

    @property
    def head_dim(self) -> int:
        return self.head_dim_override or self.hidden_size // self.num_heads

    @property
    def fc_in_factor(self) -> int:
        if self.is_block:
            return self.aux_layers
        return 3 if self.method == "eagle3" else 2

    @property
    def attn_in_factor(self) -> int:
        return 2 if self.method == "eagle3" else 1

    @property
    def output_vocab(self) -> int:
        """Vocabulary of the LM head a pass runs (EAGLE-3: the reduced draft vocabulary)."""
        if self.method == "eagle3":
            return self.draft_vocab_size or 32000
        if self.is_block and self.draft_vocab_size:
            return self.draft_vocab_size
        return self.vocab_size

    def layer_params(self, tp: int = 1) -> int:
        """Weights of one head decoder layer on one of ``tp`` GPUs (QKV with its wider input, O, gated MLP)."""
        h, d = self.hidden_size, self.head_dim
        q, kv = self.num_heads // tp, -(-self.num_kv_heads // tp)
        return self.attn_in_factor * h * d * (q + 2 * kv) + h * d * q + 3 * h * self.ffn_size // tp

    def memory_bytes(self, tp: int = 1) -> Tuple[int, int]:
        """(weight bytes, KV bytes per token) on one GPU; embeddings and shared LM heads are the target's."""
        h = self.hidden_size
        if self.method == "medusa":
            per_head = self.num_layers * h * h + self.vocab_size * h // tp
            return DTYPE_BYTES * self.medusa_heads * per_head, 0
        params = self.num_layers * self.layer_params(tp) + self.fc_in_factor * h * h  # fc replicated
        if self.method == "eagle3" or (self.is_block and self.output_vocab != self.vocab_size):
            params += self.output_vocab * h // tp  # its own LM head (a full-vocabulary one is the target's)
        if self.markov_rank:  # DSpark's Markov head: w1 (vocab x r) and w2 (r x draft vocab), replicated
            params += self.markov_rank * (self.vocab_size + self.output_vocab)
        kv = 2 * DTYPE_BYTES * self.head_dim * -(-self.num_kv_heads // tp) * self.num_layers
        return DTYPE_BYTES * params, kv


_L2_7B = ("meta-llama/Llama-2-7b-hf", "meta-llama/Llama-2-7b-chat-hf")
_L2_13B = ("meta-llama/Llama-2-13b-hf", "meta-llama/Llama-2-13b-chat-hf")
_L2_70B = ("meta-llama/Llama-2-70b-hf", "meta-llama/Llama-2-70b-chat-hf")
_L31_8B = ("meta-llama/Llama-3.1-8B-Instruct", "meta-llama/Llama-3.1-8B", "meta-llama/Meta-Llama-3.1-8B-Instruct")
_L3_70B = ("meta-llama/Llama-3.1-70B-Instruct", "meta-llama/Llama-3.3-70B-Instruct",
           "meta-llama/Meta-Llama-3-70B-Instruct", "meta-llama/Llama-3.1-70B")

KNOWN_HEADS = {
    h.name: h
    for h in (
        # EAGLE (Li et al. 2024) heads for Llama-2-chat: one decoder layer at the target's shape
        HeadSpec("yuhuili/EAGLE-llama2-chat-7B", "eagle", 4096, 32, 32, 11008, 1, 32000, targets=_L2_7B,
                 trained_for="meta-llama/Llama-2-7b-chat-hf"),
        HeadSpec("yuhuili/EAGLE-llama2-chat-13B", "eagle", 5120, 40, 40, 13824, 1, 32000, targets=_L2_13B,
                 trained_for="meta-llama/Llama-2-13b-chat-hf"),
        HeadSpec("yuhuili/EAGLE-llama2-chat-70B", "eagle", 8192, 64, 8, 28672, 1, 32000, targets=_L2_70B,
                 trained_for="meta-llama/Llama-2-70b-chat-hf"),
        # EAGLE heads for Llama-3.x (GQA, 128k vocabulary)
        HeadSpec("yuhuili/EAGLE-LLaMA3.1-Instruct-8B", "eagle", 4096, 32, 8, 14336, 1, 128256, targets=_L31_8B,
                 trained_for="meta-llama/Llama-3.1-8B-Instruct"),
        HeadSpec("yuhuili/EAGLE-LLaMA3-Instruct-70B", "eagle", 8192, 64, 8, 28672, 1, 128256, targets=_L3_70B,
                 trained_for="meta-llama/Meta-Llama-3-70B-Instruct"),
        # EAGLE-3 (Li et al. 2025): fused 3-layer features, reduced 32k draft vocabulary
        HeadSpec("yuhuili/EAGLE3-LLaMA3.1-Instruct-8B", "eagle3", 4096, 32, 8, 14336, 1, 128256, 32000,
                 targets=_L31_8B, trained_for="meta-llama/Llama-3.1-8B-Instruct"),
        HeadSpec("yuhuili/EAGLE3-LLaMA3.3-Instruct-70B", "eagle3", 8192, 64, 8, 28672, 1, 128256, 32000,
                 targets=_L3_70B, trained_for="meta-llama/Llama-3.3-70B-Instruct"),
        # Red Hat's EAGLE-3 speculator for Llama-3.1-8B-Instruct (vllm-project/speculators format): one Llama
        # layer at the target's shape, 32,000-token draft vocabulary (the converted config.json shown in
        # vllm-project/speculators PR #53: hidden 4096, intermediate 14336, 1 layer, draft_vocab_size 32000);
        # the head vLLM's acceptance-length test pins (tests/v1/spec_decode/test_acceptance_length.py)
        HeadSpec("RedHatAI/Llama-3.1-8B-Instruct-speculator.eagle3", "eagle3", 4096, 32, 8, 14336, 1, 128256,
                 32000, targets=_L31_8B, trained_for="meta-llama/Llama-3.1-8B-Instruct"),
        # EAGLE-3 heads for mixture-of-experts targets: one dense Llama layer (its own gated MLP, priced by
        # its own width), 32,000-token draft vocabulary. Names: SGLang's speculative-decoding docs table
        # (sgl-project/sglang, docs/advanced_features/speculative_decoding.md) and its gpt-oss config
        # generator; dimensions: the SpecForge training configs of these heads (sgl-project/SpecForge
        # configs/gpt-oss-120B-eagle3.json, gpt-oss-20B-eagle3.json, qwen3-30B-A3B-eagle3.json,
        # qwen3-235B-A22B-eagle3.json @ a6b6b023: hidden, heads / KV heads / head_dim, intermediate_size).
        HeadSpec("lmsys/EAGLE3-gpt-oss-120b-bf16", "eagle3", 2880, 64, 8, 17280, 1, 201088, 32000,
                 targets=("openai/gpt-oss-120b",), head_dim_override=64,
                 trained_for="openai/gpt-oss-120b"),
        HeadSpec("zhuyksir/EAGLE3-gpt-oss-20b-bf16", "eagle3", 2880, 64, 8, 17280, 1, 201088, 32000,
                 targets=("openai/gpt-oss-20b",), head_dim_override=64,
                 trained_for="openai/gpt-oss-20b"),
        HeadSpec("Tengyunw/qwen3_30b_moe_eagle3", "eagle3", 2048, 32, 4, 12288, 1, 151936, 32000,
                 targets=("Qwen/Qwen3-30B-A3B",), head_dim_override=128,
                 trained_for="Qwen/Qwen3-30B-A3B"),
        HeadSpec("lmsys/Qwen3-235B-A22B-EAGLE3", "eagle3", 4096, 64, 4, 24576, 1, 151936, 32000,
                 targets=("Qwen/Qwen3-235B-A22B",), head_dim_override=128,
                 trained_for="Qwen/Qwen3-235B-A22B"),
        # DFlash (Chen et al. 2026, arXiv 2602.06036) block drafter for Llama-3.1-8B-Instruct: 5 Qwen3-style
        # layers at the target's width fed 5 target layers' hidden states (num_hidden_layers 5, target_layer_ids
        # [1, 8, 15, 22, 29]: the Llama DFlash test of a tpu-inference fork, aaronzhfeng/tpu-inference
        # tests/models/jax/test_llama_dflash.py @ d2582384); its model card's vLLM command serves it with
        # num_speculative_tokens 9, i.e. a 10-position block (1 + k queries); the target's LM head and
        # embedding (no own lm_head). intermediate_size is taken as the target's 14336 (not read: see docs).
        HeadSpec("z-lab/LLaMA3.1-8B-Instruct-DFlash-UltraChat", "dflash", 4096, 32, 8, 14336, 5, 128256,
                 targets=_L31_8B, trained_for="meta-llama/Llama-3.1-8B-Instruct", aux_layers=5, block_size=10),
        # DSpark for Qwen3-8B, released with DeepSpec (deepseek-ai/DeepSpec README.md @ 00eec8db, "Released
        # Checkpoints"; vLLM's config comments name it too): the draft config is a copy of the target's
        # (deepspec/modeling/dspark/qwen3/config.py @ 041b6523: Qwen3-8B's 4096 width, 32 / 8 heads of 128,
        # ffn 12288, vocabulary) with 5 layers, block 7, Markov rank 256 and target layers [1, 9, 17, 25, 33]
        # (the Qwen3 DSpark training config, config/dspark/dspark_qwen3_4b_online.py @ 8c483c78).
        HeadSpec("deepseek-ai/dspark_qwen3_8b_block7", "dspark", 4096, 32, 8, 12288, 5, 151936,
                 targets=("Qwen/Qwen3-8B",), head_dim_override=128, trained_for="Qwen/Qwen3-8B",
                 aux_layers=5, block_size=7, markov_rank=256),
        # Medusa-1 heads (Cai et al. 2024) for Vicuna-7B (Llama-2-7B shape): 5 heads, one residual block each
        HeadSpec("FasterDecoding/medusa-vicuna-7b-v1.3", "medusa", 4096, num_layers=1, vocab_size=32000,
                 medusa_heads=5, targets=_L2_7B,
                 trained_for="lmsys/vicuna-7b-v1.3"),
    )
}


HEAD_METHODS = ("eagle", "eagle3", "mtp", "medusa", "dflash", "dspark")  # the methods a HeadSpec describes


def head_from_mapping(d, where: str) -> HeadSpec:
    """A HeadSpec from a YAML mapping; ConfigError naming ``where`` on a bad field."""
    names = {f.name for f in fields(HeadSpec)}
    if not isinstance(d, dict):
        raise ConfigError(f"{where}: must hold a mapping of head fields ({', '.join(sorted(names))})")
    unknown = sorted(set(d) - names)
    if unknown:
        raise ConfigError(f"{where}: unknown head field {unknown[0]}; allowed: {', '.join(sorted(names))}")
    for key in ("method", "hidden_size"):  # the fields without a default
        if d.get(key) is None:
            raise ConfigError(f"{where}: missing head field {key!r} (needs method and hidden_size)")
    if d["method"] not in HEAD_METHODS:
        raise ConfigError(f"{where}: method must be one of {', '.join(HEAD_METHODS)}, got {d['method']!r}")
    d = dict(d)
    d.setdefault("name", where.split(": ", 1)[-1])  # the file, not "speculative.model: <file>" (named twice)
    d["targets"] = tuple(d.get("targets") or ())
    for k in ("hidden_size", "num_heads", "num_kv_heads", "ffn_size", "num_layers", "vocab_size",
              "draft_vocab_size", "medusa_heads", "aux_layers", "block_size", "markov_rank", "head_dim_override"):
        v = d.get(k)
        if v is not None and (not isinstance(v, int) or isinstance(v, bool) or v < 0):
            raise ConfigError(f"{where}: {k} must be a non-negative integer, got {v!r}")
    if d["method"] in BLOCK_METHODS:
        for key in ("num_heads", "num_kv_heads", "ffn_size", "aux_layers", "block_size"):
            if not d.get(key):
                raise ConfigError(f"{where}: a {d['method']} head needs {key} (a positive integer from its config.json)")
        if d["method"] == "dspark" and not d.get("markov_rank"):
            raise ConfigError(f"{where}: a dspark head needs markov_rank (a positive integer from its config.json)")
    head = HeadSpec(**d)
    check_head_shape(head, where)
    return head


def check_head_shape(head: HeadSpec, where: str) -> None:
    """The head's own shape, as vLLM 0.33 would build it; one ConfigError naming ``where`` and the field.

    * at least one layer (``num_layers``; Medusa: ``medusa_heads``): vLLM builds ``num_hidden_layers`` decoder
      layers (``llama_eagle.py``, ``llama_eagle3.py``, ``qwen3_dflash.py``) and ``num_heads`` Medusa heads
      (``medusa.py``); with none there is nothing to propose from;
    * attention heads that group evenly: ``num_heads % num_kv_heads == 0`` (the ``Attention`` layer asserts it,
      ``model_executor/layers/attention/attention.py``), and a width the heads divide unless the config gives
      ``head_dim`` (``head_dim_override``; vLLM's ``head_dim or hidden_size // num_heads``);
    * a block drafter's block holds at least one guess (``block_size`` >= 2: the bonus token and k masks);
    * an own LM head no larger than the target vocabulary it maps into (``draft_vocab_size`` <= ``vocab_size``:
      EAGLE-3's and DFlash's ``d2t`` map each draft token to a target token).
    """
    if head.method == "medusa":
        if head.medusa_heads < 1 or head.num_layers < 1:
            raise ConfigError(f"{where}: a medusa head needs medusa_heads >= 1 and num_layers >= 1 residual blocks "
                              f"(vLLM 0.33 medusa.py builds that many), got {head.medusa_heads} and {head.num_layers}")
        return
    if head.num_layers < 1:
        raise ConfigError(f"{where}: num_layers must be >= 1, got {head.num_layers} (vLLM 0.33 builds "
                          f"num_hidden_layers decoder layers for a {head.method} head, llama_eagle.py / "
                          "qwen3_dflash.py; with none there is nothing to propose from)")
    if head.num_heads < 1 or head.num_kv_heads < 1:
        raise ConfigError(f"{where}: num_heads and num_kv_heads must be >= 1, got {head.num_heads} and "
                          f"{head.num_kv_heads}")
    if head.num_heads % head.num_kv_heads:
        raise ConfigError(f"{where}: num_heads {head.num_heads} is not a multiple of num_kv_heads {head.num_kv_heads} "
                          "(vLLM 0.33 model_executor/layers/attention/attention.py asserts it)")
    if not head.head_dim_override and head.hidden_size % head.num_heads:
        raise ConfigError(f"{where}: hidden_size {head.hidden_size} is not a multiple of num_heads {head.num_heads}; "
                          "give head_dim_override (the config.json's head_dim)")
    if head.is_block and head.block_size < 2:
        raise ConfigError(f"{where}: block_size must be >= 2 (a block holds the bonus token and at least one guess), "
                          f"got {head.block_size}")
    if head.draft_vocab_size is not None and not 1 <= head.draft_vocab_size <= head.vocab_size:
        raise ConfigError(f"{where}: draft_vocab_size {head.draft_vocab_size} must be in [1, vocab_size "
                          f"{head.vocab_size}] (each draft token maps to a target token, vLLM 0.33 llama_eagle3.py d2t)")


def check_head_on_target(head: HeadSpec, target, tp: int, key: str = "speculative.model") -> None:
    """What vLLM 0.33 checks between a block drafter and its target, one ConfigError naming ``key``:
    ``aux_layers`` (``len(target_layer_ids)``) target layers must exist (``qwen3_dflash.py``
    ``combine_hidden_states`` refuses target_layer_ids that reference layers the target lacks), and the
    drafter's heads must split over the target's tensor-parallel GPUs (``DFlashQwen3Attention``:
    ``total_num_heads % tp == 0``; KV heads divisible by tp, or tp by them)."""
    if not head.is_block:
        return
    if head.aux_layers > target.num_layers:
        raise ConfigError(f"{key}: {head.name} reads the hidden states of {head.aux_layers} target layers "
                          f"(aux_layers, len(target_layer_ids)), but {target.name} has {target.num_layers}; vLLM "
                          "0.33 qwen3_dflash.py refuses target_layer_ids beyond the target's layers")
    kv = head.num_kv_heads
    if head.num_heads % tp or (kv % tp if kv >= tp else tp % kv):
        raise ConfigError(f"parallel.tensor_parallel_size: {tp} does not split {head.name}'s {head.num_heads} query / "
                          f"{kv} KV heads (vLLM 0.33 qwen3_dflash.py DFlashQwen3Attention asserts it); use a "
                          "tensor_parallel_size that divides them")


def resolve(cfg, method: str, target) -> HeadSpec:
    """The head a run uses: ``speculative.model`` (name or YAML) or the known head for the target."""
    name = cfg.speculative.model
    key = "speculative.model"
    if name is None:
        found = [h for h in KNOWN_HEADS.values() if h.method == method and target.name in h.targets]
        if found:
            head = found[0]
        elif method == "mtp" and getattr(target, "global_head_dim", 0):
            raise ConfigError(f"speculative.method: {target.name}'s MTP drafter is a separate assistant checkpoint "
                              "(vLLM 0.33 gemma4_mtp.py: its own width, Q-only layers on the target's KV), which is "
                              "not modeled; use ngram or draft_model")
        elif method == "mtp" and target.is_moe:
            if not target.mtp_layers:
                raise ConfigError(f"speculative.method: {target.name} ships no MTP modules "
                                  "(config.json num_nextn_predict_layers); use eagle3, ngram or draft_model")
            # DeepSeek-V3/R1's own MTP module(s): one decoder layer each with its own routed and shared
            # experts (the target's MoE layer shape), embedding and LM head shared with the target
            head = HeadSpec(f"{target.name} MTP", "mtp", target.hidden_size, target.num_heads, target.num_kv_heads,
                            target.ffn_size, target.mtp_layers, target.vocab_size,
                            head_dim_override=target.head_dim, moe=True)
        elif method == "mtp" and target.mtp_layers:
            # a dense target's own MTP layers (MiMo, Qwen3.5-27B: vLLM 0.33 mimo_mtp.py, qwen3_5_mtp.py): one decoder
            # layer each at the target's shape (its explicit head size), embedding and LM head shared
            head = HeadSpec(f"{target.name} MTP", "mtp", target.hidden_size, target.num_heads, target.num_kv_heads,
                            target.ffn_size, target.mtp_layers, target.vocab_size, head_dim_override=target.head_dim)
        elif method in ("mtp", "medusa"):  # no published Llama heads: one module / five heads at the target's shape
            head = HeadSpec(f"{method} head for {target.name}", method, target.hidden_size, target.num_heads,
                            target.num_kv_heads, target.ffn_size, 1, target.vocab_size,
                            medusa_heads=5 if method == "medusa" else 0, head_dim_override=target.head_dim)
        else:
            known = [h.name for h in KNOWN_HEADS.values() if h.method == method]
            raise ConfigError(f"{key}: no known {method} head for {target.name}; name one of "
                              f"{', '.join(known)} or a YAML file of head fields")
    elif name in KNOWN_HEADS:
        head = KNOWN_HEADS[name]
    elif name.endswith((".yaml", ".yml")) or Path(name).is_file():
        p = Path(name).expanduser()
        if not p.is_file():
            raise ConfigError(f"{key}: file not found: {p}")

        try:
            text = p.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            raise ConfigError(f"{key}: {p} is not valid YAML") from None
        head = head_from_mapping(parse_yaml_text(text, str(p), key), f"{key}: {p}")
    else:
        raise ConfigError(f"{key}: unknown head {name!r}; known: {', '.join(KNOWN_HEADS)}; or a YAML file")
    if head.method != method:
        raise ConfigError(f"{key}: {head.name} is a {head.method} head, but speculative.method is {method}")
    check_head_on_target(head, target, cfg.parallel.tensor_parallel_size, key)
    if head.hidden_size != target.hidden_size or head.vocab_size != target.vocab_size:
        raise ConfigError(f"{key}: {head.name} has hidden {head.hidden_size} / vocab {head.vocab_size}; "
                          f"the target {target.name} has {target.hidden_size} / {target.vocab_size}")
    own_mlp = target.is_moe and not head.moe  # a dense head on an MoE target: its MLP priced at its own width
    if method not in ("medusa",) + BLOCK_METHODS and ((head.num_heads, head.num_kv_heads, head.head_dim) != (
            target.num_heads, target.num_kv_heads, target.head_dim) or (not own_mlp and head.ffn_size != target.ffn_size)):
        raise ConfigError(f"{key}: {head.name}'s layer (heads {head.num_heads}, kv heads {head.num_kv_heads}, "
                          f"ffn {head.ffn_size}) differs from {target.name}'s; it is priced by the target's profile")
    if method == "eagle3" and cfg.speculative.draft_vocab_size is not None:
        head = replace(head, draft_vocab_size=cfg.speculative.draft_vocab_size)
    return head


def weights_name(cfg, method: str, target) -> Optional[str]:
    """A head's weights for vLLM's ``speculative_config["model"]``: ``speculative.model``, else the published
    head :func:`resolve` chooses for ``target`` (None for a generated one)."""
    if cfg.speculative.model:
        return cfg.speculative.model
    name = resolve(cfg, method, target).name
    return name if name in KNOWN_HEADS else None
