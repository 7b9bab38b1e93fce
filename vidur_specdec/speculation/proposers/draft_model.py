"""``draft_model``: a small model run as sequential decode passes (vLLM's ``method: draft_model``).

Timed by the drafter's own fitted :class:`~vidur_specdec.engine.reference.predictor.OperatorTimeModel`
(``speculative.draft_model``, profiles from ``speculative.draft_profiles`` or
``profiles``) times its layer count, over the passes of
:mod:`~vidur_specdec.speculation.proposers.head_cost`: pass 1 carries every drafting
request's catch-up tokens (accepted + 1 from its previous step) and the step's
prompt chunks (the drafter prefills prompts too, so its prefill lands in TTFT);
pass j carries the requests proposing at least j guesses. Each pass also runs
the drafter's LM head (:func:`vidur_specdec.costs.lm_head.lm_head_ms`, its full
vocabulary, split over the target's TP as vLLM requires draft TP = target TP or 1)
on one row per drafting request, and what vLLM adds to every pass
(:class:`~vidur_specdec.speculation.proposers.head_cost.PassOverheads`: graph replay or eager
launches, input preparation, the argmax of the guesses). The drafter's weights
and KV (one draft block per target block) count against memory.
"""

from __future__ import annotations

from vidur_specdec.costs.lm_head import lm_head_ms
from vidur_specdec.speculation.proposers.base import Proposer, register
from vidur_specdec.speculation.proposers.head_cost import PassOverheads, attention_ms, draft_passes
from vidur_specdec.costs import verify_cost


@register("draft_model")
class DraftModelProposer(Proposer):
    """k sequential decode passes of a drafter (plus its prefill of the step's prompt chunks)."""

    label = "draft model"
    weights_key = "speculative.draft_model"
    drafter_forward = True  # k lookahead KV slots; a first pass even at a scheduled k = 0

    def __init__(self, model, num_layers: int, verify=None, spec=None) -> None:
        self.model = model  # OperatorTimeModel of the drafter
        self.num_layers = num_layers
        self.verify = verify or verify_cost.SharedKV()
        self.draft_spec = spec  # ModelSpec of the drafter (LM head size, memory); None: no LM head priced
        self.max_context = spec.max_model_len if spec is not None else None
        self.overheads = PassOverheads()  # zeros until from_config sets the engine's

    @classmethod
    def from_config(cls, cfg, target_time, cache_dir=None, **context):
        dep, draft_time = context.get("deployment"), context.get("draft_time")
        if dep is None or draft_time is None:  # the engine resolves both once (engine.deployment.time_models)
            raise ValueError("draft_model needs the resolved deployment and the drafter's fitted time model "
                             "(context keys deployment and draft_time)")
        p = cls(draft_time, dep.draft.num_layers, verify_cost.build(cfg.speculative), dep.draft)
        p.draft_tp = dep.draft_tp
        p.overheads = PassOverheads.from_config(cfg)
        return p

    @classmethod
    def weights_name(cls, cfg, target):
        return cfg.speculative.draft_model

    def memory_bytes(self, tp: int = 1):
        return 0, 0  # counted by memory.plan(draft=...) as a whole model

    def _lm_head_ms(self, rows: int) -> float:
        if self.draft_spec is None or rows <= 0:
            return 0.0
        ctx = getattr(self, "ctx", None)
        if ctx is None or ctx.device is None:
            return 0.0
        return lm_head_ms(self.kernels_on(ctx.device), self.draft_spec.hidden_size, self.draft_spec.vocab_size,
                          getattr(self, "draft_tp", ctx.tensor_parallel_size), rows)

    def pass_parts(self, p, first: bool = False) -> dict:
        """One pass by part (ms): ``layers``, ``all_reduce``, ``lm_head``, ``sample``, ``launch``, ``prepare``."""
        m = self.model
        ctx = getattr(self, "ctx", None)
        o = self.overheads.bound(ctx.device if ctx is not None else None)
        hidden = self.draft_spec.hidden_size if self.draft_spec is not None else 0
        rows = p.rows if p.q else 0  # as the LM head: a prompt-only pass is priced without logits
        parts = {"layers": (m.linear_sum_ms(p.tokens) + attention_ms(m, self.verify, p)) * self.num_layers,
                 "all_reduce": 0.0}
        if ctx is not None and hidden:  # at draft TP > 1: two all-reduces per drafter layer per pass
            parts["all_reduce"] = 2 * ctx.all_reduce_ms(p.tokens, hidden, getattr(self, "draft_tp", None)) \
                * self.num_layers
        parts["lm_head"] = self._lm_head_ms(p.rows if p.q else 0)
        parts["sample"] = o.sample_ms(rows, self.draft_spec.vocab_size) if self.draft_spec is not None else 0.0
        parts["launch"] = o.launch_ms(self.num_layers)
        parts["prepare"] = o.prepare_ms + (o.first_ms if first else 0.0)
        return parts

    def step_time_ms(self, comp) -> float:
        return sum(sum(self.pass_parts(p, i == 0).values()) for i, p in enumerate(draft_passes(comp)))
