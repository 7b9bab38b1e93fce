"""The cited acceptance library: published acceptance figures, one row per figure.

The rows live in ``data/acceptance_library.csv`` beside this module (shipped with the
package). One row is one published mean acceptance length L (vLLM's "mean acceptance
length": tokens per decode step including the bonus token) of one drafter on one target
and dataset at one k, with its source (repository and file at a commit, an issue or pull
request, or a paper and its table or section). Columns:

=====================  ===================================================================
``target``             the target, by its Hugging Face name where the source names one
``drafter``            the drafter's checkpoint by its Hugging Face name; MTP rows name the
                       target (its own module); n-gram rows say ``ngram``
``method``             vLLM's ``speculative.method``: eagle, eagle3, mtp, ngram, draft_model, ...
``dataset``            the measured dataset (``mt-bench``, ``gsm8k``, ``speed-bench-coding``, ...)
``category``           the workload category of the dataset (chat, coding, math, qa, mixed)
``k``                  guesses per step (``num_speculative_tokens``; SGLang's ``steps`` with topk 1)
``structure``          ``chain`` (one guess per position) or ``tree``
``temperature``        sampling temperature of the measurement (empty: not stated)
``variant``            a setting that splits one source's curves (InferenceX ``thinking_on``/``off``)
``engine``             the serving engine that measured it (vllm, sglang, ...)
``mean_acceptance_length``  L at ``k``: tokens per decode step, the bonus token included. For n-gram and suffix
                       proposals (which propose only where the context finds a match) every decode step counts,
                       a step that proposed nothing adding one token
``proposal_rate``      n-gram and suffix rows: the share of decode steps that proposed (drafts / steps), from the
                       same source (empty: not published; the row's L then counts every step as verifying k
                       guesses, as engines that pad a draft do); empty for model-based drafters (always propose)
``per_position``       rates at positions 1..k, space-separated (empty: not published); n-gram and suffix rows:
                       per drafted step, so 1 + proposal_rate · Σ unconditional rates = L
``per_position_kind``  ``unconditional`` (P(guess j accepted), vLLM's per-position metric:
                       accepted at j / drafts) or ``conditional`` (given 1..j-1 accepted)
``source``             where the figure is; ``note``: what a reader needs to read it
=====================  ===================================================================

Figures are copied, never derived, except where the note says so (a midpoint of a range).
:func:`row_problems` is what the tests check on every row.
"""

from __future__ import annotations

import csv
import functools
import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

LIBRARY_PATH = Path(__file__).resolve().parent / "data" / "acceptance_library.csv"
FIELDS = ("target", "drafter", "method", "dataset", "category", "k", "structure", "temperature", "variant",
          "engine", "mean_acceptance_length", "proposal_rate", "per_position", "per_position_kind", "source", "note")
METHODS = ("eagle", "eagle3", "mtp", "ngram", "suffix", "draft_model", "medusa")
MATCH_METHODS = ("ngram", "suffix")  # propose only where the context finds a match (proposal_rate)
CATEGORIES = ("chat", "coding", "math", "qa", "summarisation", "agentic", "multilingual", "mixed")
STRUCTURES = ("chain", "tree")
KINDS = ("", "unconditional", "conditional")
# sources a reader can open: a repository file at a commit, an issue/PR, or a paper (arXiv id and a table/section)
SOURCE_FORMS = ("@", " issue #", " PR #", "arXiv ")
CONSISTENCY_TOL = 0.02  # |1 + sum(unconditional rates) - L| allowed (figures rounded to 2 decimals, or '~' rates)


@dataclass(frozen=True)
class Row:
    """One published figure (see the module docstring for the columns); ``line`` is its CSV line."""

    line: int
    target: str
    drafter: str
    method: str
    dataset: str
    category: str
    k: int
    structure: str
    temperature: Optional[float]
    variant: str
    engine: str
    mean_acceptance_length: float
    proposal_rate: Optional[float]
    per_position: Tuple[float, ...]
    per_position_kind: str
    source: str
    note: str

    def unconditional(self) -> Tuple[float, ...]:
        """P(guess j accepted), j = 1..len(per_position) (empty when not published)."""
        if self.per_position_kind == "conditional":
            out, p = [], 1.0
            for c in self.per_position:
                p *= c
                out.append(p)
            return tuple(out)
        return self.per_position

    def conditional(self) -> Tuple[float, ...]:
        """α_j = P(guess j accepted | 1..j-1 accepted) (empty when not published)."""
        if self.per_position_kind == "conditional":
            return self.per_position
        out, prev = [], 1.0
        for u in self.per_position:
            out.append(min(1.0, u / prev) if prev > 0 else 0.0)
            prev = u
        return tuple(out)

    def drafted_length(self) -> float:
        """L per proposing step: the row's L less its steps that proposed nothing (an n-gram or suffix row that
        publishes its proposal rate: 1 + (L - 1) / proposal_rate); L itself otherwise."""
        if self.proposal_rate is None:
            return self.mean_acceptance_length
        return 1.0 + (self.mean_acceptance_length - 1.0) / self.proposal_rate

    def describe(self) -> str:
        """One line: pair, dataset, k, L and the source."""
        var = f" {self.variant}" if self.variant else ""
        rate = f", proposal rate {self.proposal_rate:g}" if self.proposal_rate is not None else ""
        tree = " (tree)" if self.structure == "tree" else ""
        return (f"{self.target} + {self.drafter} ({self.method}{tree}) on {self.dataset}{var}, k={self.k}: "
                f"L={self.mean_acceptance_length:g}{rate} [{self.source}]")

    def cite(self) -> Dict:
        """The row as ``summary.json`` names it."""
        return {"line": self.line, "target": self.target, "drafter": self.drafter, "method": self.method,
                "dataset": self.dataset, "variant": self.variant or None, "k": self.k,
                "temperature": self.temperature, "mean_acceptance_length": self.mean_acceptance_length,
                "proposal_rate": self.proposal_rate,
                "per_position": list(self.per_position) or None,
                "per_position_kind": self.per_position_kind or None, "source": self.source}


