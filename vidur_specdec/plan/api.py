"""``plan()`` from Python: the command's search, returning DataFrames and the summary (like ``tune()``).

::

    from vidur_specdec import plan
    p = plan(model="deepseek-ai/DeepSeek-V3", devices="h200", gpus=16, isl=4000, osl=500,
             slo_ttft_ms=1000, min_tokens_per_user=20)
    p.points        # plan.csv as a DataFrame (every simulated point)
    p.screen        # screen.csv (every candidate's verdict)
    p.frontier      # the points on the frontier over all classes
    p.best          # summary.json's best deployment (figures, margins, vllm serve lines)
    p.summary       # summary.json as a dict

Options are the command's (docs/plan.md), as keyword arguments with the same names
(``slo_ttft_ms``, ``max_gpus_per_instance``, ...); ``config`` is a run config or plan
file (a path) or a mapping, ``overrides`` its ``--set`` lines. Without
``output_dir`` the plan runs in a temporary folder that is removed afterwards;
with one, the folder is written as the command writes it, and a rerun resumes from
its journal. Bad input raises :class:`~vidur_specdec.config.ConfigError` naming the
argument; nothing is printed.
"""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, Mapping, Optional, Sequence, Union

import pandas as pd

from vidur_specdec.plan.inputs import OPTIONS


@dataclass
class PlanOutcome:
    """What a plan gives: its points (plan.csv), the screen (screen.csv), the frontier and the summary."""

    points: pd.DataFrame
    screen: pd.DataFrame
    frontier: pd.DataFrame
    best: Dict[str, Any]
    summary: Dict[str, Any]
    output_dir: Optional[Path]


def plan(config: Union[str, Path, Mapping, None] = None, overrides: Optional[Sequence[str]] = None, *,
         output_dir: Union[str, Path, None] = None, jobs: Optional[int] = None, executor: str = "local",
         address: Optional[str] = None, overwrite: bool = False, **options: Any) -> PlanOutcome:
    """Run a plan: ``config`` (a run config or plan file path, a mapping, or None) plus the options by name."""
    from vidur_specdec import console as C
    from vidur_specdec.config import ConfigError
    from vidur_specdec.plan import cli

    names = {o.name for o in OPTIONS}
    unknown = sorted(k for k in options if k not in names)
    if unknown:
        raise ConfigError(f"{unknown[0]}: not a plan option (allowed: {', '.join(sorted(names))})")
    if executor not in ("local", "ray"):
        raise ConfigError(f"executor: must be one of local, ray, got {executor!r}")
    with C.api_output(output_dir, "plan") as (out, kept):
        args = argparse.Namespace(config=config, overrides=list(overrides or []), output_dir=str(out), jobs=jobs,
                                  executor=executor, address=address, overwrite=overwrite,
                                  **{o.name: options.get(o.name) for o in OPTIONS})
        cli.execute(args, log=None, where=lambda name: name)
        summary = json.loads((out / "summary.json").read_text())
        points = pd.read_csv(out / "plan.csv")
        screen = pd.read_csv(out / "screen.csv")
    frontier = points[points["frontier_all"]].sort_values("tok_s_user").reset_index(drop=True)
    return PlanOutcome(points, screen, frontier, summary["best"], summary, out if kept else None)
