"""Vidur's names for the per-layer operators the simulator charges on every query token.

Shared by the predictor (which fits them) and the profile calibration (which
checks whole-layer times built from them); kept apart so the profile tools
need not import Vidur.
"""

LINEAR_OPS = (
    "attn_pre_proj",
    "attn_post_proj",
    "attn_rope",
    "mlp_up_proj",
    "mlp_down_proj",
    "mlp_act",
    "input_layernorm",
    "post_attention_layernorm",
    "add",
)
