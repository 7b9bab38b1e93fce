"""Every check a tune can make before its first point (docs/tune.md): a bad input costs no simulation.

Each static k = 1..k_max and k = 0 is built at the lowest and the highest load
the search may try (:func:`vidur_specdec.tune.loads.load_bounds`) and at every
``--loads`` value, so a config that some point would refuse is refused here, in
one line naming the key.
"""

from __future__ import annotations

import copy
import math
from typing import List, Optional

from vidur_specdec.config import ConfigError, unused
from vidur_specdec.speculation.tree import KEY as TREE_KEY
from vidur_specdec.tune.acceptance_carry import input_positions
from vidur_specdec.tune.loads import load_bounds, workload_overrides


def parse_loads(text: Optional[str], axis, bounds) -> List[float]:
    """``--loads 1,8,32``: loads on ``axis`` inside ``bounds``, in the order given, without repeats."""
    if text is None:
        return []
    out: List[float] = []
    for part in str(text).split(","):
        part = part.strip()
        try:
            x = float(part)
        except ValueError:
            raise ConfigError(f"--loads: must be comma-separated numbers, got {part!r}") from None
        if not math.isfinite(x) or x < bounds["lo"] or x > bounds["hi"]:
            raise ConfigError(f"--loads: {part} is outside [{axis.fmt(bounds['lo'])}, {axis.fmt(bounds['hi'])}] "
                              f"{axis.name} (this config's valid range)")
        if axis.integer and x != int(x):
            raise ConfigError(f"--loads: concurrency must be whole numbers, got {part}")
        x = axis.norm(x)
        if x not in out:
            out.append(x)
    if not out:
        raise ConfigError("--loads: give at least one load")
    return out


def check_before_running(base, k_max: int, axis, loads_text: Optional[str]) -> List[float]:
    """Refuse what no point could run; returns the ``--loads`` values."""
    from vidur_specdec.tune.points import Setting, build_config, setting_overrides

    s = base.speculative
    if s.speculative_token_tree is not None:
        raise ConfigError(f"{TREE_KEY}: tune searches chains of k = 0..k_max guesses, not token trees, and vLLM "
                          "0.33's SpeculativeConfig has no speculative_token_tree; remove it to tune a chain")
    if s.method == "fixed":
        raise ConfigError("speculative.method: fixed is this simulator's own proposer and vLLM has no such method, "
                          "so tune could not write a speculative_config vLLM accepts; use ngram, eagle, eagle3, mtp "
                          "or draft_model")
    if s.acceptance_input() == "mean_acceptance_length" and k_max > s.num_speculative_tokens:
        pass  # the alpha it implies at num_speculative_tokens carries to every k (acceptance_carry)
    given = input_positions(s)
    if k_max > given and s.acceptance_input() in ("acceptance_per_position", "acceptance_histogram"):
        raise ConfigError(f"--k-max: speculative.{s.acceptance_input()} describes {given} guesses, fewer than "
                          f"--k-max {k_max}; use --k-max <= {given} or give the input for {k_max}")
    bounds = load_bounds(base, axis)
    loads = parse_loads(loads_text, axis, bounds)
    _check_axis(base, axis, bounds["lo"])
    for load in sorted({bounds["lo"], bounds["hi"], *loads}):
        for k in range(k_max + 1):
            ov = workload_overrides(base, axis, load)
            ov.update(setting_overrides(base, Setting(k)))
            try:
                build_config(base, ov)
            except ConfigError as e:
                raise ConfigError(f"tune point ({axis.name} {axis.fmt(load)}, k={k}): {e}") from None
    return loads


def _check_axis(base, axis, load: float) -> None:
    """Refuse a load axis the base config does not read (every load the same run), or one that leaves a
    key of the base unread (a trace under the closed-loop axis), before any point runs."""
    from vidur_specdec.tune.points import AXES  # where check_before_running imports tune.points

    point = copy.deepcopy(base)
    for key, value in workload_overrides(base, axis, load).items():
        *path, name = key.split(".")
        setattr(unused.get(point, ".".join(path)), name, value)
    why = unused.refusal(axis.key, point)
    if why:
        raise ConfigError(f"--load-axis {axis.name}: every load would run the same: {why}")
    loads = {a.key for a in AXES.values()}  # the axis replaces the base's load (its qps) by design
    for leaf in unused.set_keys(point):
        why = None if leaf in loads else unused.refusal(leaf, point)
        if why:
            raise ConfigError(f"--load-axis {axis.name}: {why}")