def _row(line: int, d: Dict[str, str]) -> Row:
    per = tuple(float(x) for x in d["per_position"].split()) if d["per_position"].strip() else ()
    temp = d["temperature"].strip()
    rate = d["proposal_rate"].strip()
    return Row(line, d["target"], d["drafter"], d["method"], d["dataset"], d["category"], int(d["k"]),
               d["structure"], float(temp) if temp else None, d["variant"], d["engine"],
               float(d["mean_acceptance_length"]), float(rate) if rate else None, per, d["per_position_kind"],
               d["source"], d["note"])


def read_library(path: Path = LIBRARY_PATH) -> Tuple[Row, ...]:
    """Every row of a library file (line numbers as in the file); ValueError naming a malformed line."""
    with open(path, newline="", encoding="utf-8") as f:
        reader = csv.DictReader(f)
        if tuple(reader.fieldnames or ()) != FIELDS:
            raise ValueError(f"{path}: columns must be {', '.join(FIELDS)}")
        out = []
        for i, d in enumerate(reader, start=2):
            try:
                out.append(_row(i, d))
            except (TypeError, ValueError) as e:
                raise ValueError(f"{path}: line {i}: {e}") from None
    return tuple(out)


@functools.lru_cache(maxsize=1)
def rows() -> Tuple[Row, ...]:
    """The shipped library (read once)."""
    return read_library()


def row_problems(r: Row) -> List[str]:
    """What is wrong with a row (empty: nothing): fields in range, a source, rates that agree with L."""
    bad = []
    for name in ("target", "drafter", "dataset", "engine", "source"):
        if not getattr(r, name).strip():
            bad.append(f"{name} is empty")
    if r.method not in METHODS:
        bad.append(f"method {r.method!r} not one of {METHODS}")
    if r.category not in CATEGORIES:
        bad.append(f"category {r.category!r} not one of {CATEGORIES}")
    if r.structure not in STRUCTURES:
        bad.append(f"structure {r.structure!r}")
    if r.per_position_kind not in KINDS or bool(r.per_position) != bool(r.per_position_kind):
        bad.append("per_position_kind must say conditional or unconditional exactly when rates are given")
    if not 1 <= r.k <= 64:
        bad.append(f"k = {r.k} outside 1..64")
    if not 1.0 <= r.mean_acceptance_length <= r.k + 1:
        bad.append(f"mean_acceptance_length {r.mean_acceptance_length} outside [1, k + 1]")
    if r.temperature is not None and not 0 <= r.temperature <= 2:
        bad.append(f"temperature {r.temperature}")
    if not any(form in r.source for form in SOURCE_FORMS):
        bad.append("source names no file@commit, issue, PR or paper")
    if r.proposal_rate is not None:
        if r.method not in MATCH_METHODS:
            bad.append(f"proposal_rate given for method {r.method} (a model-based drafter proposes every step)")
        elif not 0 < r.proposal_rate <= 1:
            bad.append(f"proposal_rate {r.proposal_rate} outside (0, 1]")
    if r.per_position:
        if len(r.per_position) != r.k:
            bad.append(f"{len(r.per_position)} per-position rates for k = {r.k}")
        if any(not 0 <= x <= 1 for x in r.per_position):
            bad.append("a per-position rate outside [0, 1]")
        u = r.unconditional()
        if any(b > a + 1e-9 for a, b in zip(u, u[1:])):
            bad.append("unconditional rates rise with position")
        drafted = r.proposal_rate if r.proposal_rate is not None else 1.0  # rates are per drafted step
        if abs(1.0 + drafted * sum(u) - r.mean_acceptance_length) > CONSISTENCY_TOL:
            bad.append(f"1 + proposal rate x sum of unconditional rates = {1 + drafted * sum(u):.4f} disagrees "
                       f"with L = {r.mean_acceptance_length}")
    return bad


