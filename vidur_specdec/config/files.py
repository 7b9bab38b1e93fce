"""Config files and overrides: YAML reading (duplicate keys refused), ``--set key.path=value``, merging.

Everything here works on plain mappings, before validation
(:func:`vidur_specdec.config.build_config`); errors are one-line
:class:`~vidur_specdec.config.errors.ConfigError` naming the key or file.
"""

from __future__ import annotations

import contextlib
import copy
import re
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, Sequence, Union

import yaml

from vidur_specdec.config.errors import ConfigError

MAX_YAML_DEPTH = 100  # nesting levels of mappings and lists in one config file or --set value
MAX_YAML_VALUES = 1_000_000  # values (scalars, lists, mappings) once YAML aliases are expanded
MAX_YAML_BYTES = 1 << 20  # a config file (or one --set value) is at most 1 MiB of text
MAX_SHOWN_CHARS = 80  # a value quoted in an error message is cut to this many characters


class _Loader(yaml.SafeLoader):
    """PyYAML's safe loader, reading ``1e6``, ``5e-1`` and ``-2E+3`` as numbers (YAML 1.1 reads them as text)."""


_Loader.yaml_implicit_resolvers = {k: list(v) for k, v in yaml.SafeLoader.yaml_implicit_resolvers.items()}
_Loader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(r"^[-+]?(?:[0-9][0-9_]*(?:\.[0-9_]*)?|\.[0-9_]+)[eE][-+]?[0-9]+$"),
    list("-+0123456789."))


def shown(value, limit: int = MAX_SHOWN_CHARS) -> str:
    """``repr(value)`` cut to ``limit`` characters (with the full length), for one-line messages."""
    text = repr(value)
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text)} characters)"


def parse_set(assignment: str) -> tuple:
    """Split ``key.path=value``; the value is parsed as YAML (``4``, ``0.8``, ``[0.9, 0.8]``, ``null``)."""
    if "=" not in assignment:
        raise ConfigError(f"--set {assignment}: expected key.path=value")
    key, raw = assignment.split("=", 1)
    key = key.strip()
    if not key:
        raise ConfigError(f"--set {assignment}: empty key")
    try:
        value = _load_bounded(raw, f"--set {key}") if raw.strip() else ""
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
    """The first repeated key in a composed YAML tree: ``(dotted path, first line, repeat line)`` or None.

    Each node is visited once, however many aliases point at it (a node reached again through an
    alias was checked the first time), so a small file of nested aliases takes linear time.
    """
    seen_nodes = set()
    stack = [(node, path)]
    while stack:
        node, path = stack.pop()
        if id(node) in seen_nodes:
            continue
        seen_nodes.add(id(node))
        if isinstance(node, yaml.MappingNode):
            seen: Dict[Any, int] = {}
            children = []
            for key_node, value_node in node.value:
                key = key_node.value if isinstance(key_node, yaml.ScalarNode) else None
                line = key_node.start_mark.line + 1
                here = f"{path}.{key}" if path else str(key)
                if key is not None and key_node.tag != "tag:yaml.org,2002:merge":
                    if key in seen:
                        return here, seen[key], line
                    seen[key] = line
                children.append((value_node, here))
            stack.extend(reversed(children))
        elif isinstance(node, yaml.SequenceNode):
            stack.extend(reversed([(item, f"{path}[{i}]") for i, item in enumerate(node.value)]))
    return None


def _expanded_size(root) -> tuple:
    """(values once every alias is expanded, deepest nesting) of a composed YAML tree, in linear time."""
    size: Dict[int, int] = {}
    depth: Dict[int, int] = {}
    stack = [(root, False)]
    while stack:
        node, done = stack.pop()
        if id(node) in size:
            continue
        kids = []
        if isinstance(node, yaml.MappingNode):
            kids = [n for pair in node.value for n in pair]
        elif isinstance(node, yaml.SequenceNode):
            kids = list(node.value)
        if not done:
            stack.append((node, True))
            stack.extend((k, False) for k in kids if id(k) not in size)
            continue
        size[id(node)] = min(1 + sum(size.get(id(k), 0) for k in kids), 10 * MAX_YAML_VALUES)
        depth[id(node)] = (1 + max((depth.get(id(k), 0) for k in kids), default=0)) if kids else 0
    return size.get(id(root), 0), depth.get(id(root), 0)


