"""Across-replicate summaries used by ``summary.json`` and by metrics."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

# Two-sided 97.5% quantiles of Student's t for small degrees of freedom; beyond 30 the
# normal quantile is within 1.5% and is used (keeps scipy out of the core dependencies).
_T975 = [
    12.706,
    4.303,
    3.182,
    2.776,
    2.571,
    2.447,
    2.365,
    2.306,
    2.262,
    2.228,
    2.201,
    2.179,
    2.160,
    2.145,
    2.131,
    2.120,
    2.110,
    2.101,
    2.093,
    2.086,
    2.080,
    2.074,
    2.069,
    2.064,
    2.060,
    2.056,
    2.052,
    2.048,
    2.045,
    2.042,
]


def t_quantile_975(dof: int) -> float:
    """0.975 quantile of Student's t with ``dof`` degrees of freedom (normal beyond 30)."""
    if dof < 1:
        raise ValueError(f"degrees of freedom must be >= 1, got {dof}")
    return _T975[dof - 1] if dof <= len(_T975) else 1.959964


def summarize(
    values: Sequence[float] | np.ndarray, bounds: tuple[float, float] | None = None
) -> dict:
    """Mean and 95% t-interval over replicates: ``{"mean", "ci95": [lo, hi], "values"}``.

    The interval is mean +- t_{0.975, n-1} * sd / sqrt(n) (Student's t). With one replicate
    the interval is the single value itself (no spread can be estimated); NaN values are
    kept in ``values`` and ignored in the mean and interval. An empty input is an error.
    ``bounds`` (lowest, highest possible value, e.g. (0, 1) for a fraction) clip the
    interval: with few replicates t is large, and a fraction's interval must not leave [0, 1].
    """
    vals = np.asarray(values, dtype=float).ravel()
    if vals.size == 0:
        raise ValueError("summarize needs at least one replicate value")
    finite = vals[np.isfinite(vals)]
    if finite.size == 0:
        mean, lo, hi = math.nan, math.nan, math.nan
    elif finite.size == 1:
        mean = lo = hi = float(finite[0])
    else:
        mean = float(finite.mean())
        half = t_quantile_975(finite.size - 1) * float(finite.std(ddof=1)) / math.sqrt(finite.size)
        lo, hi = mean - half, mean + half
    if bounds is not None and finite.size > 1:
        low, high = bounds
        if not low <= high:
            raise ValueError(f"bounds must be (low, high) with low <= high, got {bounds!r}")
        lo, hi = max(lo, low), min(hi, high)
    return {"mean": mean, "ci95": [lo, hi], "values": [float(v) for v in vals]}
