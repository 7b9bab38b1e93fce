"""``tune``: where speculation stops paying, and a per-batch-size k schedule for vLLM (docs/tune.md).

By job: :mod:`.points` (the load axis, each simulated point, the journal-backed
runner on the sweep package's executors), :mod:`.search` (capacity, grid,
crossovers, checks), :mod:`.choose` (the schedule from the step-cost model and
the acceptance input), :mod:`.outputs` (speculative_config.json, summary.json,
tune.csv), :mod:`.page` (tune.html) and :mod:`.cli`.
"""

from vidur_specdec.console import make_callable as _make_callable  # noqa: E402

_make_callable(__name__, "vidur_specdec.tune.api", "tune")  # vidur_specdec.tune(...) runs a tune
