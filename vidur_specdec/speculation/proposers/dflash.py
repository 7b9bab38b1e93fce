"""``dflash``: a block-diffusion drafter (vLLM's ``method: dflash``): one pass proposes all k guesses.

What vLLM 0.33 runs each step (``vllm/v1/spec_decode/dflash.py``, the V2 runner's
``vllm/v1/worker/gpu/spec_decode/dflash/speculator.py``, the model
``vllm/model_executor/models/qwen3_dflash.py``), and what each part costs here (ms):

* **context** — the target's tokens of the step before (each decoding request's
  catch-up run, rejected positions kept as padding, and the step's prompt chunks):
  the target writes ``aux_layers`` layers' hidden states
  (:meth:`~vidur_specdec.speculation.proposers.head_cost.PassOverheads.aux_hidden_ms`),
  ``fc`` fuses them (``aux_layers·hidden → hidden``, replicated: one GEMM at TP 1), and
  ``precompute_and_store_context_kv`` projects them to every draft layer's K/V in one
  fused GEMM (``hidden → num_layers·2·kv_heads·head_dim``, the KV heads split over TP)
  plus the K-norm, RoPE and cache insert (one memory-bound pass over the K/V written).
  This runs outside the drafter's CUDA graph, and also on a scheduled k = 0 step
  (``num_speculative_tokens == 0``: the context is stored, the query pass skipped).
* **query pass** — one forward of ``num_layers`` decoder layers over
  ``queries_per_request(k)`` tokens per decoding request (DFlash: the bonus token and
  k mask tokens, 1 + k; every request carries the same count, the step's largest k,
  as vLLM's uniform-batch CUDA graph requires), non-causal attention over the
  drafter's KV (context + block), priced by the run's verify-attention policy at the
  drafter's heads; two all-reduces per layer at TP > 1.
* **logits** — the LM head over k rows per request (the target's, or the drafter's
  own ``draft_vocab_size`` one, with the draft-to-target scatter), and the argmax.
* **launch** — one graph replay (or per-layer eager launches) and the input
  preparation.

The drafter's own layers are priced through the run's kernel source at the
drafter's shape (a one-layer model of it), not through the target's profile.
Nothing is sequential in k: the query pass grows only by its token count, so at
small batch (weight-read bound GEMMs) the draft time per step is flat in k.
Weights (layers, fc, own LM head) and KV (every draft layer's K/V per context token)
count against memory.
"""

from __future__ import annotations

from vidur_specdec.architectures.models import ModelSpec
from vidur_specdec.config import ConfigError
from vidur_specdec.costs import verify_cost
from vidur_specdec.costs.lm_head import lm_head_ms
from vidur_specdec.costs.profiles.params import DTYPE_BYTES
from vidur_specdec.speculation.proposers.base import Proposer, _target_spec, guesses_of, register
from vidur_specdec.speculation.proposers.head_cost import PassOverheads

def gemm_ms(kernels, rows: int, k: int, n: int) -> float:
    """A ``[rows × k] × [k × n]`` bf16 GEMM (ms) on one GPU through ``kernels``' per-shape cache (as
    :func:`vidur_specdec.speculation.proposers.eagle.gemm_ms`; not imported from there, so that the
    registry's order stays the modules' alphabetical order)."""
    return lm_head_ms(kernels, k, n, 1, rows)


#: the per-layer ops of ``mlp_op_times`` one draft decoder layer runs (the embedding is counted once)
LAYER_OPS = ("input_layernorm", "attn_pre_proj", "attn_rope", "attn_post_proj", "post_attention_layernorm",
             "mlp_up_proj", "mlp_act", "mlp_down_proj", "add")


class _DraftAttention:
    """The drafter's attention at its own heads on one GPU, in the form the verify policies read
    (``decode_attention_ms(requests, mean_kv)``, ms per layer)."""

    def __init__(self, kernels, q_heads: int, kv_heads: int, head_dim: int) -> None:
        self.kernels, self.shape = kernels, (q_heads, kv_heads, head_dim)

    def decode_attention_ms(self, n, kv) -> float:
        return float(self.kernels.decode_attention_ms(n, kv, *self.shape))


