"""Hardware: GPUs (spec-sheet figures) and the collectives among them.

:mod:`.devices` (A100, H100, H200 or a YAML of figures), :mod:`.collectives`
(the time of one all-reduce: NCCL model, fitted in :mod:`.collectives_fit`) and
:mod:`.custom_all_reduce` (vLLM's custom all-reduce). Imports nothing of the
package above :mod:`vidur_specdec.config`.
"""
