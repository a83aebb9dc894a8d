"""Cooperation metrics: how often agents help, how much, who gains, and whether help is returned.

All functions are pure and vectorised over agents or interaction events (numpy; jax arrays
and lists are accepted through ``np.asarray``). Degenerate inputs follow one rule: empty input
raises ``ValueError``; a statistic that is mathematically undefined on valid input (a
correlation with a constant variable) is NaN, as documented per function.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from society.metrics._checks import as_float_array, check_nonnegative, check_same_shape, pearson
from society.metrics.network import GraphLike, edge_array


def cooperation_rate(cooperated: Any) -> float:
    """Share of cooperative acts: ``mean(c)`` over all entries of a 0/1 (or boolean) array.

    The basic order parameter of evolutionary game theory on graphs (e.g. the fraction of
    cooperators in Nowak & May 1992, Nature 359:826). Any shape: (events,), (time, agents)...
    """
    c = as_float_array(cooperated, "cooperated")
    if not np.isin(c, (0.0, 1.0)).all():
        raise ValueError("cooperated must hold only 0/1 or booleans (1 = cooperated)")
    return float(c.mean())


def donation_fraction(given: Any, endowment: Any) -> float:
    """Mean fraction of the endowment given: ``mean(given_i / endowment_i)``.

    The standard outcome of public-goods and dictator games (e.g. Fehr & Gachter 2000, AER
    90:980, contributions as a share of the endowment). ``endowment`` is a scalar or an array
    broadcastable to ``given``; it must be positive, ``given`` non-negative.
    """
    g = as_float_array(given, "given")
    e = as_float_array(endowment, "endowment")
    check_nonnegative(g, "given")
    if e.min() <= 0:
        raise ValueError(f"endowment must be positive, got minimum {e.min()}")
    try:
        return float(np.mean(g / e))
    except ValueError as exc:
        raise ValueError(
            f"endowment shape {e.shape} does not broadcast to given {g.shape}"
        ) from exc


def welfare(payoffs: Any) -> dict[str, float]:
    """Utilitarian welfare: ``{"total": sum_i pi_i, "mean": sum_i pi_i / n}`` of payoffs."""
    p = as_float_array(payoffs, "payoffs")
    return {"total": float(p.sum()), "mean": float(p.mean())}


def gini(values: Any) -> float:
    """Gini coefficient of non-negative resources or payoffs (Gini 1912, Variabilita e mutabilita).

    ``G = sum_i sum_j |x_i - x_j| / (2 n^2 mean(x))``, computed in O(n log n) from the sorted
    values as ``G = 2 sum_i i x_(i) / (n sum x) - (n + 1) / n`` (i = 1..n, ascending). This is
    the population (uncorrected) Gini: 0 for perfect equality, ``(n - 1) / n`` when one agent
    holds everything; 1/3 for a uniform and 1/2 for an exponential distribution in the limit.
    All zeros is defined as 0.0 (perfect equality); negative values raise.
    """
    x = as_float_array(values, "values").ravel()
    check_nonnegative(x, "values")
    total = x.sum()
    if total == 0:
        return 0.0
    n = x.size
    ranks = np.arange(1, n + 1, dtype=np.float64)
    return float(2.0 * np.dot(ranks, np.sort(x)) / (n * total) - (n + 1) / n)


GINI_PAIRWISE_UP_TO = 32  # values: n^2 differences cost less than a sort up to here


def gini_jax(values: Any) -> Any:
    """:func:`gini` as a traceable JAX function (a study's reporter inside compiled steps).
    Up to :data:`GINI_PAIRWISE_UP_TO` values, the sum over pairs (no sort: XLA's CPU sorts
    are slow, and a vmapped sort of many small groups, e.g. the fishers of 1e4 lakes, cost
    most of a month); more, the sorted formula."""
    import jax.numpy as jnp

    x = jnp.ravel(values)
    pairs = x.size <= GINI_PAIRWISE_UP_TO
    x = (x if pairs else jnp.sort(x)).astype(jnp.float32)  # ints sort ~10x faster than floats
    n, total = x.size, x.sum()
    if pairs:
        g = jnp.abs(x[:, None] - x[None, :]).sum() / (2.0 * n * total)
    else:
        g = 2.0 * jnp.dot(jnp.arange(1, n + 1, dtype=jnp.float32), x) / (n * total) - (n + 1) / n
    return jnp.where(total > 0, g, 0.0)


def flow_totals(donor: Any, recipient: Any, amount: Any, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Per-agent totals ``(given, received)`` from interaction events (donor, recipient, amount).

    A bincount over events, the usual way to turn a recorded transfer log into the per-agent
    vectors that :func:`reciprocity` and :func:`gini` take.
    """
    d = np.asarray(donor)
    r = np.asarray(recipient)
    a = as_float_array(amount, "amount", nonempty=False)
    if d.shape != r.shape or d.shape != a.shape or d.ndim != 1:
        raise ValueError(
            f"donor, recipient and amount must be 1-D of equal length, got {d.shape}, {r.shape}, {a.shape}"
        )
    for name, ids in (("donor", d), ("recipient", r)):
        if ids.size and (
            not np.issubdtype(ids.dtype, np.integer) or ids.min() < 0 or ids.max() >= n
        ):
            raise ValueError(f"{name} must hold integer agent ids in [0, {n})")
    return (
        np.bincount(d.astype(np.int64), weights=a, minlength=n),
        np.bincount(r.astype(np.int64), weights=a, minlength=n),
    )


def reciprocity(given: Any, received: Any) -> float:
    """Pearson correlation between what agents give and what they received.

    ``r = corr(given, received)`` over aligned entries of any shape: per-agent totals (see
    :func:`flow_totals`), or for lagged reciprocity ``given[1:]`` against ``received[:-1]`` of
    a (time, agents) record, the "help those who helped you" signature of direct reciprocity
    (Trivers 1971, Q. Rev. Biol. 46:35). In [-1, 1]; NaN when either side is constant.
    """
    g = as_float_array(given, "given")
    r = as_float_array(received, "received")
    check_same_shape(g, r, "given", "received")
    if g.size < 2:
        raise ValueError("reciprocity needs at least two aligned (given, received) pairs")
    return float(np.clip(pearson(g.ravel(), r.ravel()), -1.0, 1.0))


def assortment(trait: Any, graph: GraphLike) -> float:
    """Assortment of a trait (cooperator = 1) over network edges: Newman's assortativity.

    ``r = corr(x_u, x_v)`` over edges listed in both directions (Newman 2003, Phys. Rev. E
    67:026126). For a 0/1 cooperator trait it equals ``P(C | neighbour of C) - P(C | neighbour
    of D)``, the assortment that decides whether altruism can evolve (Fletcher & Doebeli 2009,
    Proc. R. Soc. B 276:13). +1: cooperators only meet cooperators; -1: only defectors. NaN when
    every node on an edge has the same trait. ``trait`` has one entry per node (see
    :mod:`society.metrics.network` for node order); a graph without edges raises.
    """
    x = as_float_array(trait, "trait", ndim=1)
    n, edges = edge_array(graph, len(x) if isinstance(graph, np.ndarray) else None)
    if n != len(x):
        raise ValueError(f"trait must have one entry per node ({n}), got {len(x)}")
    if len(edges) == 0:
        raise ValueError("assortment needs a graph with at least one edge")
    a, b = x[edges[:, 0]], x[edges[:, 1]]
    mu = 0.5 * (a.mean() + b.mean())
    a, b = a - mu, b - mu
    var = 0.5 * (np.dot(a, a) + np.dot(b, b))
    return float(np.clip(np.dot(a, b) / var, -1.0, 1.0)) if var > 0 else float("nan")


def reputation_conditioned_giving(
    gave: Any, reputation: Any, bins: int | Any | None = None
) -> dict[str, Any]:
    """Giving as a function of the recipient's reputation, the signature of indirect reciprocity.

    For each donation decision, ``gave`` (0/1 or an amount) and ``reputation`` (the recipient's
    reputation or image score when the decision was made; Nowak & Sigmund 1998, Nature 393:573).
    Returns ``reputation`` (the distinct levels when ``bins`` is None, else bin centres),
    ``mean_giving`` per level (NaN for an empty bin), ``count`` per level, and ``slope``, the
    least-squares slope of giving on reputation (NaN when reputation is constant). ``bins`` is
    a number of equal-width bins or an array of bin edges, as in ``numpy.histogram``.
    """
    g = as_float_array(gave, "gave", ndim=1)
    rep = as_float_array(reputation, "reputation", ndim=1)
    check_same_shape(g, rep, "gave", "reputation")
    if bins is None:
        levels, idx = np.unique(rep, return_inverse=True)
    else:
        edges = np.histogram_bin_edges(rep, bins=bins)
        levels = 0.5 * (edges[:-1] + edges[1:])
        # Right-closed last bin, as numpy.histogram does; values outside the edges are dropped.
        idx = np.clip(np.searchsorted(edges, rep, side="right") - 1, 0, len(levels) - 1)
        inside = (rep >= edges[0]) & (rep <= edges[-1])
        g, rep, idx = g[inside], rep[inside], idx[inside]
        if g.size == 0:
            raise ValueError("bins: no reputation value falls inside the given bin edges")
    count = np.bincount(idx, minlength=len(levels))
    sums = np.bincount(idx, weights=g, minlength=len(levels))
    mean = np.divide(sums, count, out=np.full(len(levels), np.nan), where=count > 0)
    rc = rep - rep.mean()
    var = np.dot(rc, rc)
    slope = float(np.dot(rc, g - g.mean()) / var) if var > 0 else float("nan")
    return {"reputation": levels, "mean_giving": mean, "count": count, "slope": slope}
