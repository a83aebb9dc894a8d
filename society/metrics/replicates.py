"""Across-replicate summaries of recorded metrics: mean and 95% interval, method stated.

Works on the recorder's tidy rows (columns ``replicate``, ``time``, ``metric``, ``value``;
others such as ``run`` or ``labels`` are carried but not used) as written to a run
directory's ``metrics.parquet``. Two intervals: Student's t (``sim_core.stats.summarize``,
the default, used by ``summary.json``) and the percentile bootstrap (:func:`bootstrap_ci`).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from sim_core.stats import summarize

REQUIRED_COLUMNS = ("replicate", "time", "metric", "value")
METHODS = {"t": "student-t", "bootstrap": "percentile-bootstrap"}


def load_metrics(path: str | Path) -> pd.DataFrame:
    """Read a run directory's ``metrics.parquet`` (or a parquet file given directly)."""
    p = Path(path)
    if p.is_dir():
        p = p / "metrics.parquet"
    if not p.is_file():
        raise ValueError(f"path: no metrics file at {p} (give a run directory or a .parquet file)")
    frame = pd.read_parquet(p)
    _check_frame(frame)
    return frame


def _check_frame(frame: Any) -> None:
    if not isinstance(frame, pd.DataFrame):
        raise TypeError(f"frame must be a pandas DataFrame, got {type(frame).__name__}")
    missing = [c for c in REQUIRED_COLUMNS if c not in frame.columns]
    if missing:
        raise ValueError(f"frame lacks columns {missing}; needs {list(REQUIRED_COLUMNS)}")


def bootstrap_ci(
    values: Any, *, n_boot: int = 10_000, seed: int = 0, level: float = 0.95
) -> dict[str, Any]:
    """Mean and percentile-bootstrap interval (Efron & Tibshirani 1993, ch. 13).

    Resamples the finite values with replacement ``n_boot`` times (seeded) and takes the
    ``(1 - level) / 2`` and ``(1 + level) / 2`` quantiles of the resampled means. Same shape
    and conventions as ``sim_core.stats.summarize``: NaN kept in ``values`` but ignored; one
    value gives a zero-width interval; empty input raises. Prefer it to the t-interval when
    replicate values are skewed and there are at least ~10 of them; with fewer, the bootstrap
    interval is too narrow.
    """
    vals = np.asarray(values, dtype=float).ravel()
    if vals.size == 0:
        raise ValueError("bootstrap_ci needs at least one replicate value")
    if n_boot < 1:
        raise ValueError(f"n_boot must be >= 1, got {n_boot}")
    if not 0.0 < level < 1.0:
        raise ValueError(f"level must lie in (0, 1), got {level}")
    finite = vals[np.isfinite(vals)]
    if finite.size == 0:
        mean = lo = hi = math.nan
    elif finite.size == 1:
        mean = lo = hi = float(finite[0])
    else:
        rng = np.random.default_rng(seed)
        means = finite[rng.integers(0, finite.size, size=(n_boot, finite.size))].mean(axis=1)
        lo, hi = np.quantile(means, [(1 - level) / 2, (1 + level) / 2])
        mean, lo, hi = float(finite.mean()), float(lo), float(hi)
    return {"mean": mean, "ci95": [lo, hi], "values": [float(v) for v in vals]}


def _select(frame: pd.DataFrame, metric: str, time: float | None) -> pd.DataFrame:
    """One row per replicate: the value at ``time``, or at each replicate's last time."""
    rows = frame[frame["metric"] == metric]
    if rows.empty:
        known = sorted(frame["metric"].unique().tolist())
        raise ValueError(f"metric {metric!r} not in frame; recorded metrics: {known}")
    if time is None:
        last = rows.groupby("replicate")["time"].transform("max")
        rows = rows[rows["time"] == last]
    else:
        rows = rows[rows["time"] == time]
        if rows.empty:
            raise ValueError(f"time: metric {metric!r} has no rows at time {time}")
    if rows["replicate"].duplicated().any():
        raise ValueError(
            f"metric {metric!r} has several rows per replicate at one time; "
            "filter the frame (e.g. by its labels column) to one row per replicate first"
        )
    return rows.sort_values("replicate")


def across_replicates(
    frame: pd.DataFrame,
    metric: str,
    *,
    time: float | None = None,
    method: str = "t",
    n_boot: int = 10_000,
    seed: int = 0,
) -> dict[str, Any]:
    """Mean and 95% interval of one metric across replicates.

    Takes each replicate's value at ``time`` (default: its last recorded time for that
    metric; at a given ``time``, replicates without a row there are left out, see
    ``replicates``) and summarises with ``method="t"`` (Student's t via ``sim_core.stats.summarize``)
    or ``"bootstrap"`` (:func:`bootstrap_ci`). Returns ``{"mean", "ci95", "values", "method",
    "n", "replicates"}``; ``method`` names the interval used.
    """
    _check_frame(frame)
    if method not in METHODS:
        raise ValueError(f"method must be one of {list(METHODS)}, got {method!r}")
    rows = _select(frame, metric, time)
    values = rows["value"].to_numpy(dtype=float)
    out = summarize(values) if method == "t" else bootstrap_ci(values, n_boot=n_boot, seed=seed)
    out["method"] = METHODS[method]
    out["n"] = int(np.isfinite(values).sum())
    out["replicates"] = rows["replicate"].tolist()
    return out


def summarize_metrics(
    frame: pd.DataFrame,
    *,
    metrics: list[str] | None = None,
    time: float | None = None,
    method: str = "t",
    n_boot: int = 10_000,
    seed: int = 0,
) -> dict[str, dict[str, Any]]:
    """:func:`across_replicates` for every metric in the frame (or those listed), keyed by name.

    The JSON-ready block ``summary.json`` stores under its headline numbers.
    """
    _check_frame(frame)
    names = sorted(frame["metric"].unique().tolist()) if metrics is None else list(metrics)
    # Loop over metric names (tens), each a vectorised selection.
    return {
        str(m): across_replicates(frame, m, time=time, method=method, n_boot=n_boot, seed=seed)
        for m in names
    }