@register("dflash")
class DFlashProposer(Proposer):
    """One parallel drafter pass per step over (1 + k) query tokens per request, after the context K/V."""

    label = "DFlash"
    weights_key = "speculative.model"
    drafter_forward = True  # runs every step on the GPU; the context K/V is stored even at a scheduled k = 0

    def __init__(self, head, verify=None, overheads=None) -> None:
        self.head = head
        self.verify = verify or verify_cost.SharedKV()
        self.overheads = overheads or PassOverheads()

    @classmethod
    def max_guesses(cls, head) -> int:
        """The largest k one block holds: DFlash's block is the bonus token and k masks (block_size − 1)."""
        return head.block_size - 1

    @classmethod
    def queries_per_request(cls, k: int) -> int:
        """Query tokens a request carries in the pass (DFlash: the bonus token and k masks)."""
        return k + 1

    @classmethod
    def num_lookahead_tokens(cls, k: int) -> int:
        """vLLM's lookahead KV slots: the block's query positions (``VllmConfig.num_lookahead_tokens``:
        k + 1 for DFlash, k for anchor-sampling DSpark; vllm/config/vllm.py)."""
        return cls.queries_per_request(int(k)) if k else 0

    @classmethod
    def from_config(cls, cfg, target_time, cache_dir=None, **context):
        # lazy: start-up of `python -m vidur_specdec.main --help` (would load vidur_specdec.speculation.proposers.heads)
        from vidur_specdec.speculation.proposers import heads

        head = heads.resolve(cfg, cls.name, _target_spec(cfg, context))
        k = cfg.speculative.num_speculative_tokens
        if k > cls.max_guesses(head):
            raise ConfigError(f"speculative.num_speculative_tokens: {head.name} was trained on blocks of "
                              f"{head.block_size}; {cls.name} proposes at most {cls.max_guesses(head)}, got {k}")
        return cls(head, verify_cost.build(cfg.speculative), PassOverheads.from_config(cfg))

    @classmethod
    def weights_name(cls, cfg, target):
        # lazy: start-up of `python -m vidur_specdec.main --help` (would load vidur_specdec.speculation.proposers.heads)
        from vidur_specdec.speculation.proposers import heads

        return heads.weights_name(cfg, cls.name, target)

    def memory_bytes(self, tp: int = 1):
        return self.head.memory_bytes(tp)

    # ------------------------------------------------------------------ parts
    def _spec(self) -> ModelSpec:
        h = self.head
        return ModelSpec(h.name, h.num_layers, h.hidden_size, h.num_heads, h.num_kv_heads, h.ffn_size,
                         h.vocab_size, head_dim=h.head_dim)

    def layer_ms(self, tokens: int, kernels, tp: int) -> float:
        """One draft decoder layer's linear, norm and activation ops over ``tokens`` (ms), at its own shape."""
        cache = self.__dict__.setdefault("_layer_cache", {})
        key = (tokens, id(kernels), tp)
        if key not in cache:
            ops = kernels.mlp_op_times(self._spec(), tp, [tokens])
            cache[key] = float(sum(ops[o][0] for o in LAYER_OPS if o in ops))
        return cache[key]

    def context_parts(self, n_ctx: int, kernels, tp: int, o) -> dict:
        """The context K/V of ``n_ctx`` target tokens by part (ms): ``aux_hidden``, ``fc``, ``context_kv``."""
        if n_ctx <= 0:
            return {"aux_hidden": 0.0, "fc": 0.0, "context_kv": 0.0}
        h = self.head
        kv_cols = h.num_layers * 2 * -(-h.num_kv_heads // tp) * h.head_dim
        written = n_ctx * kv_cols * DTYPE_BYTES  # K/V of every draft layer: normed, rotated, inserted
        return {"aux_hidden": o.aux_hidden_ms(n_ctx, h.hidden_size, h.aux_layers),
                "fc": gemm_ms(kernels, n_ctx, h.fc_in_factor * h.hidden_size, h.hidden_size),
                "context_kv": gemm_ms(kernels, n_ctx, h.hidden_size, kv_cols)
                + float(kernels.elementwise_ms(3 * written))}

    def sequential_ms(self, requests: int, k: int, kernels, o) -> float:
        """Work that runs once per guess after the pass (none for DFlash; DSpark's Markov head)."""
        return 0.0

    def step_parts(self, comp) -> dict:
        """One step's drafting by part (ms): the context parts, ``layers``, ``all_reduce``, ``lm_head``,
        ``sample``, ``vocab_map``, ``sequential``, ``launch`` and ``prepare``."""
        device, tp = self.bound_device_tp()
        kernels = self.kernels_on(device)
        o = self.overheads.bound(device)
        h = self.head
        guesses = guesses_of(comp)
        k = max(guesses, default=0)
        catch = list(getattr(comp, "decode_prev_q", None) or getattr(comp, "decode_catchup", None)
                     or [1] * len(guesses))
        sync = bool(getattr(comp, "drafter_sync", False)) and bool(guesses)
        n_ctx = (sum(max(1, c) for c in catch[:len(guesses)]) if (k > 0 or sync) else 0) \
            + sum(c for _, c in comp.prefill)
        parts = self.context_parts(n_ctx, kernels, tp, o)
        zero = ("layers", "all_reduce", "lm_head", "sample", "vocab_map", "sequential", "launch", "prepare")
        parts.update({p: 0.0 for p in zero})
        if n_ctx > 0:
            parts["prepare"] = o.prepare_ms + o.first_ms
        if k <= 0:
            return parts
        b = len(guesses)
        q = self.queries_per_request(k)
        n_q = b * q
        attn = self.verify.attention_ms(_DraftAttention(kernels, -(-h.num_heads // tp), -(-h.num_kv_heads // tp),
                                                        h.head_dim), [q] * b, list(comp.decode_ctx))
        parts["layers"] = h.num_layers * (self.layer_ms(n_q, kernels, tp) + attn)
        ctx = getattr(self, "ctx", None)
        if ctx is not None:
            parts["all_reduce"] = 2 * h.num_layers * ctx.all_reduce_ms(n_q, h.hidden_size, tp)
        rows = b * k
        parts["lm_head"] = lm_head_ms(kernels, h.hidden_size, h.output_vocab, tp, rows)
        parts["sample"] = o.sample_ms(rows, h.vocab_size)
        parts["vocab_map"] = o.vocab_map_ms(rows, h.output_vocab, h.vocab_size)
        parts["sequential"] = self.sequential_ms(b, k, kernels, o)
        parts["launch"] = o.launch_ms(h.num_layers)
        return parts

    def step_time_ms(self, comp) -> float:
        return sum(self.step_parts(comp).values())
