"""sim_core.rng.shuffle, a keyed pseudo-random permutation, against a uniform permutation's
statistics. Each test draws with fixed keys, so it is deterministic; its bound is the
statistic's 99.9% (or 4-sigma) quantile under uniformity, so a correct shuffle fails it
with odds of about 1 in 1,000 per fixed key set, and a structured one (a Feistel with too
few rounds, a parity-restricted one, an id-correlated one) fails by far."""

from __future__ import annotations

import itertools
import math

import jax
import numpy as np
import pytest
from scipy import stats

from sim_core.rng import inverse, shuffle


def _shuffles(n: int, k: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    keys = jax.random.split(jax.random.key(seed), k)
    order, turn = jax.jit(jax.vmap(lambda key: shuffle(key, n)))(keys)
    return np.asarray(order), np.asarray(turn)


@pytest.mark.parametrize("n", [*range(0, 40), 99, 100, 101, 4096, 4097, 10_007])
def test_a_shuffle_is_a_permutation_and_its_inverse(n: int) -> None:
    order, turn = _shuffles(n, 3)
    for o, t in zip(order, turn, strict=True):
        np.testing.assert_array_equal(np.sort(o), np.arange(n))
        np.testing.assert_array_equal(t[o], np.arange(n))
    if n > 3:
        assert not (order[0] == order[1]).all()  # each key its own order


@pytest.mark.parametrize("n", [0, 1, 2, 7, 1000])
def test_the_inverse_of_a_permutation_is_its_argsort(n: int) -> None:
    perm = np.random.default_rng(n).permutation(n).astype(np.int32)
    got = np.asarray(jax.jit(inverse)(perm))
    assert got.dtype == np.int32
    np.testing.assert_array_equal(got, np.argsort(perm))


@pytest.mark.parametrize("n", [4, 5, 6])
def test_every_order_of_a_few_agents_is_equally_likely(n: int) -> None:
    # All n! orders (odd ones too: a Feistel on a binary domain makes even ones only), each
    # about as often as the others: Pearson's chi-square below its 99.9% quantile.
    k = 100 * math.factorial(n)
    order, _ = _shuffles(n, k)
    index = {p: i for i, p in enumerate(itertools.permutations(range(n)))}
    counts = np.bincount([index[tuple(o)] for o in order], minlength=len(index))
    assert (counts > 0).all()
    chi2 = ((counts - 100) ** 2 / 100).sum()
    assert chi2 < stats.chi2.ppf(0.999, len(index) - 1), chi2


@pytest.mark.parametrize("n", [1000, 1024, 3000])
def test_turns_and_group_mates_carry_no_trace_of_ids(n: int) -> None:
    k = 2000
    order, turn = _shuffles(n, k, seed=n)
    # Each agent's turn: uniform over the n turns, whatever its id (a chi-square over 10
    # bins of turn for every agent, pooled: n x 9 degrees of freedom).
    bins = np.stack([np.bincount(t * 10 // n, minlength=10) for t in turn.T])
    chi2 = ((bins - k / 10) ** 2 / (k / 10)).sum()
    assert chi2 < stats.chi2.ppf(0.999, n * 9), chi2
    # Agents whose ids differ by one, by the grid's side or by a square (the Feistel's row
    # and column) land in one group of 4 consecutive turns as often as any pair, 3 / (n - 1)
    # (pairs nearly independent: within 4 binomial standard deviations).
    group = turn // 4
    a = math.isqrt(n - 1) + 1
    for d in (1, 2, a - 1, a, a + 1, 2 * a, n // 2):
        together = (group[:, d:] == group[:, :-d]).sum()
        trials, p = k * (n - d), 3 / (n - 1)
        z = (together - trials * p) / math.sqrt(trials * p * (1 - p))
        assert abs(z) < 4, (d, z)
    # Two shuffles (two keys) are unrelated: the rank correlation of an agent's two turns.
    rho = np.mean([stats.spearmanr(turn[i], turn[i + 1])[0] for i in range(0, 100, 2)])
    assert abs(rho) < 4 / math.sqrt(50 * (n - 1)), rho


@pytest.mark.parametrize("n", [12, 256, 300])
def test_neighbours_in_the_order_are_any_two_agents(n: int) -> None:
    # Who follows whom, the pairs a group is cut from: every ordered pair (i, j) with j right
    # after i about equally often (n - 1 such pairs a shuffle, 1 / (n (n - 1)) each), by the
    # sort below 256 agents and by the Feistel from there.
    k = max(40_000, 20 * n)
    order, _ = _shuffles(n, k, seed=7)
    pairs = order[:, :-1] * n + order[:, 1:]
    counts = np.bincount(pairs.ravel(), minlength=n * n).reshape(n, n)
    assert (np.diag(counts) == 0).all()
    expected = k / n
    off = counts[~np.eye(n, dtype=bool)]
    chi2 = ((off - expected) ** 2 / expected).sum()
    assert chi2 < stats.chi2.ppf(0.999, n * (n - 1) - 1), chi2
