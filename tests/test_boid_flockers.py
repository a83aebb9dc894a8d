"""Continuous space (sim_core.space.Continuous) and Mesa's BoidFlockers as a study."""

from __future__ import annotations

import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import scenarios
from scenarios.boid_flockers.config import BoidFlockersParams
from scenarios.boid_flockers.model import BoidFlockers
from sim_core.rng import shuffle
from sim_core.space import Continuous

SMALL = {
    "population_size": 200,
    "width": 100,
    "height": 100,
    "vision": 5,
    "steps": 20,
}  # Mesa's benchmark
SEEDS = 24


def offsets(pos: np.ndarray, at: np.ndarray, size: np.ndarray, torus: bool) -> np.ndarray:
    """``[i, j]``: pos[j] - at[i], the shortest way round on a torus."""
    d = pos[None] - at[:, None]
    return d - size * np.round(d / size) if torus else d


@pytest.mark.parametrize("torus", [True, False])
def test_continuous_queries_match_brute_force(torus: bool) -> None:
    rng = np.random.default_rng(1)
    size = np.array([30.0, 20.0])
    space = Continuous(30.0, 20.0, torus=torus)
    pos, at = rng.random((300, 2)) * size, rng.random((300, 2)) * size
    val = rng.normal(size=(300, 2))
    d = offsets(pos, pos, size, torus)
    dist = np.hypot(d[..., 0], d[..., 1])
    near = (dist <= 4) & ~np.eye(300, dtype=bool)

    np.testing.assert_allclose(space.distance(pos[0], pos), dist[0], atol=1e-4)
    np.testing.assert_array_equal(np.asarray(space.neighbours(jnp.asarray(pos), 4.0)), near)
    idx, kd = space.k_nearest(jnp.asarray(pos), 3)
    np.testing.assert_allclose(
        kd, np.sort(np.where(np.eye(300, dtype=bool), np.inf, dist), axis=1)[:, :3], atol=1e-4
    )
    np.testing.assert_allclose(np.take_along_axis(dist, np.asarray(idx), 1), kd, atol=1e-4)
    mean, n = space.neighbour_mean(jnp.asarray(pos), 4.0, jnp.asarray(val))
    np.testing.assert_array_equal(n, near.sum(1))
    np.testing.assert_allclose(
        mean,
        np.where(n[:, None] > 0, near @ val / np.maximum(near.sum(1), 1)[:, None], 0),
        atol=1e-5,
    )

    # sums of a per-pair function, looking from other points, over chosen pairs; both methods
    da = offsets(pos, at, size, torus)
    ii, jj = np.meshgrid(np.arange(300), np.arange(300), indexing="ij")
    ok = (np.hypot(da[..., 0], da[..., 1]) <= 4) & (ii != jj) & ((ii + jj) % 3 != 0)
    want = {"n": ok.sum(1), "d": (da * ok[..., None]).sum(1), "v": ok @ val}
    f = lambda d, j: {"n": jnp.ones(d.shape[:-1]), "d": d, "v": jnp.asarray(val, jnp.float32)[j]}  # noqa: E731
    for method in ("dense", "cells"):
        got = jax.jit(lambda p, a, m=method: space.neighbour_sum(p, 4.0, f, at=a, include=lambda i, j: (i + j) % 3 != 0, method=m))(
            jnp.asarray(pos, jnp.float32), jnp.asarray(at, jnp.float32)
        )  # fmt: skip
        for k in want:
            np.testing.assert_allclose(got[k], want[k], atol=1e-4, err_msg=f"{method} {k}")


