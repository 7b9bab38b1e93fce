"""Where a run's acceptance comes from: the user, the cited library, or the default α (said so).

:func:`resolve_acceptance` runs on every loaded config with speculation on
(:func:`vidur_specdec.engine.resolve.check`) and sets ``speculative.acceptance_source``:

* ``given`` — the user gave an acceptance key (``acceptance_rate``, ``mean_acceptance_length``,
  ``acceptance_per_position``, ``acceptance_histogram``, ``acceptance_trace``): used as given,
  byte for byte as before. With ``acceptance_at_k`` = k0, ``mean_acceptance_length`` is the length
  measured at k0 and the run's k uses the method family's per-position model
  (:mod:`vidur_specdec.speculation.across_k`), written into ``acceptance_per_position``.
* ``published`` — the library's row(s) for (target, drafter, ``workload.dataset``) at the run's k
  (:func:`published`), written into ``acceptance_per_position`` (conditional rates; the per-request
  context factor is applied when each request draws). Chosen when asked for, or when no key is
  given and the library knows the pair on a chat-like dataset (mt-bench; a mixed one). No match:
  one line listing the nearest rows.
* ``default`` — nothing given and the library does not know the pair: the schema's α = 0.7, with
  one warning line and ``acceptance_source: default`` in ``summary.json``.

A config that already went through this (``acceptance_source`` set) resolves to the same values.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Tuple

from vidur_specdec.config import ConfigError
from vidur_specdec.speculation import acceptance_factors as factors
from vidur_specdec.speculation import across_k, library
from vidur_specdec.speculation.proposers import weights_name
from vidur_specdec.speculation.tree import acceptance_positions

DEFAULT_DATASET = "mt-bench"
AUTO_CATEGORIES = ("chat", "mixed")  # rows used without being asked for (no acceptance key, no workload.dataset)


@dataclass(frozen=True)
class Published:
    """Published acceptance at one k: the rows used, conditional rates α_1..α_k and the factors applied."""

    rows: Tuple[library.Row, ...]
    rates: Tuple[float, ...]
    dataset: str
    how: str  # "rates as published", "model anchored at k = ..." or "rates extended past k = ..."
    factors: Dict[str, float] = field(default_factory=dict)
    # n-gram and suffix rows: the share of decode steps that proposed, from the same row (1: every step proposes,
    # the rates then describe every step); the rates are per proposing step
    proposal_rate: float = 1.0
    # the step of :mod:`.nearness` that borrowed another pair's rows (None: the pair's own)
    borrowed: Optional[str] = None

    def borrowed_from(self) -> Optional[Dict]:
        """``summary.json``'s ``acceptance_borrowed``: whose rows stand in, and why (None: the pair's own)."""
        if self.borrowed is None:
            return None
        r = self.rows[0]
        return {"target": r.target, "drafter": r.drafter, "method": r.method, "why": self.borrowed}

    @property
    def mean_acceptance_length(self) -> float:
        return across_k.mean_length(self.rates)


def drafter_name(cfg) -> Optional[str]:
    """The drafter as the library names it: the head or draft model's weights, the target for MTP, the method
    name for n-gram and suffix proposals (None when it cannot be named)."""
    method = cfg.speculative.method
    if method in ("ngram", "suffix"):
        return method
    if method == "mtp" and not cfg.speculative.model:
        return cfg.model
    try:
        return weights_name(cfg)
    except ConfigError:
        return None


def _no_match(target: str, drafter: str, dataset: Optional[str], why: str) -> ConfigError:
    near = "; ".join(r.describe() for r in library.nearest(target, drafter, dataset))
    return ConfigError(f"speculative.acceptance_source: {why}; nearest rows: {near}")


def _pick_dataset(pair: List[library.Row], dataset: Optional[str], use_factor: bool):
    """(dataset used, category ratio or None) for a pair's rows and the dataset or category asked for.

    No dataset named: mt-bench, else a chat-like row, else the pair's first dataset scaled to chat. A dataset
    (or category) the pair has rows on is used as published; another one takes the pair's mt-bench (else first)
    rows scaled by the cited category factor. The factor is fitted on model drafters' curves, so n-gram and
    suffix rows are never scaled: another dataset is refused, naming those the pair has.
    """
    have = list(dict.fromkeys(r.dataset for r in pair))
    match = pair[0].method in library.MATCH_METHODS
    if dataset is None:
        chat = [r.dataset for r in pair if r.category in AUTO_CATEGORIES]
        if DEFAULT_DATASET in have:
            return DEFAULT_DATASET, None
        if chat:
            return chat[0], None
        wanted = "chat"
    elif dataset in have:
        return dataset, None
    else:
        same_cat = [r.dataset for r in pair if r.category == dataset]
        if same_cat:
            return same_cat[0], None
        wanted = dataset if dataset in library.CATEGORIES else next(
            (r.category for r in library.rows() if r.dataset == dataset), None)
        if wanted is None:
            known = sorted({r.dataset for r in library.rows()} | set(library.CATEGORIES))
            raise ConfigError(f"workload.dataset: unknown dataset or category {dataset!r}; known: {', '.join(known)}")
    base = DEFAULT_DATASET if DEFAULT_DATASET in have else have[0]
    ratio = factors.category_ratio(wanted, next(r.category for r in pair if r.dataset == base))
    if match or not use_factor or ratio is None:
        why = (f"no cited cross-dataset factor for {pair[0].method} proposals (their acceptance is the text's "
               "repetition)" if match else "the dataset factor is off" if not use_factor else
               f"no category factor for {wanted}")
        raise ConfigError(f"workload.dataset: the library has {pair[0].target} with {pair[0].drafter} on "
                          f"{', '.join(have)} only, not {dataset or 'a chat-like dataset'} ({why}); set "
                          "workload.dataset to one of them or give the acceptance you measured")
    return base, ratio


@functools.lru_cache(maxsize=256)
def published(target: str, drafter: str, method: str, k: int, dataset: Optional[str] = None,
              temperature: Optional[float] = None, use: Tuple[str, ...] = factors.FACTORS,
              borrow: bool = True) -> Published:
    """The library's acceptance for a (target, drafter) at ``k`` guesses; ConfigError listing the nearest
    rows when it has none. ``use``: the factors applied (``context`` is applied per request, not here).
    ``borrow``: without a row of the pair, the nearest pair's rows (:mod:`.nearness`), named."""
    from vidur_specdec.speculation.nearness import nearest_pair

    pair, borrowed = nearest_pair(target, drafter, method, dataset)
    if not pair or (borrowed is not None and not borrow):
        raise _no_match(target, drafter, dataset, f"no published acceptance for {target} with {drafter}")
    ds, ratio = _pick_dataset(pair, dataset, "dataset" in use)
    rows = [r for r in pair if r.dataset == ds]
    variant = rows[0].variant
    rows = [r for r in rows if r.variant == variant]  # one setting of a source that has several
    exact = sorted((r for r in rows if r.k == k), key=lambda r: (not r.per_position, r.line))
    longer = sorted((r for r in rows if r.per_position and r.k > k), key=lambda r: (r.k, r.line))
    if exact and exact[0].per_position:
        used, rates, how = exact[0], list(exact[0].conditional()), "rates as published"
    elif longer and not exact:
        used, rates, how = longer[0], list(longer[0].conditional()[:k]), f"first {k} published rates of k = {longer[0].k}"
    elif exact:
        used = exact[0]
        rates = across_k.rates_at(method, k, used.drafted_length(), k)
        how = f"{across_k.family_of(method)} per-position model at the published length"
    else:
        used = min(rows, key=lambda r: (abs(r.k - k), -r.k, not r.per_position, r.line))
        if used.per_position:
            rates = across_k.rates_at(method, k, known=used.conditional())
            how = f"published rates of k = {used.k} extended by the {across_k.family_of(method)} decay"
        else:
            rates = across_k.rates_at(method, k, used.drafted_length(), used.k)
            how = f"{across_k.family_of(method)} per-position model anchored at k = {used.k}"
    applied: Dict[str, float] = {}
    if ratio is not None:
        applied["dataset"] = round(ratio, 6)
    if "temperature" in use and temperature is not None:
        t = factors.temperature_factor(temperature) / factors.temperature_factor(used.temperature)
        if abs(t - 1.0) > 1e-12:
            applied["temperature"] = round(t, 6)
    for f in applied.values():
        rates = factors.scale_first(rates, f)
    proposal = used.proposal_rate if used.proposal_rate is not None else 1.0
    if used.proposal_rate is not None:
        how += f"; per proposing step, proposal rate {used.proposal_rate:g} as published"
    return Published((used,), tuple(round(float(x), 12) for x in rates), ds, how, applied, proposal, borrowed)


