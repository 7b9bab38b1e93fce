"""``eagle``: an EAGLE head (vLLM's ``method: eagle``), sequential passes at the target's TP.

The head (:mod:`~vidur_specdec.speculation.proposers.heads`) is one decoder layer at the
target's width fed by the target's hidden states. Each pass of
:mod:`~vidur_specdec.speculation.proposers.head_cost` (pass 1: catch-up tokens and prompt
chunks; then one pass per guess, or per token-tree level) costs, in ms:

* the layer's linear ops over the pass's tokens, read from the **target's own**
  fitted operator model (same per-layer ops, same width, same TP) — times the
  head's layer count;
* the layer's attention over the head's own KV, priced by the verify-attention
  policy (a pass with q tokens per request is a multi-query read, as a verify is);
* the input projection ``fc`` (``fc_in_factor·hidden → hidden``, replicated on
  every GPU), priced by the calibrated GEMM model — every pass for EAGLE
  (embedding ⊕ feature), the first only for EAGLE-3;
* the LM head over the pass's logit rows (:func:`vidur_specdec.costs.lm_head.lm_head_ms`,
  vocabulary split over TP): EAGLE's is the target's full vocabulary.

plus what vLLM adds to every pass (:class:`~vidur_specdec.speculation.proposers.head_cost.PassOverheads`):
its CUDA-graph replay (or, with ``engine.enforce_eager``, per-layer launches),
the input preparation before it, the argmax (or sampling) of its guesses over
the LM head's rows, and for EAGLE-3 the draft-to-target vocabulary mapping on
every pass and the target's auxiliary hidden states on the first.
:meth:`EagleProposer.pass_parts` names each part (ms).
Head weights and KV (one layer's KV per token held) count against memory.
"""

from __future__ import annotations

from vidur_specdec.config.memo import BoundedMemo
from vidur_specdec.costs.lm_head import lm_head_ms
from vidur_specdec.speculation.proposers.base import _target_spec, Proposer, register
from vidur_specdec.speculation.proposers.head_cost import PassOverheads, attention_ms, draft_passes
from vidur_specdec.costs import verify_cost
from vidur_specdec.speculation.tree import parse_tree
from vidur_specdec.architectures.models import ModelSpec


def gemm_ms(kernels, rows: int, k: int, n: int) -> float:
    """A ``[rows × k] × [k × n]`` bf16 GEMM (ms) on one GPU by ``kernels`` (a KernelSource or a DeviceSpec),
    through its per-shape cache (the LM head's at TP 1)."""
    return lm_head_ms(kernels, k, n, 1, rows)


