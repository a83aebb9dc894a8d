"""Self-improvement metrics on synthetic learning curves with closed-form answers."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from society.metrics import (
    artifact_reuse,
    capability_and_efficiency,
    forgetting,
    gain_from_first,
    learning_curves,
    plasticity,
    transfer_ratio,
)

FAST = settings(max_examples=50, deadline=None)


def test_learning_curves_from_tidy_rows():
    ck = [0, 0, 0, 1, 1, 1, 1, 2]
    split = ["train", "train", "heldout", "train", "train", "heldout", "heldout", "train"]
    score = [0.2, 0.4, 0.1, 0.5, 0.7, 0.2, 0.4, 0.9]
    out = learning_curves(ck, split, score)
    np.testing.assert_allclose(out["train"]["checkpoint"], [0, 1, 2])
    np.testing.assert_allclose(out["train"]["mean"], [0.3, 0.6, 0.9])
    np.testing.assert_array_equal(out["train"]["n"], [2, 2, 1])
    np.testing.assert_allclose(out["heldout"]["checkpoint"], [0, 1])
    np.testing.assert_allclose(out["heldout"]["mean"], [0.1, 0.3])


def test_gain_and_linear_plasticity():
    cost = np.array([0.0, 1e3, 4e3, 1e4])
    heldout = 0.2 + 5e-5 * cost
    np.testing.assert_allclose(gain_from_first(heldout), 5e-5 * cost)
    out = plasticity(heldout, cost, unit="tokens")
    assert out["value"] == pytest.approx(5e-5)
    assert out["gain"] == pytest.approx(0.5) and out["cost"] == 1e4 and out["unit"] == "tokens"


def test_saturating_curve_plasticity_closed_form():
    # h(c) = h_max (1 - exp(-c / tau)): plasticity over [0, C] = h_max (1 - e^{-C/tau}) / C.
    h_max, tau, big_c = 0.8, 200.0, 1000.0
    cost = np.linspace(0, big_c, 11)
    h = h_max * (1 - np.exp(-cost / tau))
    expected = h_max * (1 - math.exp(-big_c / tau)) / big_c
    assert plasticity(h, cost, unit="interactions")["value"] == pytest.approx(expected)


@FAST
@given(
    st.lists(st.floats(0, 1e4), min_size=2, max_size=8),
    st.floats(-1, 1),
    st.floats(-1e-2, 1e-2),
)
def test_plasticity_of_any_linear_curve_is_its_slope(increments, a, b):
    cost = np.cumsum(increments)
    out = plasticity(a + b * cost, cost, unit="interactions")
    if cost[-1] == cost[0]:
        assert np.isnan(out["value"])
    elif abs(b) * (cost[-1] - cost[0]) >= 1e-6 * max(1.0, abs(a)):
        # the gain stands well above the rounding of a (ulp ~2e-16 |a|); below that (e.g. a
        # subnormal cost increment) a + b * cost rounds to a and no slope is recoverable
        assert out["value"] == pytest.approx(b, rel=1e-6, abs=1e-9)


def test_plasticity_per_agent_and_degenerate():
    cost = np.array([0.0, 2.0, 4.0])
    curves = np.array([[0.0, 0.0], [1.0, 0.5], [2.0, 1.0]])  # agents gain 2 and 1
    np.testing.assert_allclose(plasticity(curves, cost, unit="usd")["value"], [0.5, 0.25])
    assert np.isnan(plasticity([0.1, 0.3], [5.0, 5.0], unit="usd")["value"])  # nothing spent
    with pytest.raises(ValueError, match="unit must be one of"):
        plasticity([0, 1], [0, 1], unit="dollars")
    with pytest.raises(ValueError, match="non-decreasing"):
        plasticity([0, 1, 2], [0, 5, 3], unit="tokens")
    with pytest.raises(ValueError, match="at least 2 checkpoints"):
        plasticity([0.5], [1.0], unit="tokens")


def test_transfer_ratio():
    assert transfer_ratio([0.2, 0.4, 0.6], [0.1, 0.15, 0.2]) == pytest.approx(0.25)
    assert np.isnan(transfer_ratio([0.5, 0.5], [0.1, 0.2]))  # no train gain: undefined
    np.testing.assert_allclose(transfer_ratio([[0, 0], [1, 2]], [[0, 0], [1, 1]]), [1.0, 0.5])


def test_forgetting_by_hand():
    nan = np.nan
    # rows: checkpoints; columns: tasks learned at checkpoints 0, 1, 2.
    scores = np.array(
        [
            [0.9, nan, nan],
            [0.7, 0.8, nan],
            [0.6, 0.9, 0.7],
        ]
    )
    out = forgetting(scores)
    np.testing.assert_allclose(out["per_task"][:2], [0.3, -0.1])
    assert np.isnan(out["per_task"][2])  # no earlier score
    assert out["mean"] == pytest.approx(0.1)


@FAST
@given(
    arrays(np.float64, st.tuples(st.integers(2, 6), st.integers(1, 5)), elements=st.floats(0, 1))
)
def test_forgetting_bounds_and_task_relabelling(a):
    out = forgetting(a)
    assert (out["per_task"] <= 1 + 1e-12).all()
    assert (out["per_task"] >= a[:-1].max(0) - 1 - 1e-12).all()
    perm = np.random.default_rng(0).permutation(a.shape[1])
    np.testing.assert_allclose(forgetting(a[:, perm])["per_task"], out["per_task"][perm])


def test_artifact_reuse():
    used = [1, 1, 1, 0, 0, 0, 0, 0]
    success = [1, 1, 0, 1, 0, 0, 0, 0]
    out = artifact_reuse(used, success)
    assert out["reuse_rate"] == pytest.approx(3 / 8)
    assert out["success_with"] == pytest.approx(2 / 3)
    assert out["success_without"] == pytest.approx(1 / 5)
    assert out["difference"] == pytest.approx(2 / 3 - 1 / 5)
    none_used = artifact_reuse([0, 0], [1, 0])
    assert none_used["reuse_rate"] == 0.0 and np.isnan(none_used["success_with"])
    with pytest.raises(ValueError, match="used_artifact"):
        artifact_reuse([2, 0], [1, 0])


def test_capability_and_efficiency_are_reported_separately():
    # Agent 0 ends best but spent 10x the experience; agent 1 improved most per unit.
    scores = np.array([[0.5, 0.1, 0.3], [0.7, 0.2, 0.3], [0.9, 0.4, 0.3]])
    cost = np.array([[0, 0, 0], [50, 5, 0], [100, 10, 0]], dtype=float)
    out = capability_and_efficiency(scores, cost, unit="tokens")
    np.testing.assert_allclose(out["endpoint"], [0.9, 0.4, 0.3])
    np.testing.assert_allclose(out["efficiency"][:2], [0.004, 0.03])
    assert np.isnan(out["efficiency"][2])  # no experience spent
    assert out["best_endpoint"] == 0 and out["best_efficiency"] == 1
    assert out["same_agent"] is False
    with pytest.raises(ValueError, match="cost shape"):
        capability_and_efficiency(scores, cost[:2], unit="tokens")
