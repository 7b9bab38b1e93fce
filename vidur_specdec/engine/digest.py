"""A resolved run's content hash: what decides its results, in one digest (``Prepared.digest``, ``Topology.digest``)."""

from __future__ import annotations

import dataclasses
import hashlib
import json
from importlib.metadata import PackageNotFoundError, version


def plan_digest(p) -> str:
    """:attr:`vidur_specdec.engine.simulation.Prepared.digest` of a prepared run (a topology: of its pools and link)."""
    if hasattr(p, "pools"):
        parts = [p.cfg.to_dict(), [(pool.role, pool.instances, plan_digest(pool.prepared)) for pool in p.pools],
                 repr(p.link)]
    else:
        dep = p.deployment
        sched = {f.name: getattr(p.scheduler, f.name) for f in dataclasses.fields(p.scheduler)
                 if f.name not in ("acceptance", "proposals")}  # both follow from the resolved config and seed
        parts = [p.cfg.to_dict(), [(s.arrived_at_s, s.prompt_tokens, s.output_tokens, s.category) for s in p.specs],
                 p.model.to_dict(), dep.device.to_dict() if dep else None, p.memory.to_dict(), sched,
                 p.profile_files, p.profile_source,
                 dep.kernels.identity() if dep and dep.kernels is not None else None,
                 dep.kernels.sources(dep.tp, [m for m in (p.model, dep.draft) if m is not None], dep.ep)
                 if dep and dep.kernels is not None else None]
    try:
        parts.append(version("vidur_specdec"))
    except PackageNotFoundError:  # pragma: no cover (run from a checkout without installing)
        parts.append("unknown")
    blob = json.dumps(parts, sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]