@register("eagle")
class EagleProposer(Proposer):
    """k sequential passes of an EAGLE-style head priced with the target's operator model."""

    label = "EAGLE"
    weights_key = "speculative.model"
    supports_tree = True
    fc_every_pass = True  # EAGLE: fc on every pass; EAGLE-3: first pass only
    drafter_forward = True  # k lookahead KV slots; a first pass even at a scheduled k = 0

    def __init__(self, head, target_time, verify, tree_levels=None, overheads=None) -> None:
        self.head = head
        self.target_time = target_time
        self.verify = verify
        self.tree_levels = list(tree_levels) if tree_levels else None
        self.overheads = overheads or PassOverheads()  # zeros: layers, fc and LM head only

    @classmethod
    def from_config(cls, cfg, target_time, cache_dir=None, **context):
        from vidur_specdec.speculation.proposers import heads

        target = _target_spec(cfg, context)
        head = heads.resolve(cfg, cls.name, target)
        tree = parse_tree(cfg.speculative.speculative_token_tree)
        p = cls(head, target_time, verify_cost.build(cfg.speculative), tree.levels if tree else None,
                PassOverheads.from_config(cfg))
        p.target_spec = target
        dep = context.get("deployment")
        p.ep = getattr(dep, "ep", 1) or 1
        return p

    target_spec = None  # the target's ModelSpec (set by from_config)
    ep = 1  # the target's expert-parallel size

    def _own_mlp(self) -> bool:
        """True for a dense head on an MoE target: the target's profile MLP ops are its experts', not the head's."""
        t = self.target_spec
        return t is not None and t.is_moe and not self.head.moe

    def mlp_ms(self, n: int, device, tp: int) -> float:
        """The head's own dense gated MLP over ``n`` tokens (ms): gate_up, SiLU·up, down at its width / tp.

        Priced by the run's kernel source (:meth:`kernels_on`) for a one-layer model of the head's shape
        (cached by n, device and tp).
        """
        cache = self.__dict__.setdefault("_mlp_cache", {})
        key = (n, device, tp)
        if key not in cache:
            h = self.head
            spec = ModelSpec(h.name, 1, h.hidden_size, h.num_heads, h.num_kv_heads, h.ffn_size, h.vocab_size,
                             head_dim=h.head_dim)
            ops = self.kernels_on(device).mlp_op_times(spec, tp, [n])
            cache[key] = float(sum(ops[k][0] for k in ("mlp_up_proj", "mlp_act", "mlp_down_proj")))
        return cache[key]

    def target_mlp_ms(self, n: int) -> float:
        """The target profile's MLP ops over ``n`` tokens (ms), the part a head with its own MLP replaces."""
        m = self.target_time
        return sum(m.linear_ms(op, n) for op in ("mlp_up_proj", "mlp_act", "mlp_down_proj"))

    def layer_mlp_ms(self, p, device, tp: int) -> float:
        """What replaces the target profile's MLP ops in one head layer of pass ``p`` (0 when nothing does)."""
        if not self._own_mlp():
            return 0.0
        return self.mlp_ms(p.tokens, device, tp) - self.target_mlp_ms(p.tokens)

    @classmethod
    def weights_name(cls, cfg, target):
        # lazy: start-up of `python -m vidur_specdec.main --help` (would load vidur_specdec.speculation.proposers.heads)
        from vidur_specdec.speculation.proposers import heads

        return heads.weights_name(cfg, cls.name, target)

    def memory_bytes(self, tp: int = 1):
        return self.head.memory_bytes(tp)

    def _device_tp(self):
        return self.bound_device_tp()

    def layers_per_pass(self) -> int:
        return self.head.num_layers

    def pass_parts(self, p, first: bool, device, tp: int) -> dict:
        """One pass by part (ms): ``layers`` (linear ops + attention, × the head's layers), ``all_reduce``,
        ``fc``, ``lm_head``, ``sample`` (argmax of the guesses), ``vocab_map`` (EAGLE-3's d2t), ``aux_hidden``
        (EAGLE-3, first pass), ``launch`` (graph replay or eager launches) and ``prepare`` (inputs)."""
        layers, (_, _, rest) = self._layers_ms(p, first, device, tp)
        parts = {"layers": layers}
        parts.update(rest)
        return parts

    def _layers_ms(self, p, first: bool, device, tp: int):
        """(the pass's ``layers`` part in ms, its memoised :meth:`_fixed_parts`)."""
        n = p.tokens
        # what depends on the pass's tokens, logits rows and place only (memoised: it is on every step's path)
        key = (n, p.rows, first, device, tp)
        memo = self.__dict__.get("_pass_memo")
        if memo is None:
            memo = self._pass_memo = BoundedMemo(65536)
        fixed = memo.get(key)
        if fixed is None:
            fixed = memo.put(key, self._fixed_parts(n, p.rows, first, device, tp))
        lin, wider = fixed[0], fixed[1]
        layer = lin + attention_ms(self.target_time, self.verify, p) + self.layer_mlp_ms(p, device, tp)
        if wider is not None:  # QKV projection reads a wider input: its GEMM is that much larger
            layer += wider
        return layer * self.layers_per_pass(), fixed

    def _fixed_parts(self, n: int, rows: int, first: bool, device, tp: int) -> tuple:
        """(the target profile's linear ops over ``n`` tokens, the wider QKV input's extra or None, the parts
        after ``layers`` in :meth:`pass_parts`' order) of a pass of ``n`` tokens and ``rows`` logits rows."""
        m, h = self.target_time, self.head
        o = self.overheads.bound(device)
        wider = (h.attn_in_factor - 1) * m.linear_ms("attn_pre_proj", n) if h.attn_in_factor > 1 else None
        rest = {"all_reduce": 0.0, "fc": 0.0}
        ctx = getattr(self, "ctx", None)
        if ctx is not None:  # the head's layers run at the target's TP: two all-reduces per layer per pass
            rest["all_reduce"] = 2 * self.layers_per_pass() * ctx.all_reduce_ms(n, h.hidden_size, tp)
        kernels = self.kernels_on(device)
        if first or self.fc_every_pass:
            rest["fc"] = gemm_ms(kernels, n, h.fc_in_factor * h.hidden_size, h.hidden_size)
        rest["lm_head"] = lm_head_ms(kernels, h.hidden_size, h.output_vocab, tp, rows)
        rest["sample"] = o.sample_ms(rows, h.vocab_size)  # EAGLE-3's mapped logits span the full vocabulary
        rest["vocab_map"] = o.vocab_map_ms(rows, h.output_vocab, h.vocab_size)
        rest["aux_hidden"] = o.aux_hidden_ms(n, h.hidden_size) if first and h.fc_in_factor == 3 else 0.0
        rest["launch"] = o.launch_ms(self.layers_per_pass())
        rest["prepare"] = o.prepare_ms + (o.first_ms if first else 0.0)
        return m.linear_sum_ms(n), wider, rest

    def pass_ms(self, p, first: bool, device, tp: int) -> float:
        """One pass (ms): the sum of :meth:`pass_parts`, in its order (without building the record)."""
        total, fixed = self._layers_ms(p, first, device, tp)
        for v in fixed[2].values():
            total += v
        return total

    def step_time_ms(self, comp) -> float:
        device, tp = self._device_tp()
        passes = self.passes(comp)
        return sum(self.pass_ms(p, i == 0, device, tp) for i, p in enumerate(passes))

    def passes(self, comp) -> list:
        """The step's passes (:func:`draft_passes`), kept for the few steps last asked about: a data-parallel
        group reads each rank's twice (its drafter's time, then its MoE passes over every rank)."""
        memo = self.__dict__.get("_passes_memo")
        if memo is None:
            memo = self._passes_memo = BoundedMemo(64)
        return memo.of(comp, lambda: draft_passes(comp, self.tree_levels))
