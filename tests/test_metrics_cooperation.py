"""Cooperation metrics against hand-computed and closed-form values, plus property tests."""

from __future__ import annotations

import networkx as nx
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from society.metrics import (
    assortment,
    cooperation_rate,
    donation_fraction,
    flow_totals,
    gini,
    reciprocity,
    reputation_conditioned_giving,
    welfare,
)

FAST = settings(max_examples=50, deadline=None)
nonneg = arrays(
    np.float64,
    st.integers(1, 60),
    elements=st.floats(0, 1e6, allow_nan=False, allow_infinity=False),
)


def test_cooperation_rate_and_donation_and_welfare_by_hand():
    assert cooperation_rate([1, 0, 1, 1]) == 0.75
    assert cooperation_rate(np.array([[True, False], [False, False]])) == 0.25
    assert donation_fraction([2, 5, 0], 10) == pytest.approx((0.2 + 0.5 + 0.0) / 3)
    assert donation_fraction([1, 1], [2, 4]) == pytest.approx((0.5 + 0.25) / 2)
    assert welfare([1.0, -2.0, 4.0]) == {"total": 3.0, "mean": 1.0}


def test_bad_input_raises_clear_errors():
    with pytest.raises(ValueError, match="cooperated"):
        cooperation_rate([0, 2])
    with pytest.raises(ValueError, match="empty"):
        cooperation_rate([])
    with pytest.raises(ValueError, match="endowment must be positive"):
        donation_fraction([1], [0])
    with pytest.raises(ValueError, match="values must be non-negative"):
        gini([1, -1])
    with pytest.raises(ValueError, match="NaN"):
        gini([1, np.nan])
    with pytest.raises(TypeError, match="numeric"):
        welfare(["a", "b"])


def test_gini_closed_forms():
    assert gini([1, 2, 3, 4]) == pytest.approx(0.25)  # sum|xi-xj| = 20 over 2 n^2 mean = 80
    assert gini([5, 5, 5]) == 0.0
    assert gini(np.zeros(7)) == 0.0  # documented: all zeros is perfect equality
    n = 10
    assert gini(np.r_[np.zeros(n - 1), 3.0]) == pytest.approx((n - 1) / n)


def test_jax_arrays_are_accepted():
    import jax.numpy as jnp

    assert gini(jnp.array([1.0, 2.0, 3.0, 4.0])) == pytest.approx(0.25)
    assert cooperation_rate(jnp.array([True, False])) == 0.5


def test_gini_of_known_distributions():
    rng = np.random.default_rng(0)
    # The sample Gini's standard error at n = 2e5 is ~1e-3 for these laws; 5e-3 is 5 s.e.
    assert gini(rng.uniform(0, 1, 200_000)) == pytest.approx(1 / 3, abs=5e-3)
    assert gini(rng.exponential(1.0, 200_000)) == pytest.approx(1 / 2, abs=5e-3)


@FAST
@given(nonneg, st.randoms(use_true_random=False), st.floats(0.01, 100))
def test_gini_properties(x, rnd, scale):
    g = gini(x)
    assert -1e-12 <= g <= 1 - 1 / len(x) + 1e-12
    perm = np.array(rnd.sample(range(len(x)), len(x)))
    assert gini(x[perm]) == pytest.approx(g, abs=1e-9)  # agent relabelling
    # scale invariance, where every value and its scaled copy are normal floats (a subnormal
    # such as 5e-324 times 0.01 underflows to 0 or loses its digits: another distribution)
    normal = np.all((x == 0) | (np.minimum(x, x * scale) >= np.finfo(np.float64).tiny))
    if x.sum() > 0 and normal:
        assert gini(x * scale) == pytest.approx(g, abs=1e-9)


def test_flow_totals_and_reciprocity():
    given_, received = flow_totals([0, 0, 1, 2], [1, 2, 0, 0], [3.0, 1.0, 2.0, 4.0], n=4)
    np.testing.assert_array_equal(given_, [4, 2, 4, 0])
    np.testing.assert_array_equal(received, [6, 3, 1, 0])
    assert reciprocity([1, 2, 3], [2, 4, 6]) == pytest.approx(1.0)
    assert reciprocity([1, 2, 3], [3, 2, 1]) == pytest.approx(-1.0)
    # Hand value: x = [0, 1, 2, 3], y = [1, 0, 3, 2]: cov 0.75, var 1.25 each -> r = 0.6
    assert reciprocity([0, 1, 2, 3], [1, 0, 3, 2]) == pytest.approx(0.6)
    assert np.isnan(reciprocity([1, 1, 1], [1, 2, 3]))  # documented: constant side -> NaN
    with pytest.raises(ValueError, match="recipient"):
        flow_totals([0], [9], [1.0], n=4)
    with pytest.raises(ValueError, match="same shape"):
        reciprocity([1, 2], [1, 2, 3])