def find(target: Optional[str] = None, drafter: Optional[str] = None, dataset: Optional[str] = None,
         method: Optional[str] = None, k: Optional[int] = None, category: Optional[str] = None,
         library: Optional[Sequence[Row]] = None) -> List[Row]:
    """Rows matching every filter given (exact, case-insensitive names)."""
    want = {"target": target, "drafter": drafter, "dataset": dataset, "method": method, "category": category}
    out = []
    for r in (rows() if library is None else library):
        if any(v is not None and getattr(r, n).lower() != str(v).lower() for n, v in want.items()):
            continue
        if k is not None and r.k != k:
            continue
        out.append(r)
    return out


def nearest(target: str, drafter: str, dataset: Optional[str], n: int = 3) -> List[Row]:
    """The ``n`` rows closest to a (target, drafter, dataset) that has no row: same drafter, then target,
    then a name sharing the longest common prefix; ties by line."""
    def score(r: Row):
        def prefix(a: str, b: str) -> int:
            a, b = a.lower(), b.lower()
            i = 0
            while i < min(len(a), len(b)) and a[i] == b[i]:
                i += 1
            return i
        return (-(r.drafter.lower() == drafter.lower()), -(r.target.lower() == target.lower()),
                -(dataset is not None and r.dataset.lower() == str(dataset).lower()),
                -prefix(r.drafter, drafter) - prefix(r.target, target), r.line)
    best, seen = [], set()
    for r in sorted(rows(), key=score):
        key = (r.target, r.drafter, r.dataset)
        if key not in seen:
            seen.add(key)
            best.append(r)
        if len(best) == n:
            break
    return best


# --------------------------------------------------------------------------- model names

# Checkpoint words that do not change the model (format, tuning, date): dropped from a family name.
_FORMAT_WORDS = ("meta", "instruct", "chat", "hf", "it", "base", "fp8", "nvfp4", "mxfp4", "fp4", "bf16", "awq", "int4",
                 "w4a16", "w8a8", "2507", "0528", "0324", "thinking", "preview")
_SIZE = re.compile(r"^(?:a)?\d+(?:\.\d+)?[bm]$|^\d+e$")  # 70b, a17b, 1.7b, 160m, 16e (experts)
# Models of one family under another name, each with why (the architecture and MTP/heads they share):
SIBLINGS: Dict[str, str] = {
    # DeepSeek-R1 is post-trained from DeepSeek-V3-Base (arXiv 2501.12948, Sec. 2); V3.1 and V3.2 continue V3's
    # training and keep its one MTP layer (num_nextn_predict_layers 1 in their config.json)
    "deepseek-r1": "deepseek-v3", "deepseek-v3.1": "deepseek-v3", "deepseek-v3.2": "deepseek-v3",
    "deepseek-v3.1-terminus": "deepseek-v3", "deepseek-v3.2-exp": "deepseek-v3",
    # GLM-5.x: one architecture (GlmMoeDsaForCausalLM, vllm-project/vllm PR #46075) and its NextN (MTP) layer
    "glm-5.1": "glm-5", "glm-5.2": "glm-5",
    # Llama-3.3-70B is Llama-3.1-70B's architecture, post-trained further (its model card)
    "llama-3.3": "llama-3.1",
}


def _base(name: str) -> str:
    return name.split("/")[-1].lower()


def family(name: str) -> str:
    """The model family of a checkpoint name: without organisation, size, format or date words
    (``Qwen/Qwen3.5-122B-A10B`` -> ``qwen3.5``); a registered sibling maps to its family (:data:`SIBLINGS`)."""
    key = _base_family(name)
    return SIBLINGS.get(key, key)


def _base_family(name: str) -> str:
    """The family before the sibling table (DeepSeek-R1 is DeepSeek-V3's sibling, not the same model)."""
    parts = [p for p in re.split(r"[-_]", _base(name)) if p and not _SIZE.match(p) and p not in _FORMAT_WORDS]
    return "-".join(parts)


def size_b(name: str) -> Optional[float]:
    """Total parameters in billions as the name states them (``122B-A10B`` -> 122), or None."""
    for p in re.split(r"[-_]", _base(name)):
        m = re.match(r"^(\d+(?:\.\d+)?)([bm])$", p)
        if m:
            return float(m.group(1)) / (1000.0 if m.group(2) == "m" else 1.0)
    return None


def size_gap(a: str, b: str) -> float:
    sa, sb = size_b(a), size_b(b)
    if sa is None or sb is None:
        return 0.0 if sa == sb else math.inf
    return abs(math.log(sa / sb))


def same_model(a: str, b: str) -> bool:
    """The same model: the same name, or one family and size (another checkpoint or format of it)."""
    return a.lower() == b.lower() or (_base_family(a) == _base_family(b) and size_b(a) == size_b(b))


def pairs(library: Optional[Sequence[Row]] = None) -> int:
    """Distinct (target, drafter, dataset) in the library."""
    return len({(r.target, r.drafter, r.dataset) for r in (rows() if library is None else library)})
