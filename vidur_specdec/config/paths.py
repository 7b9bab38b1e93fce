"""Relative paths in config files: resolved against the folder of the file that names them.

A run config, a sweep file and a sweep's ``base:`` file may each name files
(a trace, a profile folder, a model or device YAML); a relative path there
means "next to this file", not "in the working directory". :data:`PATH_KEYS`
lists the path-valued dotted keys; :func:`resolve_paths` rewrites them in a raw
mapping before validation; :func:`resolve_path` is the one helper for code that
reads another path-valued key (``resolve_path(value, cfg.base_dir)``).
Re-exported by :mod:`vidur_specdec.config`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Dict, Optional, Sequence, Union

# Path-valued keys, resolved against the folder of the file that names them (a run config,
# a sweep file, or a sweep's base file): key -> (keywords, suffixes). A value among the
# keywords (e.g. ``shipped``) stays as written; with suffixes, only a value ending in one
# of them is a path (``model: my_model.yaml``; a registered model name stays a name).
PATH_KEYS: Dict[str, tuple] = {
    "profiles": (("shipped",), None),
    "workload.trace_file": ((), None),
    "speculative.draft_profiles": ((), None),
    "predictor.cache_dir": ((), None),
    "model": ((), (".yaml", ".yml", ".json")),  # a ModelSpec YAML or a Hugging Face config.json
    "device": ((), (".yaml", ".yml")),
    "speculative.draft_model": ((), (".yaml", ".yml", ".json")),
    "speculative.model": ((), (".yaml", ".yml")),  # an EAGLE/MTP/Medusa head described by a YAML
    "speculative.acceptance_trace": ((), None),
}


def resolve_path(value: Any, base: Union[str, Path, None], keywords: Sequence[str] = (),
                 suffixes: Optional[Sequence[str]] = None) -> Any:
    """``value`` as a path resolved against folder ``base``.

    None, non-strings, the ``keywords`` (e.g. ``shipped``), values without one of
    ``suffixes`` (when given), absolute paths and ``~`` paths come back as written
    (``~`` expanded); ``base`` None means the working directory (the value is
    returned unchanged).
    """
    if not isinstance(value, str) or not value or value in keywords or base is None:
        return value
    if suffixes and not value.lower().endswith(tuple(suffixes)):
        return value
    p = Path(value).expanduser()
    if p.is_absolute():
        return str(p) if value.startswith("~") else value
    return str(Path(base) / p)


def resolve_paths(data: Dict, base: Union[str, Path, None]) -> Dict:
    """Resolve every :data:`PATH_KEYS` value present in the raw mapping ``data`` against ``base`` (in place)."""
    if base is None or not isinstance(data, dict):
        return data
    for key, (keywords, suffixes) in PATH_KEYS.items():
        *parents, last = key.split(".")
        node = data
        for part in parents:
            node = node.get(part) if isinstance(node, dict) else None
        if isinstance(node, dict) and last in node:
            node[last] = resolve_path(node[last], base, keywords, suffixes)
    return data
