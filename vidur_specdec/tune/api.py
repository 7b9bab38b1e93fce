"""``tune()`` from Python: the command's search, returning DataFrames and the summary (like ``simulate()``).

::

    from vidur_specdec import tune
    t = tune("configs/default.yaml", ["speculative.verify_attention=per_token"], load_axis="qps")
    t.points        # tune.csv as a DataFrame (every simulated point)
    t.summary       # summary.json as a dict (capacity, schedule, checks, ...)
    t.schedule      # [(lo, hi, k), ...]: vLLM's num_speculative_tokens_per_batch_size
    t.speculative_config  # the drop-in vLLM speculative_config

Options are the command's (docs/tune.md), as keyword arguments with the same
names and defaults; ``loads`` is the command's text (``"1,8,32"``) or a sequence
of numbers, and ``overrides`` follow the rule ``--set`` follows
(docs/config.md, "One rule for a value given over a config"). Without ``output_dir`` the tune runs in a temporary folder
that is removed afterwards (``t.output_dir`` is then None); with one, the
folder is written exactly as the command writes it, and a rerun resumes from
its journal. Bad input raises :class:`~vidur_specdec.config.ConfigError`
(the command's one-line message); nothing is printed.
"""

from __future__ import annotations

import argparse
import json
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple, Union

import pandas as pd

from vidur_specdec.config import RunConfig


@dataclass
class TuneOutcome:
    """What a tune gives: its points (tune.csv), summary (summary.json), schedule and vLLM config."""

    points: pd.DataFrame
    summary: Dict[str, Any]
    schedule: List[Tuple[int, int, int]]
    speculative_config: Dict[str, Any]
    output_dir: Optional[Path]


def _loads_text(loads) -> Optional[str]:
    """``loads`` as the command's ``--loads`` text: a comma-separated string as given, or a sequence of numbers."""
    from vidur_specdec.config import ConfigError

    if loads is None or isinstance(loads, str):
        return loads
    try:
        return ",".join(f"{float(x):g}" for x in loads)
    except (TypeError, ValueError):
        raise ConfigError(f"loads: must be a comma-separated string (\"1,8,32\") or a sequence of numbers, "
                          f"got {loads!r}") from None


def tune(config: Union[str, Path, Mapping, RunConfig, None] = None, overrides: Optional[Sequence[str]] = None, *,
         output_dir: Union[str, Path, None] = None, k_max: Optional[int] = None, objective: str = "tpot",
         slo_ttft_ms: Optional[float] = None, slo_tpot_ms: Optional[float] = None, slo_percentile: Optional[int] = None,
         load_axis: str = "qps", loads: Union[str, Sequence[float], None] = None, warmup_requests: Optional[int] = None,
         tolerance: Optional[float] = None, jobs: Optional[int] = None, executor: str = "local",
         address: Optional[str] = None, overwrite: bool = False,
         compare_drafters: Optional[str] = None) -> TuneOutcome:
    """Run a tune of ``config`` (a YAML path, a mapping or a RunConfig) plus ``key=value`` overrides."""
    from vidur_specdec.config import ConfigError
    from vidur_specdec.tune import cli

    if objective not in ("tpot", "throughput", "goodput"):
        raise ConfigError(f"objective: must be one of tpot, throughput, goodput, got {objective!r}")
    if slo_percentile is not None and slo_percentile not in (50, 90, 99):
        raise ConfigError(f"slo_percentile: must be one of 50, 90, 99, got {slo_percentile!r}")
    if load_axis not in ("qps", "concurrency"):
        raise ConfigError(f"load_axis: must be one of qps, concurrency, got {load_axis!r}")
    temp = None
    if output_dir is None:
        temp = Path(tempfile.mkdtemp(prefix="vidur-specdec-tune-"))
        out = temp / "tune"
    else:
        out = Path(output_dir)
    args = argparse.Namespace(
        config=config, overrides=list(overrides or []), output_dir=str(out), jobs=jobs, executor=executor,
        address=address, overwrite=overwrite, k_max=k_max, objective=objective,
        slo_ttft_ms=cli.DEFAULT_SLO_TTFT_MS if slo_ttft_ms is None else float(slo_ttft_ms),
        slo_tpot_ms=cli.DEFAULT_SLO_TPOT_MS if slo_tpot_ms is None else float(slo_tpot_ms),
        slo_percentile=cli.DEFAULT_SLO_PERCENTILE if slo_percentile is None else slo_percentile,
        load_axis=load_axis, loads=_loads_text(loads),
        warmup_requests=warmup_requests, compare_drafters=compare_drafters, tolerance=cli.DEFAULT_TOLERANCE if tolerance is None else float(tolerance))
    try:
        cli.execute(args, log=None)
        summary = json.loads((out / "summary.json").read_text())
        points = pd.read_csv(out / "tune.csv")
    finally:
        if temp is not None:
            shutil.rmtree(temp, ignore_errors=True)
    return TuneOutcome(points=points, summary=summary, schedule=[tuple(r) for r in summary["schedule"]],
                       speculative_config=summary["speculative_config"],
                       output_dir=None if temp is not None else out)