def sequential_step(
    pos: np.ndarray, direction: np.ndarray, order: np.ndarray, p: BoidFlockersParams
):
    """Mesa's Boid.step for each boid in ``order``, in float64 (agents.py, line by line)."""
    size = np.array([p.width, p.height])
    pos, direction = pos.copy(), direction.copy()
    for i in order:
        d = offsets(pos, pos[i : i + 1], size, True)[0]
        dist = np.hypot(d[:, 0], d[:, 1])
        near = dist <= p.vision
        near[i] = False
        if near.any():
            delta = d[near]
            v = delta.sum(0) * p.cohere - delta[dist[near] < p.separation].sum(0) * p.separate
            direction[i] += (v + direction[near].sum(0) * p.match) / near.sum()
            direction[i] /= np.linalg.norm(direction[i])
        pos[i] = np.mod(pos[i] + direction[i] * p.speed, size)
    return pos, direction


def test_a_step_is_mesas_sequential_update() -> None:
    """Each boid sees the moves of the boids before it: the vectorised step equals Mesa's
    loop in the same order, step after step, on a crowded space (chains of many boids)."""
    p = BoidFlockersParams(population_size=150, width=40, height=40, vision=6, steps=1)
    w = jax.jit(lambda k: BoidFlockers.init(k, p))(jax.random.key(3))
    step = jax.jit(lambda k, w: BoidFlockers.step(k, w, None, p))
    pos, direction = np.asarray(w["pos"], np.float64), np.asarray(w["direction"], np.float64)
    for t in range(5):
        key = jax.random.key(100 + t)
        order = np.asarray(shuffle(key, p.population_size)[0])
        pos, direction = sequential_step(pos, direction, order, p)
        w, _ = step(key, w)
        np.testing.assert_allclose(w["direction"], direction, atol=1e-4)
        np.testing.assert_allclose(w["pos"], pos, atol=1e-3)
        w = {"pos": jnp.asarray(pos, jnp.float32), "direction": jnp.asarray(direction, jnp.float32)}


def headline(
    pos: np.ndarray, direction: np.ndarray, vision: float, size: np.ndarray
) -> tuple[float, float]:
    """Polarisation and local alignment as the study defines them, in numpy."""
    u = direction / np.linalg.norm(direction, axis=1, keepdims=True)
    d = offsets(pos, pos, size, True)
    near = (np.hypot(d[..., 0], d[..., 1]) <= vision) & ~np.eye(len(pos), dtype=bool)
    n = near.sum(1)
    cos = (u * (near @ u)).sum(1)[n > 0] / n[n > 0]
    return float(np.linalg.norm(u.mean(0))), float(cos.mean())


def test_agrees_with_mesa_boid_flockers() -> None:
    """Per-step means over seeds of polarisation and local alignment agree with Mesa's model
    at its small benchmark. Tolerance: 4 standard errors of the difference of two
    independent means (a true difference of zero fails one of the 40 comparisons with
    probability ~0.3%). The sequential semantics themselves are checked exactly above."""
    from mesa.examples import BoidFlockers as MesaBoids

    size = np.array([SMALL["width"], SMALL["height"]], float)
    mesa = np.zeros((SEEDS, SMALL["steps"], 2))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for s in range(SEEDS):
            m = MesaBoids(seed=s, **{k: v for k, v in SMALL.items() if k != "steps"})
            for t in range(SMALL["steps"]):
                m.step()
                boids = list(m.agents)
                pos, direction = (
                    np.array([b.position for b in boids]),
                    np.array([b.direction for b in boids]),
                )
                mesa[s, t] = headline(pos, direction, SMALL["vision"], size)
    ours = scenarios.run("boid-flockers", seed=7, replicates=SEEDS, write=False, **SMALL).metrics
    for k, name in enumerate(("polarisation", "local_alignment")):
        v = (
            ours[ours.metric == name]
            .pivot(index="replicate", columns="time", values="value")
            .to_numpy()
        )
        se = np.sqrt(v.var(0, ddof=1) / len(v) + mesa[..., k].var(0, ddof=1) / SEEDS)
        diff = v.mean(0) - mesa[..., k].mean(0)
        assert (np.abs(diff) < 4 * se).all(), (name, diff / se)
    assert mesa[:, -1, 1].mean() > mesa[:, 0, 1].mean() + 0.1  # they do flock
