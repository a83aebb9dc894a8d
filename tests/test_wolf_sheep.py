"""Mesa's WolfSheep as a study, and births and deaths in the framework (sim_core.lifecycle)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pandas as pd
import pytest
from pydantic import Field

import scenarios
from scenarios.wolf_sheep import model as ws
from scenarios.wolf_sheep.config import WolfSheepParams
from sim_core import lifecycle
from sim_core.space import Grid
from society import study
from society.study import ModelParams, Study

SMALL = dict(width=25, height=25, initial_sheep=60, initial_wolves=40, sheep_reproduce=0.2)
SMALL |= dict(wolf_reproduce=0.1, grass_regrowth_time=20, steps=80)  # Mesa's benchmark, small


def _rows(result) -> pd.DataFrame:
    return result.metrics.sort_values(["replicate", "time", "metric"]).reset_index(drop=True)


# -- the framework: a world that grows -------------------------------------------------------
class Colony(Study):
    """Cells that die or split (half the mass each) at random: births and deaths only."""

    class Params(ModelParams):
        steps: int = Field(12, ge=1)

    reporters = {
        "cells": lambda w, out: w["alive"].sum(),
        "mass": lambda w, out: (w["mass"] * w["alive"]).sum(),
    }

    def capacity(p):
        return 4

    def init(key, p):
        return {"alive": jnp.arange(4) < 3, "mass": jnp.ones(4), "overflow": jnp.int32(0)}

    def step(key, w, actions, p):
        u = lifecycle.uniform(lifecycle.slot_bits(key, w["alive"].shape[0], 2))
        alive = w["alive"] & (u[:, 0] > 0.1)
        parents = alive & (u[:, 1] < 0.3)
        mass = jnp.where(parents, w["mass"] / 2, w["mass"]) + 0.1
        source, overflow = lifecycle.births(alive, parents)
        w = lifecycle.born(
            {**w, "alive": alive, "mass": mass}, source, {"alive": True, "mass": mass}
        )
        return {**w, "overflow": w["overflow"] + overflow}, None


def test_a_world_outgrows_its_capacity_and_gives_the_same_rows(tmp_path, monkeypatch) -> None:
    """Capacity 4 (grown by doubling, each overflowing run again) or 4096 from the start,
    replicates batched or one at a time, one compiled run or checkpointed chunks: the same rows."""
    study._CAPACITY.clear()
    grown = scenarios.run(Colony, seed=5, replicates=3, write=False)
    assert study._CAPACITY[(Colony, Colony.Params().model_dump_json())] >= 16  # it grew
    assert grown.summary["metrics"]["cells"]["mean"] > 8
    monkeypatch.setattr(Colony, "capacity", lambda p: 4096)
    study._CAPACITY.clear()
    for other in (
        scenarios.run(Colony, seed=5, replicates=3, write=False),
        scenarios.run(Colony, seed=5, replicates=3, write=False, batch_replicates=1),
    ):
        pd.testing.assert_frame_equal(_rows(grown), _rows(other))
    monkeypatch.setattr(Colony, "capacity", lambda p: 4)
    study._CAPACITY.clear()
    chunked = scenarios.run(Colony, seed=5, replicates=3, out=tmp_path / "c", checkpoint_every=3)
    pd.testing.assert_frame_equal(_rows(grown), _rows(chunked))


def test_births_take_the_lowest_free_slots_and_draws_do_not_depend_on_capacity() -> None:
    rng = np.random.default_rng(0)
    for _ in range(20):
        alive = rng.random(40) < 0.6
        parents = alive & (rng.random(40) < 0.5)
        source, overflow = (
            np.asarray(x) for x in lifecycle.births(jnp.asarray(alive), jnp.asarray(parents))
        )
        free, who = np.flatnonzero(~alive), np.flatnonzero(parents)
        expect = np.full(40, 40)
        expect[free[: len(who)]] = who[: len(free)]
        assert (source == expect).all() and overflow == max(len(who) - len(free), 0)
    x = rng.random((2, 1000)) < 0.3
    assert (np.asarray(lifecycle.prefix(jnp.asarray(x))) == np.cumsum(x, axis=1)).all()
    key = jax.random.PRNGKey(3)
    assert (lifecycle.slot_bits(key, 64, 4) == lifecycle.slot_bits(key, 4096, 4)[:64]).all()


# -- the model ---------------------------------------------------------------------------------
def _sequential(turn, cand, ok, acting, u, full, take):
    """Mesa's loop, one agent at a time: the reference for take_turns."""
    full, to, took = full.copy(), cand[:, -1].copy(), np.zeros(len(turn), bool)
    for j in sorted(np.flatnonzero(acting), key=lambda j: (turn[j], j)):
        want = [c for c, o in zip(cand[j], ok[j], strict=True) if o and full[c] > 0]
        pool = want or [c for c, o in zip(cand[j], ok[j], strict=True) if o]
        to[j] = pool[int(u[j] * len(pool))]
        if full[to[j]] > 0:
            took[j] = True
            take(full, to[j])
    return to, took, full


