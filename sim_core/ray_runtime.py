"""Ray, started or reached once for whatever runs on it (sweep points as tasks, LLM cohort
shards as actors), with one-line errors instead of minutes of retries."""

from __future__ import annotations

import logging
import socket
import warnings
from typing import Any

from sim_core.errors import ConfigError
from sim_core.experiment import one_line


def check_reachable(address: str, timeout: float = 5.0) -> None:
    """A one-line error now for a ``host:port`` (or ``ray://host:port``) nobody listens on:
    ``ray.init`` would retry it for minutes."""
    host, sep, port = address.removeprefix("ray://").rpartition(":")
    if not sep or not port.isdigit():
        return  # "auto" and other forms: Ray resolves them itself
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=timeout).close()
    except (OSError, ValueError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise ConfigError(one_line(f"cannot reach Ray at '{address}': {reason}", 500)) from None


def start_ray(workers: int, address: str | None) -> tuple[Any, bool]:
    """Ray, and whether this call started it (and so should shut it down)."""
    import ray  # lazily: only a sweep that uses Ray pays for the import

    if ray.is_initialized():
        return ray, False
    try:
        with warnings.catch_warnings():
            # Ray starts its processes with fork+exec: jax's warning about fork in a
            # multithreaded process does not apply (nothing runs between fork and exec).
            warnings.filterwarnings(
                "ignore", message=r"os\.fork\(\) was called", category=RuntimeWarning
            )
            if address:
                ray.init(address=address, log_to_driver=False, logging_level=logging.ERROR)
            else:
                ray.init(
                    num_cpus=workers,
                    include_dashboard=False,
                    log_to_driver=False,
                    logging_level=logging.ERROR,
                )
    except (ConnectionError, ValueError, RuntimeError) as exc:
        where = f"at '{address}'" if address else "locally"
        raise ConfigError(one_line(f"cannot start or reach Ray {where}: {exc}", 500)) from None
    return ray, True
