"""Input checks shared by the metric modules: one place for the one-line error messages."""

from __future__ import annotations

import numpy as np


def as_float_array(
    x: object, name: str, *, ndim: int | None = None, nonempty: bool = True
) -> np.ndarray:
    """``x`` as a float64 array, rejecting NaN, wrong rank and (by default) empty input."""
    try:
        arr = np.asarray(x, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"{name} must be numeric array-like, got {type(x).__name__}") from exc
    if ndim is not None and arr.ndim != ndim:
        raise ValueError(f"{name} must be {ndim}-D, got shape {arr.shape}")
    if nonempty and arr.size == 0:
        raise ValueError(f"{name} is empty; need at least one value")
    if np.isnan(arr).any():
        raise ValueError(f"{name} contains NaN; drop or fill missing values first")
    return arr


def check_nonnegative(arr: np.ndarray, name: str) -> None:
    """Raise if any entry is negative (counts, resources, costs)."""
    if arr.size and arr.min() < 0:
        raise ValueError(f"{name} must be non-negative, got minimum {arr.min()}")


def check_same_shape(a: np.ndarray, b: np.ndarray, name_a: str, name_b: str) -> None:
    """Raise unless two per-agent (or per-event) arrays line up."""
    if a.shape != b.shape:
        raise ValueError(
            f"{name_a} and {name_b} must have the same shape, got {a.shape} and {b.shape}"
        )


def pearson(x: np.ndarray, y: np.ndarray) -> float:
    """Pearson correlation of two equal-length vectors; NaN when either is constant."""
    xc = x - x.mean()
    yc = y - y.mean()
    den = np.sqrt((xc * xc).sum() * (yc * yc).sum())
    return float((xc * yc).sum() / den) if den > 0 else float("nan")