@pytest.mark.parametrize(
    "grid",
    [
        Grid(6, 5, torus=True, neighbourhood="von_neumann"),  # wolf-sheep's
        Grid(6, 5, neighbourhood="moore"),  # bounded: cells off the grid are never allowed
        Grid(6, 6, torus=True, neighbourhood="hex"),
    ],
)
def test_turns_are_mesa_sequential_order_exactly(grid: Grid) -> None:
    """Rounds of agents first at all their resource cells give what one agent at a time
    gives, draw for draw: sheep eating grass (a cell once), wolves eating sheep (a count);
    turns drawn from a few values, so that ties are broken by slot as in the model."""
    rng = np.random.default_rng(1)

    def eat(g, c):  # the model's takes, and the reference's (in place)
        return g.at[c].set(False, mode="drop")

    def hunt(g, c):
        return g.at[c].add(-1, mode="drop")

    def eat_one(g, c):
        g[c] = False

    def hunt_one(g, c):
        g[c] -= 1

    turns = jax.jit(
        lambda *a, sheep: grid.take_turns(*a, eat if sheep else hunt), static_argnames="sheep"
    )
    for trial in range(12):
        n = 40
        cell = rng.integers(0, grid.cells, n)
        cand, inside = (np.asarray(x) for x in grid.around(jnp.asarray(cell)))
        ok = (rng.random(cand.shape) < 0.7) & inside
        ok[:, -1] |= ~ok.any(1)
        turn = rng.integers(0, 3 if trial % 2 else 2**31 - 1, n).astype(np.int32)
        acting, u = rng.random(n) < 0.8, rng.random(n).astype(np.float32)
        sheep = trial < 6
        full = (
            rng.random(grid.cells) < 0.5
            if sheep
            else rng.integers(0, 3, grid.cells).astype(np.int32)
        )
        expect = _sequential(turn, cand, ok, acting, u, full, eat_one if sheep else hunt_one)
        got = turns(*(jnp.asarray(x) for x in (turn, cand, ok, acting, u, full)), sheep=sheep)
        to, took, left = (np.asarray(x) for x in got)
        assert (
            (to[acting] == expect[0][acting]).all()
            and (took == expect[1]).all()
            and (left == expect[2]).all()
        )