def _lookup(cfg, strict: bool) -> Optional[Published]:
    s, w = cfg.speculative, cfg.workload
    drafter = drafter_name(cfg)
    if drafter is None:
        if strict:
            raise ConfigError(f"speculative.acceptance_source: published needs a named drafter "
                              f"(speculative.model or draft_model) for method {s.method}")
        return None
    try:
        return published(cfg.model, drafter, s.method, acceptance_positions(s), w.dataset, w.temperature,
                         tuple(s.acceptance_factors))
    except ConfigError:
        if strict:
            raise
        return None


def resolve_acceptance(cfg) -> None:
    """Set ``speculative.acceptance_source`` (and the rates it implies); ConfigError naming the key to change."""
    s, w = cfg.speculative, cfg.workload
    given = getattr(cfg, "acceptance_given", None)
    asked = bool(given)
    library_keys = w.dataset is not None or w.temperature is not None or \
        list(s.acceptance_factors) != list(factors.FACTORS)
    if s.acceptance_at_k is not None:
        _resolve_at_k(s)
        return
    source = s.acceptance_source
    if source is None:
        if given is None or asked:
            source = "given"
        elif library_keys:
            source = "published"
        elif s.speculative_token_tree is not None:  # the library's rows are chains
            source = "default"
        else:  # unasked: a chat-like row (or one scaled to chat by the cited factor) stands in for an unnamed workload
            source = "published" if _lookup(cfg, strict=False) is not None else "default"
    if source == "published" and s.speculative_token_tree is not None:
        raise ConfigError("speculative.speculative_token_tree: the library's rows are chain drafts and a tree "
                          "accepts more at the same depth; give the tree's acceptance (mean_acceptance_length)")
    if source == "published":
        extra = sorted((given or frozenset()) - {"acceptance_per_position"})
        if extra:
            raise ConfigError(f"speculative.{extra[0]}: acceptance_source published takes acceptance from the "
                              "library; drop this key or set acceptance_source: given")
        found = _lookup(cfg, strict=True)
        if s.method in library.MATCH_METHODS and s.proposal_rate not in (1.0, found.proposal_rate):
            raise ConfigError(f"speculative.proposal_rate: acceptance_source published takes the proposal rate from "
                              f"the library's row with its rates ({found.proposal_rate:g}, {found.rows[0].source}); "
                              "drop this key or set acceptance_source: given")
        s.acceptance_per_position = list(found.rates)
        s.acceptance_rate = None  # the library's rates are the input (the schema's alpha default is not)
        if s.method in library.MATCH_METHODS:
            s.proposal_rate = found.proposal_rate  # from the same row as the rates (per proposing step)
    elif library_keys:
        key = "workload.dataset" if w.dataset is not None else (
            "workload.temperature" if w.temperature is not None else "speculative.acceptance_factors")
        raise ConfigError(f"{key}: only for published acceptance (speculative.acceptance_source: published); "
                          f"acceptance {source} here is used as it is")
    elif source == "given" and given is not None and not given:
        raise ConfigError("speculative.acceptance_source: given needs one of speculative.acceptance_rate, "
                          "mean_acceptance_length, acceptance_per_position, acceptance_histogram, acceptance_trace")
    s.acceptance_source = source


