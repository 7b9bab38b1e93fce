"""One step price: the step plan a scheduler forms, and the one pricer every command calls.

:mod:`.plan` (:class:`~.plan.StepPlan`, the immutable record of one step, and
builders for steps no scheduler formed: ``tune``'s uniform decode steps, a step
log's sums), :mod:`.pricer` (:class:`~.pricer.StepPricer`, built once per
deployment, pricing any plan into a :class:`~.price.StepPrice`),
:mod:`.layers` (the step's mean decoder layer), :mod:`.global_layers` (sliding
beside global layers) and :mod:`.data_parallel` (a data-parallel group's step).
Sits above the cost models and the proposers and below the engine; imports no
Vidur.
"""
