"""The per-batch-size schedule, chosen from the step-cost model and the acceptance input.

For each batch size b (1 .. ``scheduler.batch_size_cap``) and each k (0 ..
k_max) a decode step of b requests with k guesses each is priced by the
simulator's own predictor (:class:`~vidur_specdec.engine.predictor.SpecDecExecutionTimePredictor`:
target forward, verify attention policy, proposer), so any change to the step
cost flows in. Its value is the expected tokens advanced per ms of step,

    v(b, k) = b * (1 + E[min(A, k)]) / step_ms(b, k),

with A drawn from the acceptance input at k_max (a step proposing k < k_max
keeps the first k positions of a full draft, as in the simulator). The k
maximising v, averaged (relative to the best k at each size) over batch sizes
within a factor :data:`SMOOTHING_WINDOW` of b, is chosen for each b (ties: the
smaller k); runs of equal k become
inclusive ranges ``[lo, hi, k]``. The same k maximises a request's TPOT and the
step's throughput at a fixed b, so the choice does not depend on ``--objective``.

Shortcuts (docs/model.md, "tune"): every request in the priced step is
decoding, at one context length — the workload's mean prompt plus half its mean
output (tokens); prefill chunks that share real steps are left out, and so is
the token budget's shortening of guesses. The schedule is then checked by
simulation against every static k.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Dict, List, Tuple

import numpy as np

from vidur_specdec.config import RunConfig
from vidur_specdec.tune.acceptance_carry import pmf_at


# Step times are not smooth in b (GEMM tiles): the k for b maximises the mean relative value over
# batch sizes b / W .. b * W, so the schedule does not flip k at every tile edge (vLLM issue #49548).
SMOOTHING_WINDOW = 1.25


def step_pricer(cfg: RunConfig):
    """``price(b, k, ctx) -> ms`` of a decode step of b requests with k guesses each at context ``ctx`` tokens."""
    # lazy: start-up cost of vidur
    from vidur.entities import Batch

    # lazy: start-up cost of pandas, scipy, sklearn, vidur
    from vidur_specdec.engine.predictor import SpecDecExecutionTimePredictor
    from vidur_specdec.engine.request import SpecRequest
    from vidur_specdec.engine.simulation import prepare, vidur_config

    p = prepare(cfg)
    cluster = vidur_config(p, p.scheduler, SpecRequest).cluster_config
    predictor = SpecDecExecutionTimePredictor(p.predictor, cluster.replica_config, cluster.cache_config)

    def price(b: int, k: int, ctx: int) -> float:
        reqs = [SimpleNamespace(is_prefill_complete=True, id=i) for i in range(b)]
        batch = Batch(0, reqs, [k + 1] * b, [ctx + k + 1] * b)
        return predictor.get_execution_time(batch, 0).total_time * 1e3

    return p, price


def expected_advanced(cfg: RunConfig, k_max: int) -> List[float]:
    """Tokens advanced per decode step with k = 0..k_max guesses: 1 + E[min(A, k)], A at k_max."""
    from vidur_specdec.tune.points import Setting, build_config, setting_overrides

    spec = build_config(cfg, setting_overrides(cfg, Setting(k_max))).speculative
    pmf = pmf_at(spec, k_max)  # a trace has no pmf of its own: its positions' runs, cut at k_max
    return [1.0 + float(np.dot(np.minimum(np.arange(len(pmf)), k), pmf)) for k in range(k_max + 1)]


def typical_context(prepared) -> int:
    """Context (tokens) of a typical decode step: mean prompt + half the mean output of the drawn workload."""
    prompt = np.mean([s.prompt_tokens for s in prepared.specs])
    output = np.mean([s.output_tokens for s in prepared.specs])
    return int(round(prompt + output / 2))


def choose_schedule(cfg: RunConfig, k_max: int) -> Tuple[List[Tuple[int, int, int]], Dict]:
    """The schedule ``[(lo, hi, k), ...]`` covering 1..batch_size_cap, and the table it was chosen from."""
    # lazy: start-up cost of pandas
    from vidur_specdec.tune.points import Setting, build_config, setting_overrides

    priced_cfg = build_config(cfg, setting_overrides(cfg, Setting(k_max)))
    prepared, price = step_pricer(priced_cfg)
    ctx = typical_context(prepared)
    adv = expected_advanced(cfg, k_max)
    cap = cfg.scheduler.batch_size_cap
    table = {"context_tokens": ctx, "tokens_advanced": adv, "window": SMOOTHING_WINDOW, "rows": []}
    rel = []  # value relative to the best k at that batch size
    for b in range(1, cap + 1):
        ms = [price(b, k, ctx) for k in range(k_max + 1)]
        value = [b * adv[k] / ms[k] for k in range(k_max + 1)]
        top = max(value)
        rel.append([v / top for v in value])
        table["rows"].append({"batch_size": b, "step_ms": [round(x, 6) for x in ms],
                              "tokens_per_ms": [round(x, 6) for x in value]})
    best: List[int] = []
    for b in range(1, cap + 1):
        lo = max(1, int(np.floor(b / SMOOTHING_WINDOW)))
        hi = min(cap, int(np.ceil(b * SMOOTHING_WINDOW)))
        score = [float(np.mean([rel[j - 1][k] for j in range(lo, hi + 1)])) for k in range(k_max + 1)]
        kb = max(range(k_max + 1), key=lambda k: (round(score[k], 9), -k))
        best.append(kb)
        table["rows"][b - 1]["k"] = kb
    ranges: List[Tuple[int, int, int]] = []
    for b, kb in enumerate(best, start=1):
        if ranges and ranges[-1][2] == kb:
            ranges[-1] = (ranges[-1][0], b, kb)
        else:
            ranges.append((b, b, kb))
    return ranges, table
