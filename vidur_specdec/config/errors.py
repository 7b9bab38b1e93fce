"""The one exception for bad input: a one-line message naming the key or file (CLI exit status 2)."""


class ConfigError(ValueError):
    """A bad config value; the message is one line naming the key."""
