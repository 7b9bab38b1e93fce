"""The Vidur-backed reference engine: the same schedule on Vidur's own event loop, entities and Sarathi scheduler.

Selected by ``simulator: vidur``; the engine core (:mod:`vidur_specdec.engine.core`)
is held to its tables. The only package that imports Vidur (an import-linter
contract in ``pyproject.toml``). :mod:`.run` builds Vidur's configs and runs the
loop; :mod:`.scheduler`, :mod:`.request`, :mod:`.dp_group`, :mod:`.disagg`,
:mod:`.closed_loop`, :mod:`.predictor` and :mod:`.step_plan` are the subclasses
and seams.
"""
