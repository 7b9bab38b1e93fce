"""Which drafter or head a run uses, and whether the head was trained for the target.

A head is trained on one target's hidden states; on another target (a Llama-3.3
head on a Llama-3.1 target, say) it runs, but its acceptance is not the one
published for it (the target it was trained on: :attr:`HeadSpec.trained_for
<vidur_specdec.speculation.proposers.heads.HeadSpec>`). :func:`describe_proposer` names the weights and, for such a
pairing, one warning line; both go into ``summary.json``.
"""

from __future__ import annotations

from typing import Dict, Optional

from vidur_specdec.speculation.proposers.heads import KNOWN_HEADS
from vidur_specdec.speculation.proposers import weights_name

_SAME = {"meta-llama/Meta-Llama-3.1-8B-Instruct": "meta-llama/Llama-3.1-8B-Instruct"}


def _norm(name: str) -> str:
    return _SAME.get(name, name).lower()


def pairing_warning(head: Optional[str], target: str) -> Optional[str]:
    """One line when ``head`` was trained for another target than ``target``; else None."""
    known = KNOWN_HEADS.get(head or "")
    trained = known.trained_for if known is not None else None
    if not trained or _norm(trained) == _norm(target):
        return None
    return (f"warning: speculative.model: {head} was trained for {trained}, not {target}; its acceptance "
            "on this target is not the published one (set the acceptance you measured)")


def describe_proposer(cfg) -> Dict:
    """``{"proposer_weights": name or None, "proposer_pairing_warning": line or None}``."""
    spec = cfg.speculative
    if not spec.enabled:
        return {"proposer_weights": None, "proposer_pairing_warning": None}

    try:
        name = weights_name(cfg)
    except Exception:  # noqa: BLE001 - naming must never stop a run; the proposer itself checks the config
        name = None
    return {"proposer_weights": name,
            "proposer_pairing_warning": pairing_warning(name, cfg.model) if spec.method != "draft_model" else None}
