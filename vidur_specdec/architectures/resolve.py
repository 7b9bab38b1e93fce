"""Name resolution: the :class:`~vidur_specdec.architectures.spec.ModelSpec` that ``model:`` (or
``speculative.draft_model``) names: a known model, a config.json aiconfigurator-core ships, or a file."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Mapping, Optional, Union

from vidur_specdec.architectures.errors import ModelError
from vidur_specdec.architectures.known import KNOWN_MODELS
from vidur_specdec.architectures.config_json import read_config_json
from vidur_specdec.architectures.parse import model_from_dict, model_from_hf_config
from vidur_specdec.architectures.spec import ModelSpec
from vidur_specdec.config.files import parse_yaml_text  # duplicate keys refused, as in any config file


def _is_file(path: Path) -> bool:
    """``path.is_file()``, False for a name the OS refuses (too long, a NUL byte)."""
    try:
        return path.is_file()
    except (OSError, ValueError):
        return False


def resolve_model(value: Union[str, Path, Mapping, ModelSpec], key: str = "model") -> ModelSpec:
    """The :class:`ModelSpec` that ``model:`` (or ``speculative.draft_model``) names.

    ``value`` is a :data:`KNOWN_MODELS` name, the path of a Hugging Face
    ``config.json`` (``.json``) or of a YAML file of ModelSpec fields
    (``.yaml``/``.yml``), a mapping of ModelSpec fields, or a ModelSpec.
    A relative path was already resolved against the config that named it
    (:func:`vidur_specdec.config.paths.resolve_paths`). Raises :class:`ModelError` naming ``key``.
    """
    if isinstance(value, ModelSpec):
        return value
    if isinstance(value, Mapping):
        return model_from_dict(value, key)
    name = str(value)
    if name in KNOWN_MODELS:
        return KNOWN_MODELS[name]
    shipped = _shipped_model(name, key)
    if shipped is not None:
        return shipped
    path = Path(name).expanduser()
    if not (name.endswith((".json", ".yaml", ".yml")) or _is_file(path)):
        raise ModelError(f"{key}: unknown model {name!r}; must be one of {', '.join(KNOWN_MODELS)}, "
                         "or the path of a Hugging Face config.json or a YAML of ModelSpec fields")
    if not _is_file(path):
        raise ModelError(f"{key}: file not found: {path}")
    where = f"{key}: {path}"
    if path.suffix == ".json":
        data = read_config_json(path, key)  # unreadable, not UTF-8, not a JSON object: one line naming it
        return model_from_hf_config(_with_hf_quant(data, path.parent / "hf_quant_config.json", where),
                                    path.parent.name or path.stem, where)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        raise ModelError(f"{where}: cannot read the file") from None

    data = parse_yaml_text(text, str(path), key)
    if isinstance(data, Mapping) and ("architectures" in data or "model_type" in data):
        return model_from_hf_config(data, path.stem, where)
    return model_from_dict(data or {}, where)


@lru_cache(maxsize=256)
def _shipped_model(name: str, key: str) -> Optional[ModelSpec]:
    """The spec of the config.json aiconfigurator-core ships for ``name`` (read once per process), or None."""
    shipped = _shipped_config(name, key)
    return None if shipped is None else model_from_hf_config(shipped, name, f"{key}: {name}")


def _shipped_config(name: str, key: str = "model") -> Optional[Mapping]:
    """The ``config.json`` aiconfigurator-core ships for Hugging Face model ``name`` (its ``model_configs/``), or
    None (the name is then a path or unknown); an architecture that cannot be priced is refused by
    :func:`model_from_hf_config` in one line naming it."""
    if name.endswith((".json", ".yaml", ".yml")):
        return None
    from vidur_specdec.architectures import hybrid  # lazy: start-up

    cfg = hybrid.load_aic_config(name, key)
    if cfg is None:
        return None
    path = hybrid.aic_config_path(name)
    return _with_hf_quant(cfg, path.with_name(path.name.replace("_config.json", "_hf_quant_config.json")), name)


def _with_hf_quant(cfg, path: Path, where: str):
    """``cfg`` with the ``hf_quant_config.json`` at ``path`` as its ``quantization_config`` when it has none, as
    vLLM 0.33 reads a ModelOpt checkpoint (``transformers_utils/config.py``: "ModelOpt 0.29.0 and before saves
    the quantization config in a separate hf_quant_config.json")."""
    if not isinstance(cfg, Mapping) or not _is_file(path):
        return cfg
    hf_quant = read_config_json(path, f"model: {where}")  # unreadable or not a JSON object: one line naming it
    from vidur_specdec.architectures import checkpoint_format

    return checkpoint_format.attach_hf_quant_config(cfg, hf_quant)
