"""Reading a model's ``config.json`` (a user's, or one aiconfigurator-core ships): one checked reader."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Mapping

from vidur_specdec.architectures.errors import ModelError

MAX_CONFIG_BYTES = 16 << 20  # a model's config.json is at most 16 MiB (the largest known is under 100 KiB)


def read_config_json(path, where: str) -> Mapping:
    """A model ``config.json`` (a user's, or one aiconfigurator-core ships), read and parsed: one
    :class:`ModelError` naming the file when it cannot be read, is not UTF-8, is too large, is not JSON
    or is not a JSON object."""
    p = Path(path)
    try:
        size = p.stat().st_size
        if size > MAX_CONFIG_BYTES:
            raise ModelError(f"{where}: {p} is {size:,} bytes; a config.json is at most {MAX_CONFIG_BYTES:,}")
        text = p.read_text(encoding="utf-8")
    except UnicodeDecodeError as e:
        raise ModelError(f"{where}: {p} is not UTF-8 text (byte {e.start})") from None
    except OSError as e:
        raise ModelError(f"{where}: cannot read {p}: {e.strerror or type(e).__name__}") from None
    try:
        data = json.loads(text)
    except ValueError as e:  # JSONDecodeError, and a number too large for Python
        raise ModelError(f"{where}: {p} is not valid JSON ({str(e).splitlines()[0][:100]})") from None
    if not isinstance(data, dict):
        raise ModelError(f"{where}: {p} must hold a JSON object (a config.json), got a {type(data).__name__}")
    return data