def _resolve_at_k(s) -> None:
    if s.speculative_token_tree is not None:
        raise ConfigError("speculative.acceptance_at_k: the across-k model is for chain drafts, not "
                          "speculative_token_tree; give the tree's own mean_acceptance_length")
    if s.enabled and s.method not in across_k.FAMILY:
        raise ConfigError(f"speculative.acceptance_at_k: no published acceptance curve of a {s.method} drafter at two "
                          "or more k to fit its decay across positions; give speculative.acceptance_per_position "
                          "(or a mean_acceptance_length measured at this k)")
    if s.mean_acceptance_length is None:
        raise ConfigError("speculative.acceptance_at_k: the k a mean_acceptance_length was measured at; give "
                          "speculative.mean_acceptance_length")
    if s.acceptance_source not in (None, "given"):
        raise ConfigError(f"speculative.acceptance_at_k: only with acceptance given by the user, not "
                          f"acceptance_source {s.acceptance_source}")
    if s.mean_acceptance_length > s.acceptance_at_k + 1:
        raise ConfigError(f"speculative.mean_acceptance_length: at most acceptance_at_k + 1 = "
                          f"{s.acceptance_at_k + 1} tokens per decode step, got {s.mean_acceptance_length:g}")
    if s.acceptance_histogram is not None or s.acceptance_trace is not None:
        raise ConfigError("speculative.acceptance_at_k: with mean_acceptance_length only; drop "
                          + ("acceptance_histogram" if s.acceptance_histogram is not None else "acceptance_trace"))
    s.acceptance_per_position = across_k.rates_at(s.method, acceptance_positions(s), s.mean_acceptance_length,
                                                  s.acceptance_at_k)
    s.acceptance_source = "given"