def test_many_agents_take_turns_in_stages_in_mesa_sequential_order_exactly() -> None:
    """40,000 agents: the few left after the rounds over the whole grid are resolved in
    stages of shrinking size (5,000 then 625 slots), still one agent at a time's result."""
    grid, n = Grid(300, 300, torus=True, neighbourhood="von_neumann"), 40_000
    rng = np.random.default_rng(2)
    cell = rng.integers(0, grid.cells // 3, n)  # crowded: long chains of agents in turn
    cand = np.asarray(grid.around(jnp.asarray(cell))[0])
    ok = np.ones(cand.shape, bool)
    turn = rng.integers(0, 2**31 - 1, n).astype(np.int32)
    acting, u = rng.random(n) < 0.9, rng.random(n).astype(np.float32)
    full = rng.random(grid.cells) < 0.5

    def eat_one(g, c):
        g[c] = False

    expect = _sequential(turn, cand, ok, acting, u, full, eat_one)
    got = jax.jit(lambda *a: grid.take_turns(*a, lambda g, c: g.at[c].set(False, mode="drop")))(
        *(jnp.asarray(x) for x in (turn, cand, ok, acting, u, full))
    )
    to, took, left = (np.asarray(x) for x in got)
    assert (to[acting] == expect[0][acting]).all()
    assert (took == expect[1]).all() and (left == expect[2]).all()


def test_a_run_keeps_mesa_invariants() -> None:
    """Step by step: energy never below zero while alive; at most one newborn per animal;
    a lamb starts on its mother's cell with her (halved) energy; a patch eaten this step
    waits T + 1 steps (Mesa regrows it after the step T steps on) and holds a sheep (no
    wolves here to eat it); without animals all grass regrows within T + 1 steps."""
    p = WolfSheepParams(**SMALL)
    step = jax.jit(lambda k, w: ws.WolfSheep.step(k, w, None, p)[0])
    t_max = p.grass_regrowth_time + 1
    for seed, wolves, sheep in ((0, True, True), (1, False, True), (2, False, False)):
        w = ws.WolfSheep.init(jax.random.PRNGKey(seed), p)
        w = {**w, "alive": w["alive"] & (wolves | ~w["wolf"]) & (sheep | w["wolf"])}
        for t in range(25):
            before = {k: np.asarray(v) for k, v in w.items()}
            w = step(jax.random.PRNGKey(100 + t), w)
            after = {k: np.asarray(v) for k, v in w.items()}
            alive, wolf = after["alive"], after["wolf"]
            assert (after["energy"][alive] >= 0).all() and after["overflow"] == 0
            assert ((0 <= after["grass"]) & (after["grass"] <= t_max)).all()
            for kind in (False, True):
                assert (alive & (wolf == kind)).sum() <= 2 * (
                    before["alive"] & (before["wolf"] == kind)
                ).sum()
            if not wolves:
                new = alive & ~before["alive"]
                mother = after["parent"][new]
                assert (after["cell"][new] == after["cell"][mother]).all() and not wolf[new].any()
                assert np.allclose(after["energy"][new], after["energy"][mother])
                eaten = np.flatnonzero((after["grass"] == t_max).ravel())
                assert np.isin(eaten, after["cell"][alive & ~wolf]).all()
        if not sheep:
            assert (after["grass"] == 0).all()
    # the same world in 4096 slots steps the same, draw for draw (slot-keyed draws)
    w = ws.WolfSheep.init(jax.random.PRNGKey(0), p)
    small, large = w, ws.WolfSheep.grow(w, 4096, p)
    for t in range(10):
        small, large = step(jax.random.PRNGKey(t), small), step(jax.random.PRNGKey(t), large)
    n = small["alive"].shape[0]
    assert not np.asarray(large["alive"][n:]).any() and (large["grass"] == small["grass"]).all()
    for k in ("alive", "wolf", "cell", "energy", "parent"):
        assert (large[k][:n] == small[k]).all(), k


def test_agrees_with_mesa_wolf_sheep() -> None:
    """Mesa's benchmark (small): 20 Mesa seeds against 100 replicates of ours. At steps
    10, 20 .. 80 the mean sheep, wolves and grass differ by less than 4 standard errors of
    the difference (independent runs: Welch's error); 24 comparisons at 4 sigma fail by
    chance with probability ~1e-3 (the seeds are fixed, so the test is deterministic)."""
    from mesa.examples import WolfSheep
    from mesa.experimental.devs import ABMSimulator

    mesa_rows = []
    for seed in range(20):
        sim = ABMSimulator()
        model = WolfSheep(
            simulator=sim, seed=seed, **{k: v for k, v in SMALL.items() if k != "steps"}
        )
        sim.run_for(SMALL["steps"])
        mesa_rows.append(
            model.datacollector.get_model_vars_dataframe()[["Sheep", "Wolves", "Grass"]].to_numpy()[
                1:
            ]
        )
    mesa = np.stack(mesa_rows)  # (seeds, steps, metric)
    ours = scenarios.run("wolf-sheep", seed=0, replicates=100, write=False, **SMALL).metrics
    ours = ours.pivot_table(index=["replicate", "time"], columns="metric", values="value")[
        ["sheep", "wolves", "grass"]
    ]
    ours = ours.to_numpy().reshape(100, SMALL["steps"], 3)
    at = np.arange(9, SMALL["steps"], 10)
    diff = ours[:, at].mean(0) - mesa[:, at].mean(0)
    se = np.sqrt(ours[:, at].var(0, ddof=1) / len(ours) + mesa[:, at].var(0, ddof=1) / len(mesa))
    assert (np.abs(diff) < 4 * se).all(), np.round(diff / se, 2)
    assert mesa[:, at].mean() == pytest.approx(ours[:, at].mean(), rel=0.1)
