"""Relative paths in config files: resolved against the folder of the file that names them.

A run config, a sweep file and a sweep's ``base:`` file may each name files
(a trace, a profile folder, a model or device YAML); a relative path there
means "next to this file", not "in the working directory". :data:`PATH_KEYS`
lists the path-valued dotted keys; :func:`resolve_paths` rewrites them in a raw
mapping before validation; :func:`resolve_path` is the one helper for code that
reads another path-valued key (``resolve_path(value, cfg.base_dir)``).
Re-exported by :mod:`vidur_specdec.config`.

A ``predictor.cache_dir`` that a config file names inside its own folder is not
trusted (a config folder from someone else could hold doctored cache entries
that would change every answer): it is dropped, so the run uses the per-user
cache, with one ``warning:`` line (:func:`untrusted_cache_dir`). A folder named
outside the config's folder, or given with ``--set``, is used as named.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, Dict, Optional, Sequence, Union

# Path-valued keys, resolved against the folder of the file that names them (a run config,
# a sweep file, or a sweep's base file): key -> (keywords, suffixes). A value among the
# keywords (e.g. ``shipped``) stays as written; with suffixes, only a value ending in one
# of them is a path (``model: my_model.yaml``; a registered model name stays a name).
PATH_KEYS: Dict[str, tuple] = {
    "profiles": (("shipped", "built"), None),
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


CACHE_KEY = "predictor.cache_dir"
_WARNED = set()  # cache folders already said to be untrusted in this process


def untrusted_cache_dir(value: Any, base: Union[str, Path]) -> bool:
    """True when ``value`` (a resolved ``predictor.cache_dir``) lies inside the config folder ``base``."""
    if not isinstance(value, str) or not value:
        return False
    try:
        Path(value).expanduser().resolve().relative_to(Path(base).resolve())
    except ValueError:
        return False
    except (OSError, RuntimeError):  # a loop or a name the OS refuses: not trusted either
        return True
    return True


def resolve_paths(data: Dict, base: Union[str, Path, None]) -> Dict:
    """Resolve every :data:`PATH_KEYS` value present in the raw mapping ``data`` against ``base`` (in place).

    A ``predictor.cache_dir`` inside ``base`` is set to None (the per-user cache), with one warning line.
    """
    if base is None or not isinstance(data, dict):
        return data
    for key, (keywords, suffixes) in PATH_KEYS.items():
        *parents, last = key.split(".")
        node = data
        for part in parents:
            node = node.get(part) if isinstance(node, dict) else None
        if isinstance(node, dict) and last in node:
            node[last] = resolve_path(node[last], base, keywords, suffixes)
            if key == CACHE_KEY and untrusted_cache_dir(node[last], base):
                if node[last] not in _WARNED:
                    _WARNED.add(node[last])
                    print(f"warning: {CACHE_KEY}: {node[last]} is inside the config's own folder {base}, whose "
                          "cache entries are not trusted; using the per-user cache (name a folder outside the "
                          "config's folder to share one)", file=sys.stderr)
                node[last] = None
    return data
