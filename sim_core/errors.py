"""Errors shared across the engine (kept import-light for fast CLI start-up)."""


class ConfigError(ValueError):
    """Bad user input; the message is one line naming the parameter and what is accepted."""