def _load_bounded(text: str, where: str, what: Optional[str] = None):
    """Parse YAML with this module's loader, refusing deep nesting and alias bombs (one-line ConfigError).

    Limits: :data:`MAX_YAML_BYTES` characters of text, :data:`MAX_YAML_DEPTH` nested levels,
    :data:`MAX_YAML_VALUES` values after alias expansion. Raises ``yaml.YAMLError`` for a syntax error (the caller words it).
    """
    label = f"{what}: {where}" if what else where
    if len(text) > MAX_YAML_BYTES:
        raise ConfigError(f"{label} is {len(text):,} characters long; a config is at most {MAX_YAML_BYTES:,} "
                          "(1 MiB): a value that long is not a config value")
    try:
        node = yaml.compose(text, Loader=_Loader)
    except RecursionError:
        raise ConfigError(f"{label} is nested too deeply (more than {MAX_YAML_DEPTH} levels of lists "
                          "and mappings)") from None
    if node is None:
        return None
    values, deepest = _expanded_size(node)
    if deepest > MAX_YAML_DEPTH:
        raise ConfigError(f"{label} is nested too deeply ({deepest} levels of lists and mappings; "
                          f"at most {MAX_YAML_DEPTH})")
    if values > MAX_YAML_VALUES:
        raise ConfigError(f"{label} expands to more than {MAX_YAML_VALUES:,} values once its YAML aliases "
                          "(*name) are expanded; write the values out or use fewer nested aliases")
    dup = _duplicate_key(node)
    if dup:
        key, first, line = dup
        raise ConfigError(f"{key}: duplicate key in {where} (line {line}; first at line {first}); "
                          "give each key once")
    try:
        return yaml.load(text, Loader=_Loader)
    except RecursionError:  # pragma: no cover - the depth check above comes first
        raise ConfigError(f"{label} is nested too deeply") from None


def parse_yaml_text(text: str, where: str, what: str = "--config") -> Any:
    """Parse YAML text; a syntax error or a repeated key is a one-line :class:`ConfigError` naming ``where``.

    ``what`` is the option or config key that named the file (``--config``, ``device``, ``model``).

    PyYAML keeps the last of two equal keys silently; here the repeat is an error naming its dotted
    path and both lines.
    """
    try:
        return _load_bounded(text, where, what)
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


MAX_TABLE_BYTES = 4 << 30  # a CSV table (profile, trace, measured or step log) is at most 4 GiB
MAX_SHOWN_COLUMNS = 8  # columns listed in a message about a table's header


@contextlib.contextmanager
def naming(dest: Union[str, Path], tmp: Union[str, Path, None] = None):
    """Inside: an OSError names the user's path ``dest`` (``error: runs/x/requests.csv: No space left on
    device``), not a temporary sibling nor nothing at all (a write that ran out of space names no file).
    ``tmp``: a temporary file or folder standing in for ``dest``; a path under it is named under ``dest``."""
    try:
        yield
    except OSError as e:
        name = e.filename
        if name is None:
            name = dest
        elif tmp is not None:
            try:
                name = Path(dest) / Path(name).relative_to(Path(tmp)) if Path(name) != Path(tmp) else dest
            except ValueError:
                pass
        what = e.strerror or str(e) or type(e).__name__
        raise OSError(e.errno, what, str(name)) from None