def describe(cfg) -> Dict:
    """What ``summary.json`` says of a run's acceptance beyond the given keys ({} for acceptance as given)."""
    s = cfg.speculative
    if not s.enabled:
        return {}
    if s.acceptance_at_k is not None:
        fam = across_k.family_of(s.method)
        return {"acceptance_source": "given",
                "acceptance_model": {"family": fam, "decay": across_k.decay(fam),
                                     "mean_acceptance_length": s.mean_acceptance_length,
                                     "acceptance_at_k": s.acceptance_at_k,
                                     "per_position": list(s.acceptance_per_position),
                                     "expected_mean_acceptance_length": across_k.mean_length(
                                         s.acceptance_per_position)}}
    if s.acceptance_source == "default":
        return {"acceptance_source": "default", "acceptance_default": {"acceptance_rate": s.acceptance_rate}}
    if s.acceptance_source != "published":
        return {}
    p = _lookup(cfg, strict=True)
    model = {"dataset": p.dataset, "how": p.how, "per_position": list(p.rates),
             "expected_mean_acceptance_length": p.mean_acceptance_length,
             "factors": dict(p.factors),
             "context_factor": "per request, on its prompt length" if "context" in s.acceptance_factors else None}
    if s.method in library.MATCH_METHODS:
        model["proposal_rate"] = p.proposal_rate
        model["mean_acceptance_length_every_step"] = round(1.0 + p.proposal_rate * (p.mean_acceptance_length - 1.0),
                                                            6)
    return {"acceptance_source": "published",
            "acceptance_rows": [r.cite() for r in p.rows],
            **({"acceptance_borrowed": p.borrowed_from()} if p.borrowed is not None else {}),
            "acceptance_model": model}


