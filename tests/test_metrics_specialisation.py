"""Division of labour, task entropy, niches and role stability against closed forms."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from society.metrics import dol_index, emergent_niches, role_stability, task_entropy

FAST = settings(max_examples=50, deadline=None)
KEYS = ("dol_indiv_to_task", "dol_task_to_indiv", "dol_symmetric")
count_matrices = arrays(
    np.int64,
    st.tuples(st.integers(1, 12), st.integers(1, 6)),
    elements=st.integers(0, 50),
).filter(lambda c: c.sum() > 0)


def test_dol_perfect_specialisation_is_one():
    out = dol_index(5 * np.eye(4))
    for k in KEYS:
        assert out[k] == pytest.approx(1.0)
    assert out["mutual_information"] == pytest.approx(math.log(4))


def test_dol_rank_one_is_zero():
    out = dol_index(np.outer([1, 2, 5, 3], [4, 1, 2]))
    for k in KEYS:
        assert out[k] == pytest.approx(0.0, abs=1e-12)


def test_dol_hand_values_name_each_normalisation():
    # 2x2 [[3,1],[1,3]]: I = 1 - H_b(1/4) bits and H = 1 bit on both sides.
    hb = -(0.25 * math.log2(0.25) + 0.75 * math.log2(0.75))
    out = dol_index([[3, 1], [1, 3]])
    for k in KEYS:
        assert out[k] == pytest.approx(1 - hb)
    # 8 specialists, 2 tasks (4 each): I = log 2 = H(task), H(indiv) = log 8.
    out = dol_index(np.repeat(np.eye(2), 4, axis=0))
    assert out["dol_indiv_to_task"] == pytest.approx(1.0)  # individual fixes task
    assert out["dol_task_to_indiv"] == pytest.approx(1 / 3)  # task leaves 4 candidates
    assert out["dol_symmetric"] == pytest.approx(1 / math.sqrt(3))


def test_dol_degenerate_inputs():
    with pytest.raises(ValueError, match="all zero"):
        dol_index(np.zeros((3, 2)))
    with pytest.raises(ValueError, match="2-D"):
        dol_index([1, 2, 3])
    with pytest.raises(ValueError, match="non-negative"):
        dol_index([[1, -1]])
    one_task = dol_index([[3], [4]])  # H(task) = 0: documented NaN, the others defined
    assert np.isnan(one_task["dol_indiv_to_task"])
    assert np.isnan(one_task["dol_symmetric"])
    assert one_task["dol_task_to_indiv"] == 0.0


@FAST
@given(count_matrices, st.integers(0, 2**31 - 1))
def test_dol_bounds_and_relabelling(c, seed):
    rng = np.random.default_rng(seed)
    out = dol_index(c)
    shuffled = dol_index(c[rng.permutation(c.shape[0])][:, rng.permutation(c.shape[1])])
    scaled = dol_index(3 * c)
    for k in KEYS:
        if np.isnan(out[k]):
            assert np.isnan(shuffled[k]) and np.isnan(scaled[k])
            continue
        assert 0.0 <= out[k] <= 1.0
        assert shuffled[k] == pytest.approx(out[k], abs=1e-9)
        assert scaled[k] == pytest.approx(out[k], abs=1e-9)


def test_task_entropy():
    h = task_entropy([[5, 0, 0], [1, 1, 1], [0, 0, 0], [1, 1, 0]])
    np.testing.assert_allclose(h[[0, 1, 3]], [0.0, 1.0, math.log(2) / math.log(3)])
    assert np.isnan(h[2])  # documented: no acts -> NaN
    raw = task_entropy([[2, 2]], normalise=False)
    assert raw[0] == pytest.approx(math.log(2))
    with pytest.raises(ValueError, match="at least 2 tasks"):
        task_entropy([[1], [2]])


def _planted(seed: int, sizes=(120, 90, 60)):
    """Agents drawn from three task profiles, one of them mixed."""
    rng = np.random.default_rng(seed)
    prof = np.array([[1, 0, 0, 0], [0, 1, 0, 0], [0, 0, 0.5, 0.5]])
    group = np.repeat(np.arange(3), sizes)
    return rng.poisson(prof[group] * 40), group


def test_niches_kmeans_recovers_planted_groups():
    counts, group = _planted(0)
    out = emergent_niches(counts, method="kmeans", seed=1)
    assert out["n_niches"] == 3
    # Same partition up to relabelling: each planted group maps to one cluster.
    pairs = np.unique(np.c_[group, out["labels"]], axis=0)
    assert len(pairs) == 3
    assert "silhouette" in out["method"]


def test_niches_kmeans_single_blob_is_one_niche():
    rng = np.random.default_rng(2)
    counts = rng.poisson(np.full((400, 4), 10.0))
    assert emergent_niches(counts, method="kmeans")["n_niches"] == 1


def test_niches_dominant_rule():
    counts, _ = _planted(0)
    counts[:5] = 0  # inactive agents get no niche
    out = emergent_niches(counts)
    # The mixed group splits by whichever of its two tasks leads: 4 specialist niches.
    assert out["n_niches"] == 4
    assert (out["labels"][:5] == -1).all()
    gen = emergent_niches([[5, 5, 5], [9, 0, 1], [0, 8, 0], [0, 9, 1]], min_share=0.6)
    np.testing.assert_array_equal(gen["labels"], [-1, 0, 1, 1])
    assert gen["n_generalists"] == 1
    small = emergent_niches([[9, 0], [9, 0], [9, 0], [0, 9]], min_size=0.3)
    assert small["n_niches"] == 1  # the one-agent group is below 30% of agents
    with pytest.raises(ValueError, match="method"):
        emergent_niches(counts, method="spectral")


@FAST
@given(count_matrices, st.integers(0, 2**31 - 1))
def test_dominant_niches_invariant_to_agent_relabelling(c, seed):
    perm = np.random.default_rng(seed).permutation(c.shape[0])
    a, b = emergent_niches(c), emergent_niches(c[perm])
    assert a["n_niches"] == b["n_niches"]
    np.testing.assert_array_equal(a["labels"][perm], b["labels"])


def test_role_stability():
    roles = np.array([[0, 1, 2, -1], [0, 1, 1, 2], [0, 2, 1, 2]])
    out = role_stability(roles)
    # step 0: agents 0,1,2 have roles in both (agent 3 had none): 2 of 3 kept.
    # step 1: all four defined: agents 0, 2, 3 kept -> 3 of 4.
    np.testing.assert_allclose(out["per_step"], [2 / 3, 3 / 4])
    assert out["mean"] == pytest.approx((2 / 3 + 3 / 4) / 2)
    assert role_stability(np.tile([3, 1, 4], (5, 1)))["mean"] == 1.0
    with pytest.raises(ValueError, match="windows >= 2"):
        role_stability([[0, 1]])
    with pytest.raises(TypeError, match="integer"):
        role_stability([[0.5], [1.0]])
