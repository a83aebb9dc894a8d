"""Mix specs such as ``"disc:49,alld:1"`` or ``"rules:8,learned:1,llm:1"``: one parser for
strategy mixes and agent-kind splits (pure Python, so scenario configs can validate with it
without importing jax)."""

from __future__ import annotations

import math
import re

_NAME = re.compile(r"[A-Za-z0-9_.-]+")


def parse_weights(
    spec: str, accepted: tuple[str, ...] | None = None, param: str = "mix"
) -> dict[str, float]:
    """``"disc:49,alld:1"`` -> ``{"disc": 49.0, "alld": 1.0}``. Weights are relative; a name
    alone weighs 1. Errors are one line naming ``param`` and what is accepted; ``accepted``
    None allows any name of letters, digits, '_', '.', '-'."""
    if not isinstance(spec, str) or not spec.strip():
        raise ValueError(f"{param} must be a string like 'name:weight,...', got {spec!r}")
    out: dict[str, float] = {}
    for part in spec.split(","):
        name, _, w = part.strip().partition(":")
        name = name.strip()
        if (accepted is not None and name not in accepted) or not _NAME.fullmatch(name):
            names = (
                ", ".join(accepted) if accepted is not None else "letters, digits, '_', '.', '-'"
            )
            raise ValueError(f"{param}: unknown entry {name!r} in {spec!r}; accepted: {names}")
        if name in out:
            raise ValueError(f"{param}: {name!r} appears twice in {spec!r}")
        try:
            weight = float(w) if w.strip() else 1.0
        except ValueError:
            raise ValueError(f"{param}: weight of {name!r} must be a number, got {w!r}") from None
        if not math.isfinite(weight) or weight < 0:
            raise ValueError(f"{param}: weight of {name!r} must be >= 0, got {w!r}")
        out[name] = weight
    if sum(out.values()) <= 0:
        raise ValueError(f"{param}: weights must not all be 0, got {spec!r}")
    return out
