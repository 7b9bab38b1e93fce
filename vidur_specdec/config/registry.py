"""Registries the config schema reads without importing the layers above it.

Some fields' allowed values belong to code above the schema: the proposers
(``speculative.method``), the verify-attention policies
(``speculative.verify_attention``), the all-reduce models
(``engine.all_reduce``). Each owning module registers its names here
(:func:`register_choices`) when it is imported; the schema names the registry
key (:func:`choices`). Loading a config through :func:`vidur_specdec.load`
(:mod:`vidur_specdec.engine.resolve`) imports every owner first, so the
registries are full whenever a config is validated; reading one before that
is a programming error and says so, never a silent pass.
"""

from __future__ import annotations

from typing import Callable, Dict

_CHOICES: Dict[str, Callable[[], tuple]] = {}


def registrar(table: Dict[str, object]) -> Callable[[str], Callable]:
    """A ``register(name)`` decorator that files the decorated class or function in ``table`` under ``name``."""

    def register(name: str) -> Callable:
        def deco(obj):
            table[name] = obj
            return obj
        return deco
    return register


def register_choices(key: str, names: Callable[[], tuple]) -> None:
    """Let the module that owns ``key``'s values supply them (``names()`` returns a tuple of strings)."""
    _CHOICES[key] = names


def choices(key: str) -> Callable[[], tuple]:
    """A ``choices=`` callable for a schema field whose allowed values are registered under ``key``."""

    def allowed() -> tuple:
        try:
            return tuple(_CHOICES[key]())
        except KeyError:
            raise RuntimeError(f"{key}: its allowed values are not registered yet; load configs with "
                               "vidur_specdec.load (vidur_specdec.engine.resolve), which imports their owners") from None

    allowed.__name__ = f"choices({key})"
    return allowed
