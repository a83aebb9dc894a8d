"""Errors shared across the engine (kept import-light for fast CLI start-up)."""


class ConfigError(ValueError):
    """Bad user input; the message is one line naming the parameter and what is accepted."""


class RunError(RuntimeError):
    """A run cannot go on for a reason outside the scenario (e.g. its model server died);
    the message is one line saying what happened and what to do."""
