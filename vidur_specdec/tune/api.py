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


def tune(config: Union[str, Path, Mapping, RunConfig, None] = None, overrides: Optional[Sequence[str]] = None, *,
         output_dir: Union[str, Path, None] = None, k_max: Optional[int] = None, objective: str = "tpot",
         slo_ttft_ms: Optional[float] = None, slo_tpot_ms: Optional[float] = None, slo_percentile: Optional[int] = None,
         load_axis: str = "qps", loads: Union[str, Sequence[float], None] = None, warmup_requests: Optional[int] = None,
         tolerance: Optional[float] = None, jobs: Optional[int] = None, executor: str = "local",
         address: Optional[str] = None, overwrite: bool = False,
         compare_drafters: Optional[str] = None) -> TuneOutcome:
    """Run a tune of ``config`` (a YAML path, a mapping or a RunConfig) plus ``key=value`` overrides.

    Every argument is checked as the command line checks its option (``jobs="2"`` and ``loads="1,8"`` are the
    command line's text forms); a bad one is a ConfigError naming the keyword, before any work.
    """
    from vidur_specdec import console as C
    from vidur_specdec.config import MAX_K, ConfigError
    from vidur_specdec.tune import cli

    overrides = C.api_overrides(overrides)
    output_dir = C.api_path("output_dir", output_dir)
    k_max = C.api_int("k_max", k_max, 1, MAX_K)
    objective = C.api_choice("objective", objective, ("tpot", "throughput", "goodput"))
    positive = "a finite number of ms > 0"
    slo_ttft_ms = C.api_number("slo_ttft_ms", slo_ttft_ms, positive, lambda x: x > 0)
    slo_tpot_ms = C.api_number("slo_tpot_ms", slo_tpot_ms, positive, lambda x: x > 0)
    if isinstance(slo_percentile, str):
        slo_percentile = C.api_int("slo_percentile", slo_percentile)
    slo_percentile = C.api_choice("slo_percentile", slo_percentile, (50, 90, 99), allow_none=True)
    load_axis = C.api_choice("load_axis", load_axis, ("qps", "concurrency"))
    loads = C.api_loads("loads", loads)
    warmup_requests = C.api_int("warmup_requests", warmup_requests, 0)
    tolerance = C.api_number("tolerance", tolerance, "a number in (0, 1)", lambda x: 0 < x < 1)
    jobs = C.api_int("jobs", jobs, 1)
    executor = C.api_choice("executor", executor, ("local", "ray"))
    address = C.api_text("address", address)
    overwrite = C.api_bool("overwrite", overwrite)
    compare_drafters = C.api_text("compare_drafters", compare_drafters)
    with C.api_output(output_dir, "tune") as (out, kept):
        args = argparse.Namespace(
            config=config, overrides=overrides, output_dir=str(out), jobs=jobs, executor=executor,
            address=address, overwrite=overwrite, k_max=k_max, objective=objective,
            slo_ttft_ms=cli.DEFAULT_SLO_TTFT_MS if slo_ttft_ms is None else float(slo_ttft_ms),
            slo_tpot_ms=cli.DEFAULT_SLO_TPOT_MS if slo_tpot_ms is None else float(slo_tpot_ms),
            slo_percentile=cli.DEFAULT_SLO_PERCENTILE if slo_percentile is None else slo_percentile,
            load_axis=load_axis, loads=loads, warmup_requests=warmup_requests, compare_drafters=compare_drafters,
            tolerance=cli.DEFAULT_TOLERANCE if tolerance is None else float(tolerance))
        try:
            cli.execute(args, log=None)
        except ConfigError as e:
            raise type(e)(C.api_message(str(e))) from None  # named by the keyword, not the command's option
        summary = json.loads((out / "summary.json").read_text())
        points = pd.read_csv(out / "tune.csv")
    return TuneOutcome(points=points, summary=summary, schedule=[tuple(r) for r in summary["schedule"]],
                       speculative_config=summary["speculative_config"],
                       output_dir=out if kept else None)