def read_csv_table(path: Union[str, Path], what: str, columns: Sequence[str] = (),
                   integers: Optional[Mapping[str, tuple]] = None, rows: bool = True):
    """Read a CSV table defensively; every problem is one :class:`ConfigError` line naming ``what`` and the file.

    Refused: a missing or unreadable file, one larger than :data:`MAX_TABLE_BYTES`, text that is
    not UTF-8 (the byte offset is named), no header, no rows (when ``rows``), a missing column of
    ``columns``, and in ``integers`` (column -> ``(low, high)``) a value that is not a whole number
    within the bounds (the line is named; a huge number such as ``1e400`` is out of bounds).
    Returns a :class:`pandas.DataFrame`.
    """
    import pandas as pd

    p = Path(path)
    if not p.is_file():
        raise ConfigError(f"{what}: file not found: {p}")
    try:
        size = p.stat().st_size
    except OSError as e:
        raise ConfigError(f"{what}: cannot read {p}: {e.strerror or e}") from None
    if size > MAX_TABLE_BYTES:
        raise ConfigError(f"{what}: {p} is {size:,} bytes; a table is at most {MAX_TABLE_BYTES:,} bytes")
    try:
        df = pd.read_csv(p, encoding="utf-8", low_memory=False)
    except UnicodeDecodeError as e:
        raise ConfigError(f"{what}: {p} is not UTF-8 text (byte {e.start}); save it as UTF-8") from None
    except pd.errors.EmptyDataError:
        raise ConfigError(f"{what}: {p} is empty: no header line") from None
    except (pd.errors.ParserError, ValueError, OverflowError) as e:
        raise ConfigError(f"{what}: {p} is not a CSV table: {str(e).splitlines()[0][:120]}") from None
    except OSError as e:
        raise ConfigError(f"{what}: cannot read {p}: {e.strerror or e}") from None
    missing = [c for c in columns if c not in df.columns]
    if missing:
        has = list(map(str, df.columns))
        more = f", ... ({len(has)} in all)" if len(has) > MAX_SHOWN_COLUMNS else ""
        raise ConfigError(f"{what}: {p} lacks column{'s' if len(missing) > 1 else ''} {', '.join(missing[:5])} "
                          f"(it has {', '.join(has[:MAX_SHOWN_COLUMNS])}{more})")
    if rows and df.empty:
        raise ConfigError(f"{what}: {p} has a header but no rows")
    for col, (low, high) in (integers or {}).items():
        if col not in df.columns:
            continue
        num = pd.to_numeric(df[col], errors="coerce")
        bad = num.isna() | ~num.between(low, high) | (num.fillna(0) % 1 != 0)
        if bad.any():
            i = int(bad.to_numpy().argmax())
            raise ConfigError(f"{what}: {p} line {i + 2}, column {col}: {shown(df[col].iloc[i])} is not a whole "
                              f"number in [{low:,}, {high:,}]")
    return df


def read_jsonl(p: Union[str, Path], key: str):
    """A JSON-lines table: one object a line; a line that is not one is named (one line)."""
    import json

    import pandas as pd

    p = Path(p)
    text = read_text(p, key, MAX_TABLE_BYTES)
    rows = []
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except ValueError:
            obj = None
        if not isinstance(obj, dict):
            raise ConfigError(f"{key}: {p} line {n} is not a JSON object")
        rows.append(obj)
    if not rows:
        raise ConfigError(f"{key}: {p} is empty: no rows")
    return pd.DataFrame(rows)


def read_text(path: Union[str, Path], what: str, max_bytes: int) -> str:
    """A UTF-8 text file of at most ``max_bytes``; missing, unreadable, larger or not UTF-8 is one line."""
    p = Path(path)
    try:
        size = p.stat().st_size
        if size > max_bytes:
            raise ConfigError(f"{what}: {p} is {size:,} bytes; at most {max_bytes:,}")
        raw = p.read_bytes()
    except FileNotFoundError:
        raise ConfigError(f"{what}: file not found: {p}") from None
    except OSError as e:
        raise ConfigError(f"{what}: cannot read {p}: {e.strerror or e}") from None
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ConfigError(f"{what}: {p} is not UTF-8 text (byte {e.start}); save it as UTF-8") from None
