"""Config fields with their allowed ranges, and the generic validator that reads them.

Every config dataclass field is declared with :func:`_f`, which stores its
allowed range (``lo``/``hi`` inclusive, or ``choices``) in the field's
metadata; :func:`_build` turns a (partial) mapping into a dataclass, checking
each value with :func:`_coerce` and naming the offending dotted key in one line::

    speculative.acceptance_rate: must be a number in [0, 1], got 1.5
"""

from __future__ import annotations

import copy
import dataclasses
import functools
import typing
from dataclasses import field
from typing import Any, List, Mapping, Union

from vidur_specdec.config.errors import ConfigError


def _f(default, *, lo=None, hi=None, choices=None, doc=""):
    """A dataclass field with validation metadata (``lo``/``hi`` inclusive)."""
    meta = {"lo": lo, "hi": hi, "choices": choices, "doc": doc}
    if isinstance(default, (list, dict)) or dataclasses.is_dataclass(default):
        return field(default_factory=lambda: copy.deepcopy(default), metadata=meta)
    return field(default=default, metadata=meta)


def _type_name(tp) -> str:
    origin = typing.get_origin(tp)
    if origin is Union:
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        return f"{_type_name(args[0])} or null"
    if origin in (list, List):
        return f"a list of {_type_name(typing.get_args(tp)[0])}s"
    return {int: "an integer", float: "a number", str: "a string", bool: "true/false"}.get(tp, str(tp))


def _range_text(meta, tp) -> str:
    if typing.get_origin(tp) is Union:
        inner = [a for a in typing.get_args(tp) if a is not type(None)][0]
        return _range_text(meta, inner) + " or null"
    lo, hi, choices = meta.get("lo"), meta.get("hi"), meta.get("choices")
    if callable(choices):
        choices = choices()
    if choices:
        return "one of " + ", ".join(str(c) for c in choices)
    if lo is not None and hi is not None:
        num = (lambda x: str(x)) if tp is int else (lambda x: f"{x:g}")
        return f"{_type_name(tp)} in [{num(lo)}, {num(hi)}]"
    return _type_name(tp)


def _plain(value: Any) -> Any:
    """numpy scalars (``numpy.int64``, ``numpy.float32``, ``numpy.bool_``) and arrays as Python values."""
    try:
        # lazy: optional dependency (ImportError handled)
        import numpy as np
    except ImportError:  # pragma: no cover - numpy is a dependency
        return value
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    return value


def _coerce(key: str, value: Any, tp, meta) -> Any:
    """Check one value against its declared type and range; return it normalised."""
    origin = typing.get_origin(tp)
    if origin is Union:
        if value is None:
            return None
        inner = [a for a in typing.get_args(tp) if a is not type(None)][0]
        try:
            return _coerce(key, value, inner, meta)
        except ConfigError as e:
            if typing.get_origin(inner) in (list, List) and "[" in str(e).split(":")[0]:
                raise  # an element of the list is wrong: its own message is precise
            raise ConfigError(f"{key}: must be {_range_text(meta, tp)}, got {value!r}") from None
    value = _plain(value)
    bad = ConfigError(f"{key}: must be {_range_text(meta, tp)}, got {value!r}")
    if origin in (list, List):
        if not isinstance(value, (list, tuple)):
            raise bad
        inner = typing.get_args(tp)[0]
        return [_coerce(f"{key}[{i}]", v, inner, meta) for i, v in enumerate(value)]
    if tp is bool:
        if not isinstance(value, bool):
            raise bad
        return value
    if tp is int:
        if isinstance(value, bool) or not isinstance(value, int):
            if isinstance(value, float) and value.is_integer():
                value = int(value)
            else:
                raise bad
    elif tp is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise bad
        value = float(value)
        if value != value:  # NaN
            raise bad
    elif tp is str:
        if not isinstance(value, str):
            raise bad
    choices = meta.get("choices")
    if callable(choices):
        choices = choices()
    if choices and value not in choices:
        raise bad
    lo, hi = meta.get("lo"), meta.get("hi")
    if tp in (int, float) and ((lo is not None and value < lo) or (hi is not None and value > hi)):
        raise bad
    return value


@functools.lru_cache(maxsize=None)
def _hints_and_fields(cls) -> tuple:
    """A config dataclass's resolved type hints and its fields by name (read once per class: resolving the hints
    is most of the cost of building a config)."""
    return typing.get_type_hints(cls), {f.name: f for f in dataclasses.fields(cls)}


def _build(cls, data: Mapping, prefix: str, base=None):
    if not isinstance(data, Mapping):
        raise ConfigError(f"{prefix.rstrip('.') or 'config'}: must be a mapping, got {data!r}")
    hints, fmap = _hints_and_fields(cls)
    unknown = [k for k in data if k not in fmap]
    if unknown:
        key = f"{prefix}{unknown[0]}"
        raise ConfigError(f"{key}: unknown key; allowed under {prefix.rstrip('.') or 'top level'}: "
                          + ", ".join(fmap))
    obj = copy.deepcopy(base) if base is not None else cls()
    for name, value in data.items():
        tp, meta = hints[name], fmap[name].metadata
        if dataclasses.is_dataclass(tp):
            setattr(obj, name, _build(tp, value, f"{prefix}{name}.", getattr(obj, name)))
        else:
            setattr(obj, name, _coerce(f"{prefix}{name}", value, tp, meta))
    return obj
