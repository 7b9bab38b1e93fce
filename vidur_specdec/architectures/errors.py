"""The error a bad model name or model file raises (shared by models.py and moe.py)."""

from __future__ import annotations

from vidur_specdec.config import ConfigError


class ModelError(ConfigError):
    """A bad model name or model file; the message is one line naming the cause."""
