"""Model architectures known to the simulator (Llama-family dimensions).

One place for every model's shape: the profile builder, the memory model and
the drafter all read it from here. ``model:`` (and ``speculative.draft_model``)
in a run config is resolved by :func:`resolve_model`: a name in
:data:`KNOWN_MODELS`, a Hugging Face ``config.json`` of a Llama-architecture
model, or a YAML file of :class:`ModelSpec` fields.

This module gathers the public names of the modules that do each job:
:mod:`~vidur_specdec.architectures.spec` (the :class:`ModelSpec` dataclass),
:mod:`~vidur_specdec.architectures.known` (:data:`KNOWN_MODELS`, :func:`get_model`),
:mod:`~vidur_specdec.architectures.parse` (:func:`model_from_dict`, :func:`model_from_hf_config` and the
shape checks) and :mod:`~vidur_specdec.architectures.resolve` (:func:`resolve_model`).
"""

from __future__ import annotations

from vidur_specdec.architectures.errors import ModelError
from vidur_specdec.architectures.known import KNOWN_MODELS, get_model
from vidur_specdec.architectures.parse import model_from_dict, model_from_hf_config
from vidur_specdec.architectures.resolve import resolve_model
from vidur_specdec.architectures.spec import ModelSpec
from vidur_specdec.config import ConfigError  # noqa: F401 (ModelError's base, imported from here by callers)

__all__ = ["KNOWN_MODELS", "ModelError", "ModelSpec", "get_model", "model_from_dict", "model_from_hf_config",
           "resolve_model"]
