"""Config files and overrides: YAML reading (duplicate keys refused), ``--set key.path=value``, merging.

Everything here works on plain mappings, before validation
(:func:`vidur_specdec.config.build_config`); errors are one-line
:class:`~vidur_specdec.config.errors.ConfigError` naming the key or file.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any, Dict, List, Mapping, Sequence, Union

import yaml

from vidur_specdec.config.errors import ConfigError


def parse_set(assignment: str) -> tuple:
    """Split ``key.path=value``; the value is parsed as YAML (``4``, ``0.8``, ``[0.9, 0.8]``, ``null``)."""
    if "=" not in assignment:
        raise ConfigError(f"--set {assignment}: expected key.path=value")
    key, raw = assignment.split("=", 1)
    key = key.strip()
    if not key:
        raise ConfigError(f"--set {assignment}: empty key")
    try:
        value = yaml.safe_load(raw) if raw.strip() else ""
    except yaml.YAMLError:
        value = raw
    return key, value


def set_dotted(data: Dict, key: str, value) -> None:
    """Set ``data[a][b][c] = value`` for ``key = "a.b.c"``, creating mappings on the way (in place).

    A mapping value merges into an existing mapping key by key (``workload={qps: 1}`` changes
    only ``workload.qps``); any other value replaces what was there.
    """
    node = data
    parts = key.split(".")
    for i, part in enumerate(parts[:-1]):
        child = node.get(part)
        if child is None:
            child = node[part] = {}
        elif not isinstance(child, dict):
            raise ConfigError(f"{'.'.join(parts[:i + 1])}: is a value, cannot set {key}")
        node = child
    last = parts[-1]
    if isinstance(value, Mapping) and isinstance(node.get(last), dict):
        _merge(node[last], value)
    else:
        node[last] = copy.deepcopy(dict(value) if isinstance(value, Mapping) else value)


def _merge(dst: Dict, src: Mapping) -> None:
    for k, v in src.items():
        if isinstance(v, Mapping) and isinstance(dst.get(k), dict):
            _merge(dst[k], v)
        else:
            dst[k] = copy.deepcopy(dict(v) if isinstance(v, Mapping) else v)


def override_list(overrides: Union[str, Sequence[str], None]) -> List[str]:
    """``overrides`` as a list: one ``key.path=value`` string, or a list/tuple of them, or None."""
    if overrides is None:
        return []
    if isinstance(overrides, str):
        return [overrides]
    if isinstance(overrides, Mapping) or not isinstance(overrides, (list, tuple)):
        raise ConfigError(f"overrides: must be a 'key.path=value' string or a list of them, got {overrides!r}")
    for o in overrides:
        if not isinstance(o, str):
            raise ConfigError(f"overrides: each entry must be a 'key.path=value' string, got {o!r}")
    return list(overrides)


def apply_overrides(data: Dict, overrides: Union[str, Sequence[str], None]) -> Dict:
    """Return a copy of ``data`` with each ``key.path=value`` override applied (a string or a list of them)."""
    out = copy.deepcopy(data) if data else {}
    for assignment in override_list(overrides):
        set_dotted(out, *parse_set(assignment))
    return out


def _duplicate_key(node, path: str = ""):
    """The first repeated key in a composed YAML tree: ``(dotted path, first line, repeat line)`` or None."""
    if isinstance(node, yaml.MappingNode):
        seen: Dict[Any, int] = {}
        for key_node, value_node in node.value:
            key = key_node.value if isinstance(key_node, yaml.ScalarNode) else None
            line = key_node.start_mark.line + 1
            here = f"{path}.{key}" if path else str(key)
            if key is not None and key_node.tag != "tag:yaml.org,2002:merge":
                if key in seen:
                    return here, seen[key], line
                seen[key] = line
            found = _duplicate_key(value_node, here)
            if found:
                return found
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            found = _duplicate_key(item, f"{path}[{i}]")
            if found:
                return found
    return None


def parse_yaml_text(text: str, where: str, what: str = "--config") -> Any:
    """Parse YAML text; a syntax error or a repeated key is a one-line :class:`ConfigError` naming ``where``.

    ``what`` is the option or config key that named the file (``--config``, ``device``, ``model``).

    PyYAML keeps the last of two equal keys silently; here the repeat is an error naming its dotted
    path and both lines.
    """
    try:
        dup = _duplicate_key(yaml.compose(text, Loader=yaml.SafeLoader))
        if dup:
            key, first, line = dup
            raise ConfigError(f"{key}: duplicate key in {where} (line {line}; first at line {first}); "
                              "give each key once")
        return yaml.safe_load(text)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        at = f" (line {mark.line + 1})" if mark else ""
        raise ConfigError(f"{what}: {where} is not valid YAML{at}") from None


def read_yaml(path: Union[str, Path], what: str = "--config") -> Dict:
    """Read a YAML mapping; a missing, unreadable, non-UTF-8 or unparsable file is a :class:`ConfigError`.

    A key given twice in one mapping is an error naming the key and its line.
    """
    p = Path(path)
    if not p.is_file():
        raise ConfigError(f"{what}: file not found: {p}")
    try:
        raw = p.read_bytes()
    except OSError as e:
        raise ConfigError(f"{what}: cannot read {p}: {e.strerror or e}") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ConfigError(f"{what}: {p} is not UTF-8 text (byte {e.start}); save it as UTF-8") from None
    data = parse_yaml_text(text, str(p), what)
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"{what}: {p} must hold a mapping at top level")
    return data
