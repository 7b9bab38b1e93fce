"""The engine: a run config resolved once, then simulated on Vidur.

:mod:`.resolve` turns a :class:`~vidur_specdec.config.RunConfig` into resolved
objects with every cross-field check; :mod:`.deployment` (models, GPU, TP,
profiles, memory plan), :mod:`.workload`, :mod:`.predictor` (Vidur's execution
time predictor over the fitted operator model), :mod:`.scheduler` (the
speculative Sarathi replica scheduler), :mod:`.step_plan` (the immutable plan of each
step the scheduler hands the predictor and the recorders), :mod:`.request`, :mod:`.closed_loop`,
:mod:`.metrics`, :mod:`.warnings` and :mod:`.simulation` (the event loop and
:func:`~.simulation.simulate`). Vidur is imported only by the modules that
subclass it, on first use.
"""

import importlib as _importlib
import importlib.util as _importlib_util
import sys as _sys
import types as _types


class _DeferredModule(_types.ModuleType):
    """Stands in for a module until one of its attributes is read; then imports it and delegates."""

    def __getattr__(self, name):  # only for attributes this stand-in does not have
        real = self.__dict__.get("_real")
        if real is None:
            if _sys.modules.get(self.__name__) is self:
                del _sys.modules[self.__name__]
            real = _importlib.import_module(self.__name__)
            self.__dict__["_real"] = real
        return getattr(real, name)


def _defer_wandb() -> None:
    """Put a stand-in for ``wandb`` in ``sys.modules`` before Vidur imports it.

    Vidur's metrics modules ``import wandb`` at the top; wandb's import creates two folders in the
    system temp directory (``tmp*wandb-media``, ``tmp*wandb-artifacts``) that only a normal exit
    removes, so a run killed by SIGTERM or SIGKILL left them behind. The simulator never logs to
    wandb (nothing reads ``wandb.run``), so wandb is imported only if an attribute of it is read:
    no folder is created, and the import is faster. A process that imported wandb already keeps it.
    """
    if "wandb" in _sys.modules:
        return
    spec = _importlib_util.find_spec("wandb")
    if spec is None:
        return
    stand_in = _DeferredModule("wandb")
    stand_in.__spec__ = spec
    _sys.modules["wandb"] = stand_in


_defer_wandb()
