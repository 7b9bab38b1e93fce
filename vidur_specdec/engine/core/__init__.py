"""The engine core: this project's own serving loop, held to the Vidur-backed reference.

Per replica the requests' state (:mod:`.request`) and the speculative Sarathi
schedule over it (:mod:`.sarathi`; a data-parallel group's ranks, :mod:`.group`;
prefill and decode pools, :mod:`.pools`); steps priced by the run's one
:class:`~vidur_specdec.pricing.pricer.StepPricer`; one event loop over the
replicas (:mod:`.loop`); :func:`.run.run_core` builds and runs it from a
prepared run. It imports no Vidur: ``simulator: vidur`` runs the same schedule
on Vidur's classes (:mod:`vidur_specdec.engine.reference.scheduler` and its neighbours),
and ``tests/test_engine_core.py`` holds the two to identical tables.
"""
