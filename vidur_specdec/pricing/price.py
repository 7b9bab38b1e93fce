"""What one step costs, in parts: the record the step pricer returns.

:class:`StepPrice` holds a step's (or one pipeline stage's) time split as a
real engine's step log splits it. ``verify_ms`` is the target's forward
through its layers (a step log's ``t_fwd_end - t_fwd``; tensor-parallel
all-reduces, a pipeline stage's send and a data-parallel group's all-to-all
included); ``comm_ms`` the all-reduces inside it, ``send_ms`` the stage's send
to the next stage, ``a2a_ms`` the MoE dispatch and combine and ``a2a_exposed_ms``
the part of it the step waits for (all of it unless dual-batch overlap hid some
under the other micro-batch's compute; each part of ``verify_ms``: the exposed
part counts, the hidden part runs beside the compute), ``draft_a2a_ms`` a
drafter's own MoE dispatch and combine (part of ``draft_ms``); ``lm_head_ms`` the
LM head and logits gather, ``sampling_ms``
the sampler, ``overhead_ms`` the engine's CPU work, ``draft_ms`` the proposer.
The step lasts ``duration_ms`` = verify + draft + LM head + sampling + overhead
(``total_time``, seconds, as Vidur's execution time reports it).

``layer_ops`` keeps the mean decoder layer's per-op times (ms, Vidur's
``ExecutionTime`` fields in its order) and ``num_layers`` the layers priced,
so the Vidur-backed engine can hand Vidur's own metrics store an
``ExecutionTime``; ``moe_ms`` is the MoE layers' share of ``verify_ms`` and
``experts_touched`` the mean distinct routed experts a MoE layer woke. A step
run as two micro-batches (:meth:`StepPrice.overlapped`) keeps the un-split step's
``layer_ops`` for the record; its ``verify_ms`` is the overlap schedule's.
"""

from __future__ import annotations

#: Vidur ``ExecutionTime`` fields after ``num_layers_per_pipeline_stage``, in its constructor's order (ms)
EXECUTION_TIME_FIELDS = ("attention_rope", "attention_kv_cache_save", "attention_decode", "attention_prefill",
             "attention_pre_proj", "attention_post_proj", "mlp_up_proj", "mlp_down_proj", "mlp_act", "attn_norm",
             "mlp_norm", "add", "tensor_parallel_communication", "pipeline_parallel_communication")


def layers_time_s(num_layers: int, ops) -> float:
    """The target's forward (s) from the mean layer's ops: Vidur's ``ExecutionTime.total_time``, the same sums in
    the same order (bit for bit: ``tests/test_step_price.py`` holds it to Vidur's native class)."""
    (rope, _save, decode, prefill, pre, post, up, down, act, attn_norm, mlp_norm, add, tp, pp) = ops
    attention = pre + post + rope + decode + prefill + tp + attn_norm
    mlp = up + down + act + tp + mlp_norm
    return ((attention + mlp + add) * num_layers + pp + 0) * 1e-3


class StepPrice:
    """One step's (or pipeline stage's) time in parts (module docstring); times in ms, ``total_time`` in s."""

    __slots__ = ("plan", "k", "num_layers", "layer_ops", "verify_ms", "draft_ms", "comm_ms", "lm_head_ms",
                 "sampling_ms", "overhead_ms", "moe_ms", "experts_touched", "send_ms", "a2a_ms", "a2a_exposed_ms",
                 "draft_a2a_ms", "split", "total_time", "dp")

    def __init__(self, plan, num_layers: int, layer_ops: tuple, draft_ms: float, comm_ms: float,
                 lm_head_ms: float = 0.0, sampling_ms: float = 0.0, overhead_ms: float = 0.0,
                 moe_ms: float = 0.0, experts_touched: float = 0.0) -> None:
        self.plan = plan
        self.k = plan.k  # the k the step's guesses were drawn with (0: none)
        self.num_layers = num_layers
        self.layer_ops = layer_ops
        target_s = layers_time_s(num_layers, layer_ops)
        self.verify_ms = target_s * 1e3
        self.draft_ms = draft_ms
        self.comm_ms = comm_ms
        self.lm_head_ms = lm_head_ms
        self.sampling_ms = sampling_ms
        self.overhead_ms = overhead_ms
        self.moe_ms = moe_ms
        self.experts_touched = experts_touched
        self.send_ms = layer_ops[13]  # this stage's send to the next (0: the last stage)
        self.a2a_ms = 0.0
        self.a2a_exposed_ms = 0.0
        self.draft_a2a_ms = 0.0
        self.split = 0  # 1: run as two micro-batches (dual-batch overlap)
        self.dp = None  # a data-parallel group: (slowest rank ms, mean rank ms, idle ranks)
        self.total_time = target_s + (draft_ms + ((lm_head_ms + sampling_ms) + overhead_ms)) * 1e-3

    @property
    def model_time(self) -> float:
        """The same as ``total_time`` (s): Vidur reads both."""
        return self.total_time

    @property
    def duration_ms(self) -> float:
        """The step's wall time (ms)."""
        return self.total_time * 1e3

    def add_all_to_all(self, a2a_ms: float) -> None:
        """Add the MoE dispatch and combine (ms, all MoE layers) to the target's forward, all of it exposed."""
        self.a2a_ms = self.a2a_exposed_ms = a2a_ms
        self.verify_ms += a2a_ms
        self.total_time += a2a_ms * 1e-3

    def overlapped(self, verify_ms: float, a2a_ms: float, exposed_ms: float) -> None:
        """The target's forward as two overlapped micro-batches: ``verify_ms`` (their compute on the critical path
        plus ``exposed_ms`` of the ``a2a_ms`` all-to-all, all MoE layers) in place of the un-split forward."""
        self.verify_ms = verify_ms
        self.a2a_ms, self.a2a_exposed_ms, self.split = a2a_ms, exposed_ms, 1
        self.total_time = verify_ms * 1e-3 + (self.draft_ms + ((self.lm_head_ms + self.sampling_ms)
                                                                + self.overhead_ms)) * 1e-3

    def add_draft(self, ms: float) -> None:
        """Add drafter time (ms) beyond the step's proposer (a decode instance recomputing draft KV)."""
        self.draft_ms += ms
        self.total_time += ms * 1e-3

    def dp_columns(self) -> tuple:
        """``steps.csv``'s data-parallel columns (:data:`vidur_specdec.engine.metrics.DP_COLUMNS`): all-to-all ms,
        its exposed part, the drafter's, whether the step split, slowest and mean rank ms, idle ranks."""
        return (self.a2a_ms, self.a2a_exposed_ms, self.draft_a2a_ms, self.split) + self.dp