def default_warning(cfg) -> Optional[str]:
    """The one warning line of a run whose acceptance is not the pair's own published figure on the run's
    workload: the default α, another pair's rows (borrowed, :mod:`.nearness`), or rows scaled from another
    dataset by the category factor (None otherwise)."""
    s = cfg.speculative
    if not s.enabled or s.acceptance_source not in ("default", "published") or s.acceptance_at_k is not None:
        return None
    if s.acceptance_source == "published":
        p = _lookup(cfg, strict=False)
        if p is None or (p.borrowed is None and "dataset" not in p.factors):
            return None
        r = p.rows[0]
        parts = []
        if p.borrowed is not None:
            whose = f"{r.target}'s own {r.method}" if r.drafter == r.target else f"{r.drafter} on {r.target}"
            parts.append(f"no published acceptance for {cfg.model} with {drafter_name(cfg)}; borrowed the rows of "
                         f"{whose} ({p.borrowed})")
        if "dataset" in p.factors:
            parts.append(f"its {p.dataset} rows scaled by the dataset factor {p.factors['dataset']:g} to "
                         f"{cfg.workload.dataset or 'chat'} ({factors.DATASET_SOURCE})")
        return (f"speculative.acceptance_source: {'; '.join(parts)}: L = {r.mean_acceptance_length:g} at k = {r.k} "
                f"[{r.source}]; set the acceptance you measured if you have it")
    drafter = drafter_name(cfg) or s.method
    extra = (" and n-gram proposal_rate 1.0 (every step proposes)" if s.method in library.MATCH_METHODS
             and s.proposal_rate == 1.0 else "")
    return (f"speculative.acceptance_rate: no acceptance given and the library has no row for {cfg.model} with "
            f"{drafter}: using the default alpha {s.acceptance_rate:g}{extra}; set the acceptance you measured "
            "(python -m vidur_specdec acceptance lists the published ones)")


def row_category(cfg) -> str:
    """The workload category the run's published rates stand for (the row's, or the one the dataset factor
    scaled them to); per-request categories are scaled from it."""
    p = _lookup(cfg, strict=True)
    want = cfg.workload.dataset
    if "dataset" in p.factors:
        if want is None:
            return "chat"  # an unnamed workload: the rows were scaled to chat
        return want if want in library.CATEGORIES else next(r.category for r in library.rows() if r.dataset == want)
    return p.rows[0].category


def acceptance_for(target: str, drafter: str, k: int, dataset: Optional[str] = None,
                   method: Optional[str] = None, temperature: Optional[float] = None,
                   borrow: bool = True, use: Tuple[str, ...] = factors.FACTORS) -> Published:
    """Published acceptance for (target, drafter, dataset) at ``k`` guesses, for callers outside a run
    (tune, sweeps): conditional rates, the rows used and how; ``method`` defaults to the pair's rows'.
    ConfigError listing the nearest rows when the library has no row for the pair (``borrow``: or none of
    the pair's own; ``use``: the factors applied)."""
    if method is None:
        pair = library.find(target=target, drafter=drafter)
        method = pair[0].method if pair else "eagle3"
    return published(target, drafter, method, int(k), dataset, temperature, tuple(use), borrow)


def drafters_for(target: str) -> List[Dict]:
    """The drafters the library knows for ``target`` (or the same model's other checkpoint,
    :func:`~vidur_specdec.speculation.library.same_model`): ``{"drafter", "method", "datasets", "ks"}`` in file
    order; chain rows only (the comparison runs chains)."""
    out: Dict[str, Dict] = {}
    for r in library.rows():
        if r.structure != "chain" or not library.same_model(r.target, target):
            continue
        d = out.setdefault(r.drafter, {"drafter": r.drafter, "method": r.method, "datasets": [], "ks": []})
        if r.dataset not in d["datasets"]:
            d["datasets"].append(r.dataset)
        if r.k not in d["ks"]:
            d["ks"].append(r.k)
    return [dict(v, ks=sorted(v["ks"])) for v in out.values()]
