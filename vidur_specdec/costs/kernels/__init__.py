"""Kernel sources: one interface (:class:`~.base.KernelSource`) for every kernel time, registered by name.

``built`` (:class:`~.roofline.RooflineKernels`) is the calibrated analytical
roofline; ``tables`` (:class:`~.tables.TableKernels`) reads vLLM's kernel
latencies measured by NVIDIA's AIConfigurator (``aiconfigurator-core``).
:func:`make` builds the one a deployment carries; :func:`unbound` is the one
place a cost asked for outside a run (no deployment bound) takes its GPU from.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Callable, Dict

from vidur_specdec.costs.kernels.base import OP_FAMILIES, KernelSource
from vidur_specdec.hardware.devices import BUILTIN, get_device
from vidur_specdec.costs.kernels.roofline import BUILT, RooflineKernels
from vidur_specdec.costs.kernels.tables import SYSTEMS, TABLES, TableKernels

KERNEL_SOURCES: Dict[str, Callable[..., KernelSource]] = {}

#: The GPU a cost priced outside a bound run (a proposer or predictor built without a deployment) assumes.
UNBOUND_DEVICE = "a100"


def register(name: str):
    """Class decorator: register a :class:`KernelSource` under ``name``."""
    def deco(cls):
        KERNEL_SOURCES[name] = cls
        return cls
    return deco


register(BUILT)(RooflineKernels)
register(TABLES)(TableKernels)


def make(name: str, device, **kwargs) -> KernelSource:
    """The kernel source registered as ``name`` on ``device`` (a DeviceSpec)."""
    return KERNEL_SOURCES[name](device, **kwargs)


@lru_cache(maxsize=64)
def _roofline_on(device) -> KernelSource:
    return RooflineKernels(device)


def as_kernels(source_or_device) -> KernelSource:
    """``source_or_device`` itself when it is a :class:`KernelSource`; else the roofline on that DeviceSpec (cached)."""
    if isinstance(source_or_device, KernelSource):
        return source_or_device
    return _roofline_on(source_or_device)


def for_run(profiles: str, device, all_reduce=None) -> KernelSource:
    """The kernel source of a run with ``profiles:`` ``profiles`` on ``device`` (``engine.all_reduce`` ``all_reduce``).

    ``built``: the roofline. Otherwise (``shipped``, or a folder of measured per-layer profiles): the measured
    tables (``tables``) on a built-in GPU they cover (:data:`~.tables.SYSTEMS`: every built-in device but the
    A100, whose shipped profiles and recorded results stay the roofline's), else the roofline. A table
    missing from the installed package is one ConfigError line naming it.
    """
    if profiles == BUILT or device.name not in SYSTEMS or BUILTIN.get(device.name) != device:
        return RooflineKernels(device, all_reduce)
    return TableKernels(device, all_reduce)


def unbound(device=None, all_reduce=None) -> KernelSource:
    """The roofline on ``device`` (default :data:`UNBOUND_DEVICE`) for a cost asked for outside a bound run."""
    return RooflineKernels(get_device(device or UNBOUND_DEVICE), all_reduce)


__all__ = ["BUILT", "TABLES", "TableKernels", "KERNEL_SOURCES", "KernelSource", "OP_FAMILIES", "RooflineKernels", "as_kernels", "for_run", "make", "register", "unbound"]


def versions(sources) -> Dict[str, object]:
    """``summary.json``'s ``versions``: the vLLM release the run's measured kernel tables were collected on
    (from ``kernel_sources``) against the vLLM release whose scheduling, speculation and configs the simulator
    follows, said once. ``sources``: a run's ``kernel_sources`` (None or all built: no measured table)."""
    import re

    from vidur_specdec.config.vllm_defaults import VLLM_VERSION as SEMANTICS

    measured = sorted({m.group(1) for s in (sources or {}).values()
                       for m in re.finditer(r"vllm (\d+\.\d+\.\d+)", str(s))})
    packages = sorted({m.group(0) for s in (sources or {}).values()
                       for m in re.finditer(r"aiconfigurator-core \d+\.\d+\.\d+", str(s))})
    tables = (f"vLLM {', '.join(measured)} ({', '.join(packages)})" if measured else None)
    note = (f"kernel times measured on {tables}; scheduling, speculation and the written vLLM config follow "
            f"vLLM {SEMANTICS}" if tables else
            f"no measured kernel table (the calibrated roofline or the given profiles); scheduling, speculation and "
            f"the written vLLM config follow vLLM {SEMANTICS}")
    return {"semantics": f"vLLM {SEMANTICS}", "kernel_tables": tables, "note": note}
