"""The engine: a run config resolved once, then simulated on Vidur.

:mod:`.resolve` turns a :class:`~vidur_specdec.config.RunConfig` into resolved
objects with every cross-field check; :mod:`.deployment` (models, GPU, TP,
profiles, memory plan), :mod:`.workload`, :mod:`.predictor` (Vidur's execution
time predictor over the fitted operator model), :mod:`.scheduler` (the
speculative Sarathi replica scheduler), :mod:`.request`, :mod:`.closed_loop`,
:mod:`.metrics`, :mod:`.warnings` and :mod:`.simulation` (the event loop and
:func:`~.simulation.simulate`). Vidur is imported only by the modules that
subclass it, on first use.
"""