@FAST
@given(
    arrays(np.float64, 30, elements=st.floats(-100, 100)),
    arrays(np.float64, 30, elements=st.floats(-100, 100)),
)
def test_reciprocity_bounded_and_relabel_invariant(g, r):
    rho = reciprocity(g, r)
    perm = np.random.default_rng(1).permutation(30)
    if np.isnan(rho):
        assert np.isnan(reciprocity(g[perm], r[perm]))
    else:
        assert -1 <= rho <= 1
        assert reciprocity(g[perm], r[perm]) == pytest.approx(rho, abs=1e-9)


def test_assortment_extremes():
    two_cliques = nx.disjoint_union(nx.complete_graph(4), nx.complete_graph(5))
    trait = np.r_[np.ones(4), np.zeros(5)]
    assert assortment(trait, two_cliques) == pytest.approx(1.0)
    bip = nx.complete_bipartite_graph(3, 4)
    assert assortment(np.r_[np.ones(3), np.zeros(4)], bip) == pytest.approx(-1.0)
    assert np.isnan(assortment(np.ones(4), nx.cycle_graph(4)))  # no variation: undefined
    with pytest.raises(ValueError, match="at least one edge"):
        assortment([0, 1], np.zeros((0, 2), dtype=int))
    with pytest.raises(ValueError, match="one entry per node"):
        assortment([0, 1], nx.path_graph(3))


def test_assortment_matches_networkx_and_conditional_probabilities():
    rng = np.random.default_rng(3)
    g = nx.gnm_random_graph(200, 800, seed=3)
    x = rng.random(200)
    nx.set_node_attributes(g, dict(enumerate(x)), "x")
    assert assortment(x, g) == pytest.approx(nx.numeric_assortativity_coefficient(g, "x"))
    # Binary trait: r = P(C | neighbour C) - P(C | neighbour D), counted over edge ends.
    c = (rng.random(200) < 0.4).astype(float)
    e = np.array(g.edges())
    a, b = np.r_[c[e[:, 0]], c[e[:, 1]]], np.r_[c[e[:, 1]], c[e[:, 0]]]
    expected = b[a == 1].mean() - b[a == 0].mean()
    assert assortment(c, g) == pytest.approx(expected)
    # Edge arrays listing each edge once or in both directions give the same value.
    assert assortment(c, e) == pytest.approx(assortment(c, np.r_[e, e[:, ::-1]]))


@FAST
@given(st.integers(0, 10_000))
def test_assortment_invariant_to_node_relabelling(seed):
    rng = np.random.default_rng(seed)
    e = rng.integers(0, 40, size=(120, 2))
    x = rng.integers(0, 2, 40).astype(float)
    r = assortment(x, e.astype(np.int64))
    perm = rng.permutation(40)  # node i becomes perm[i]
    x2 = np.empty_like(x)
    x2[perm] = x
    r2 = assortment(x2, perm[e])
    assert (np.isnan(r) and np.isnan(r2)) or r2 == pytest.approx(r, abs=1e-9)
    assert np.isnan(r) or -1 <= r <= 1


def test_reputation_conditioned_giving():
    gave = [1, 1, 0, 0, 1, 1, 1, 0]
    rep = [1, 1, 0, 0, 1, 0, 1, 0]  # good recipients: 4/4 helped; bad: 1/4
    out = reputation_conditioned_giving(gave, rep)
    np.testing.assert_array_equal(out["reputation"], [0, 1])
    np.testing.assert_allclose(out["mean_giving"], [0.25, 1.0])
    np.testing.assert_array_equal(out["count"], [4, 4])
    assert out["slope"] == pytest.approx(0.75)  # binary regressor: slope = difference of means
    x = np.linspace(0, 1, 101)
    binned = reputation_conditioned_giving(2 * x + 1, x, bins=4)
    assert binned["slope"] == pytest.approx(2.0)
    np.testing.assert_allclose(binned["reputation"], [0.125, 0.375, 0.625, 0.875])
    assert binned["count"].sum() == 101
    empty = reputation_conditioned_giving([1.0, 1.0], [0.0, 1.0], bins=[0, 0.25, 0.5, 1.0])
    assert np.isnan(empty["mean_giving"][1])  # documented: empty bin -> NaN
