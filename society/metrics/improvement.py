"""Collective self-improvement: learning curves, plasticity, transfer, forgetting, artifact reuse.

Framing (as in the agent-plasticity view of evaluating self-improving agents): capability is
measured at checkpoints on the tasks agents train on and on held-out tasks they never see, and
improvement is judged net of what the learning cost. Curves are arrays whose first axis is the
checkpoint; any trailing axes (agents, lineages, replicates) are carried through, so one call
scores a whole population. ``cost`` is the cumulative experience at each checkpoint in one
named unit: ``"interactions"``, ``"tokens"`` or ``"usd"``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from society.metrics._checks import as_float_array, check_nonnegative, check_same_shape

COST_UNITS = ("interactions", "tokens", "usd")


def _curve(x: Any, name: str) -> np.ndarray:
    c = as_float_array(x, name)
    if c.ndim == 0 or c.shape[0] < 2:
        raise ValueError(f"{name} needs at least 2 checkpoints along axis 0, got shape {c.shape}")
    return c


def _div(num: np.ndarray, den: np.ndarray) -> np.ndarray | float:
    """num / den, NaN where den == 0; a float for scalar results."""
    num, den = np.broadcast_arrays(np.asarray(num, float), np.asarray(den, float))
    out = np.divide(num, den, out=np.full(num.shape, np.nan), where=den != 0)
    return _out(out)


def _out(x: np.ndarray) -> np.ndarray | float:
    """A float for a 0-d result, the array otherwise."""
    return float(x) if np.ndim(x) == 0 else np.asarray(x)


def _cost(cost: Any, like: np.ndarray, unit: str) -> np.ndarray:
    if unit not in COST_UNITS:
        raise ValueError(f"unit must be one of {COST_UNITS}, got {unit!r}")
    c = _curve(cost, "cost")
    check_nonnegative(c, "cost")
    if (np.diff(c, axis=0) < 0).any():
        raise ValueError("cost must be cumulative experience, non-decreasing along checkpoints")
    if c.shape != like.shape[: c.ndim]:
        raise ValueError(f"cost shape {c.shape} must be (checkpoints,) or the curve's {like.shape}")
    return c.reshape(c.shape + (1,) * (like.ndim - c.ndim))


def learning_curves(checkpoint: Any, split: Any, score: Any) -> dict[str, dict[str, np.ndarray]]:
    """Mean score per checkpoint for each split (``"train"``, ``"heldout"``...) from tidy rows.

    One row per evaluated (checkpoint, split, task or episode) with its ``score``; returns
    ``{split: {"checkpoint", "mean", "n"}}`` with checkpoints ascending. Vectorised by
    ``np.unique`` and bincounts.
    """
    s = as_float_array(score, "score", ndim=1)
    ck = as_float_array(checkpoint, "checkpoint", ndim=1)
    sp = np.asarray(split)
    check_same_shape(ck, s, "checkpoint", "score")
    check_same_shape(sp, s, "split", "score")
    names, si = np.unique(sp, return_inverse=True)
    points, ci = np.unique(ck, return_inverse=True)
    key = si * len(points) + ci
    n = np.bincount(key, minlength=len(names) * len(points)).reshape(len(names), -1)
    tot = np.bincount(key, weights=s, minlength=len(names) * len(points)).reshape(len(names), -1)
    out = {}
    for row, name in enumerate(names.tolist()):  # loop over splits (a handful), not rows
        has = n[row] > 0
        out[str(name)] = {
            "checkpoint": points[has],
            "mean": tot[row, has] / n[row, has],
            "n": n[row, has],
        }
    return out


def gain_from_first(curve: Any) -> np.ndarray:
    """Improvement over the first checkpoint at every checkpoint: ``g_t = s_t - s_0``."""
    c = _curve(curve, "curve")
    return c - c[0]


def plasticity(heldout: Any, cost: Any, *, unit: str) -> dict[str, Any]:
    """Held-out gain per unit of experience: ``(h_T - h_0) / (cost_T - cost_0)``.

    Rewards improvement on tasks never trained on, net of the experience it took (interactions,
    tokens or USD, named by ``unit``). A learning curve ``h = a + b cost`` has plasticity ``b``.
    Returns ``{"value", "gain", "cost", "unit"}``; ``value`` is NaN where no experience was
    spent. Trailing axes (agents...) give arrays.
    """
    h = _curve(heldout, "heldout")
    c = _cost(cost, h, unit)
    gain, spent = h[-1] - h[0], c[-1] - c[0]
    spent = np.broadcast_to(spent, gain.shape)
    return {"value": _div(gain, spent), "gain": _out(gain), "cost": _out(spent), "unit": unit}


def transfer_ratio(train: Any, heldout: Any) -> float | np.ndarray:
    """Held-out gain over train gain, ``(h_T - h_0) / (s_T - s_0)``, on the same checkpoints.

    1: improvement carries over fully; 0: none does (pure memorisation); NaN when the train
    gain is 0. The ratio of generalisation to in-distribution improvement (cf. transfer in
    Lopez-Paz & Ranzato 2017, NeurIPS, "Gradient Episodic Memory").
    """
    s = _curve(train, "train")
    h = _curve(heldout, "heldout")
    check_same_shape(s, h, "train", "heldout")
    return _div(h[-1] - h[0], s[-1] - s[0])


def forgetting(scores: Any) -> dict[str, Any]:
    """Drop on earlier tasks: per task, best earlier score minus final score.

    ``scores[t, k]`` is the score on task ``k`` at checkpoint ``t`` (NaN before the task was
    first evaluated). ``f_k = max_{t < T} a_{t,k} - a_{T,k}``, the forgetting measure of
    Chaudhry et al. (2018, ECCV, "Riemannian Walk for Incremental Learning"); negative values
    mean the task kept improving. Returns ``per_task`` (NaN for a task with no earlier or no
    final score) and ``mean`` over defined tasks.
    """
    a = np.asarray(scores, dtype=np.float64)
    if a.ndim != 2 or a.shape[0] < 2 or a.shape[1] == 0:
        raise ValueError(f"scores must be 2-D (checkpoints >= 2, tasks >= 1), got shape {a.shape}")
    earlier = a[:-1]
    seen = np.isfinite(earlier).any(0)
    best = np.max(np.where(np.isfinite(earlier), earlier, -np.inf), axis=0)
    per_task = np.where(seen, best - a[-1], np.nan)
    mean = float(np.nanmean(per_task)) if np.isfinite(per_task).any() else float("nan")
    return {"per_task": per_task, "mean": mean}


def artifact_reuse(used_artifact: Any, success: Any) -> dict[str, float]:
    """Share of attempts that used an inherited or shared artifact, and success with vs without.

    ``used_artifact`` and ``success`` are per-attempt 0/1 arrays (``success`` may be a score).
    Returns ``reuse_rate``, ``success_with``, ``success_without``, their ``difference``
    (with - without; NaN when either group is empty) and the group sizes ``n_with``,
    ``n_without``. The difference is observational: reuse is not randomised.
    """
    u = as_float_array(used_artifact, "used_artifact", ndim=1)
    s = as_float_array(success, "success", ndim=1)
    check_same_shape(u, s, "used_artifact", "success")
    if not np.isin(u, (0.0, 1.0)).all():
        raise ValueError("used_artifact must hold only 0/1 or booleans")
    used = u > 0
    n_with, n_without = int(used.sum()), int((~used).sum())
    with_ = float(s[used].mean()) if n_with else float("nan")
    without = float(s[~used].mean()) if n_without else float("nan")
    return {
        "reuse_rate": n_with / len(u),
        "success_with": with_,
        "success_without": without,
        "difference": with_ - without,
        "n_with": n_with,
        "n_without": n_without,
    }


def capability_and_efficiency(scores: Any, cost: Any, *, unit: str) -> dict[str, Any]:
    """Endpoint capability and acquisition efficiency per agent, reported separately.

    ``scores[t, a]``: held-out score of agent (or lineage) ``a`` at checkpoint ``t``;
    ``cost``: cumulative experience, shape ``(T,)`` (shared) or ``(T, A)``. ``endpoint`` is
    ``scores[-1]``; ``efficiency`` is ``(scores[-1] - scores[0]) / (cost[-1] - cost[0])``
    (NaN where nothing was spent). The best final agent need not be the one that improved most
    efficiently, so both winners are returned: ``best_endpoint``, ``best_efficiency`` (index,
    or None when every efficiency is NaN) and ``same_agent``.
    """
    s = _curve(scores, "scores")
    if s.ndim != 2:
        raise ValueError(f"scores must be 2-D (checkpoints, agents), got shape {s.shape}")
    c = _cost(cost, s, unit)
    endpoint = s[-1]
    eff = np.asarray(_div(s[-1] - s[0], np.broadcast_to(c[-1] - c[0], endpoint.shape)))
    best_end = int(np.argmax(endpoint))
    best_eff = int(np.nanargmax(eff)) if np.isfinite(eff).any() else None
    return {
        "endpoint": endpoint,
        "efficiency": eff,
        "unit": unit,
        "best_endpoint": best_end,
        "best_efficiency": best_eff,
        "same_agent": best_eff == best_end,
    }
