"""Costs: what an operator, a layer, a verify block and a step cost (ms), and what fits in memory.

Operator profiles in Vidur's CSV schema (:mod:`.profiles`: the analytical
builder, its parameters and calibration, profiles on demand), the fitted
per-layer operator model (:mod:`.operator_model`, operator names in
:mod:`.ops`), verify-attention pricing (:mod:`.verify_cost`), the LM head
(:mod:`.lm_head`), the step's costs beyond the layers (:mod:`.step_overheads`)
and GPU memory (:mod:`.memory`). Imports only the layers below
(config, hardware, architectures); never Vidur's simulator.
"""
