"""``plan``: which deployment to run for a model, GPUs, workload and SLOs (docs/plan.md).

By job: :mod:`.inputs` (the question: options, plan files, checks), :mod:`.candidates`
(shapes by mode, speculation options, token budgets), :mod:`.estimate` (analytic
bounds and the static estimate, from the step pricer), :mod:`.screen` (stage 1:
the simulator's refusals, the bounds, the ranking), :mod:`.points` (simulated
points and the journal-backed runner), :mod:`.search` (stage 2: each survivor's
load search, the token-budget step, the check of the screen), :mod:`.frontier`
(rows, frontiers, the best deployment and its ``vllm serve`` lines), :mod:`.run`
(the two stages end to end), :mod:`.outputs` and :mod:`.page` (the files), :mod:`.cli`
and :mod:`.api`.
"""

from vidur_specdec.console import make_callable as _make_callable  # noqa: E402

_make_callable(__name__, "vidur_specdec.plan.api", "plan")  # vidur_specdec.plan(...) runs a plan
