"""Cross-field checks of ``speculative.*``: trees, schedules and acceptance inputs.

Run by :mod:`vidur_specdec.engine.resolve` on every loaded config with
speculation on. A proposer's own keys are checked by its ``from_config``.
"""

from __future__ import annotations

from vidur_specdec.config import ConfigError, SpeculativeConfig
from vidur_specdec.speculation import schedule
from vidur_specdec.speculation.acceptance import alpha_for_config
from vidur_specdec.speculation.proposers import REGISTRY
from vidur_specdec.speculation.tree import KEY as TREE_KEY, acceptance_positions, parse_tree


def check_speculation(s: SpeculativeConfig) -> None:
    """Tree, acceptance and spread constraints (speculation on); each error names the key to change."""
    tree = parse_tree(s.speculative_token_tree)
    if tree is not None:
        if not REGISTRY[s.method].supports_tree:
            raise ConfigError(f"{TREE_KEY}: only for methods "
                              + ", ".join(n for n, c in REGISTRY.items() if c.supports_tree)
                              + f", not {s.method}")
        if s.num_speculative_tokens != tree.num_nodes:
            raise ConfigError(f"speculative.num_speculative_tokens: must equal the token tree's node count "
                              f"{tree.num_nodes} (as in vLLM), got {s.num_speculative_tokens}")
        if s.num_speculative_tokens_per_batch_size:
            raise ConfigError("speculative.num_speculative_tokens_per_batch_size: a per-batch-size k cannot be "
                              f"used with {TREE_KEY} (a tree always drafts all its nodes); give one or the other")
    k = acceptance_positions(s)
    if s.acceptance_input() is None:
        raise ConfigError("speculative.acceptance_rate: speculation needs one of acceptance_rate, "
                          "mean_acceptance_length, acceptance_per_position, acceptance_histogram, "
                          "acceptance_trace")
    if s.mean_acceptance_length is not None and s.acceptance_at_k is None and s.mean_acceptance_length > k + 1:
        what = f"tree depth {k}" if tree is not None else f"k = {k}"
        raise ConfigError(f"speculative.mean_acceptance_length: at most {what} + 1 = {k + 1} tokens per decode "
                          f"step, got {s.mean_acceptance_length:g}")
    if s.acceptance_spread:
        used = s.acceptance_input()
        if used not in ("acceptance_rate", "mean_acceptance_length"):
            raise ConfigError(f"speculative.acceptance_spread: applies to an i.i.d. rate (acceptance_rate or "
                              f"mean_acceptance_length), not {used}")
        a = alpha_for_config(s)
        if s.acceptance_spread ** 2 >= a * (1 - a):
            raise ConfigError(f"speculative.acceptance_spread: must be below sqrt(alpha(1-alpha)) = "
                              f"{(a * (1 - a)) ** 0.5:.4g} for alpha = {a:.4g}, got {s.acceptance_spread:g}")
    if s.acceptance_per_position is not None and len(s.acceptance_per_position) != k:
        raise ConfigError(f"speculative.acceptance_per_position: must have k = {k} entries, "
                          f"got {len(s.acceptance_per_position)}")
    if s.num_speculative_tokens_per_batch_size is not None:  # vLLM's semantics: vidur_specdec/speculation/schedule.py
        s.num_speculative_tokens_per_batch_size = schedule.to_config_value(
            schedule.parse(s.num_speculative_tokens_per_batch_size))
    _check_proposals(s)
    if s.acceptance_histogram is not None:
        h = s.acceptance_histogram
        if len(h) != k + 1:
            raise ConfigError(f"speculative.acceptance_histogram: must have k + 1 = {k + 1} entries, got {len(h)}")
        if abs(sum(h) - 1.0) > 1e-6:
            raise ConfigError(f"speculative.acceptance_histogram: must sum to 1, got {sum(h):.6g}")


def _check_proposals(s: SpeculativeConfig) -> None:
    """Prompt-lookup order and the proposal spread's range (which methods read these keys:
    :data:`vidur_specdec.config.unused.USES`; a test checks it against ``variable_proposals``)."""
    if s.prompt_lookup_min is not None and s.prompt_lookup_max is not None \
            and s.prompt_lookup_min > s.prompt_lookup_max:
        raise ConfigError(f"speculative.prompt_lookup_min: must be <= prompt_lookup_max ({s.prompt_lookup_max}), "
                          f"got {s.prompt_lookup_min}")
    if s.proposal_spread:
        r = s.proposal_rate
        if s.proposal_spread ** 2 >= r * (1 - r):
            raise ConfigError(f"speculative.proposal_spread: must be below sqrt(r(1-r)) = {(r * (1 - r)) ** 0.5:.4g} "
                              f"for proposal_rate r = {r:g}, got {s.proposal_spread:g}")
