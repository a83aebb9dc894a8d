"""Mesa's WolfSheep: on a von Neumann torus, every sheep in a shuffled order moves to a
neighbouring cell without wolves (grass preferred; it stays when none is safe), loses one
energy, eats the grass there, dies below zero or else breeds with its chance, splitting its
energy with the lamb; then every wolf in a shuffled order moves (cells with sheep preferred)
and eats a random sheep there. Eaten grass regrows ``grass_regrowth_time`` steps later.

Exact in distribution, and vectorised: an agent's choice and meal depend on earlier agents
only through the resource cells (grown grass, cells with sheep) among its candidate cells,
so in each round every agent that is first in turn at all of its own resource cells acts
(:func:`take_turns`): Mesa's sequential order, in as many rounds as its longest chain.
Agents are slots of a capacity that the framework grows (``sim_core.lifecycle``).
"""

import functools
from functools import partial

import jax
import jax.numpy as jnp

from scenarios.wolf_sheep.config import WolfSheepParams
from sim_core import lifecycle
from sim_core.space import Grid
from society.study import Study

LAST = 2**31 - 1


def grid(p):
    return Grid(
        p.width, p.height, torus=True, neighbourhood="von_neumann"
    )  # Mesa's, [height, width]


def candidates(cell, p):
    """Each agent's four neighbouring cells and its own: ``(agents, 5)``."""
    g = grid(p)
    x, y = g.xy(cell)
    return jnp.stack(
        [*(g.cell((x + dx) % p.width, (y + dy) % p.height) for dx, dy in g.offsets), cell], axis=1
    )


def least(turn, slot, cell, pending, p):
    """Per cell, the slot of the pending agent first in turn (then by slot) among those on
    it and its neighbours: the one that may take it next."""
    g = grid(p)
    at = jnp.where(pending, cell, g.cells)
    first = jnp.full(g.cells, LAST).at[at].min(turn, mode="drop")
    tied = pending & (first.at[cell].get(mode="fill", fill_value=LAST) == turn)
    least = jnp.full(g.cells, LAST).at[jnp.where(tied, cell, g.cells)].min(slot, mode="drop")
    shape, shifts = (p.width, p.height), [(0, 0), *g.offsets]
    first, least = first.reshape(shape), least.reshape(shape)
    best = functools.reduce(jnp.minimum, [jnp.roll(first, s, (0, 1)) for s in shifts])
    pick = [
        jnp.where(jnp.roll(first, s, (0, 1)) == best, jnp.roll(least, s, (0, 1)), LAST)
        for s in shifts
    ]
    return functools.reduce(jnp.minimum, pick).ravel()


def choose(cand, pool, u):
    """A uniform choice (``u``) of each row's candidates in ``pool``, without a gather."""
    k = (u * pool.sum(1)).astype(jnp.int32)
    before = [sum(pool[:, i].astype(jnp.int32) for i in range(j)) for j in range(pool.shape[1])]
    return sum(
        jnp.where(pool[:, j] & (before[j] == k), cand[:, j], 0) for j in range(pool.shape[1])
    )


def take_turns(turn, cand, ok, acting, u, full, take, p):
    """Agents in ``turn`` order each move to a candidate cell (``ok``), uniformly (``u``)
    among those ``full`` if any, and ``take`` what is there: rounds in which every agent
    first in turn at all its full candidate cells acts. Returns (cells, took, full).
    Once few are left, the rounds run over those alone (an eighth of the slots)."""
    n, m = turn.shape[0], max(turn.shape[0] // 8, 1)
    ok = jnp.broadcast_to(ok, cand.shape)

    def round_(a, s):
        turn, slot, cand, ok, u = a
        pending, full, to, took = s
        want = ok & (full[cand] > 0)
        first = least(turn, slot, cand[:, -1], pending, p)[cand]
        go = pending & ~(want & (first != slot[:, None])).any(1)
        new = choose(cand, jnp.where(want.any(1, keepdims=True), want, ok), u)
        eat = go & (full[new] > 0)
        to, took = jnp.where(go, new, to), took | eat
        return pending & ~go, take(full, jnp.where(eat, new, full.shape[0])), to, took

    a = (turn, jnp.arange(n), cand, ok, u)
    s = (acting, full, cand[:, -1], jnp.zeros(n, bool))
    s = jax.lax.while_loop(lambda s: s[0].sum() > m, partial(round_, a), s)
    few = jnp.nonzero(s[0], size=m, fill_value=n)[0]  # the pending, by slot
    part = lambda x: x.at[few].get(mode="fill", fill_value=0)  # noqa: E731
    b = tuple(map(part, a[:1])) + (few,) + tuple(map(part, a[2:]))
    t = jax.lax.while_loop(
        lambda t: t[0].any(), partial(round_, b), (few < n, s[1], part(s[2]), part(s[3]))
    )
    return s[2].at[few].set(t[2], mode="drop"), s[3].at[few].set(t[3], mode="drop"), t[1]


def live(w, acting, to, took, gain, chance, u):
    """Mesa's Animal.step after the move: energy, death and breeding (a newborn per parent)."""
    energy = jnp.where(acting, w["energy"] - 1 + gain * took, w["energy"])
    alive = w["alive"] & ~(acting & (energy < 0))
    parents = acting & alive & (u < chance)
    energy = jnp.where(parents, energy / 2, energy)
    w = {**w, "alive": alive, "energy": energy, "cell": jnp.where(acting, to, w["cell"])}
    source, overflow = lifecycle.births(alive, parents)
    newborn = {
        "alive": True,
        "wolf": w["wolf"],
        "cell": w["cell"],
        "energy": energy,
        "parent": jnp.arange(alive.size),
    }
    return {**lifecycle.born(w, source, newborn), "overflow": w["overflow"] + overflow}


def eaten(sheep, cell, prio, count, cells):
    """Sheep eaten: ``count`` per cell, each the first by ``prio`` among the cell's remaining
    (a uniform choice, as Mesa's wolf makes at its turn)."""
    ids = jnp.arange(sheep.shape[0])

    def one(s):
        sheep, count = s
        prey = sheep & (count.at[cell].get(mode="fill", fill_value=0) > 0)
        at = jnp.where(prey, cell, cells)
        top = jnp.full(cells, -1).at[at].max(prio, mode="drop")
        tied = prey & (top.at[cell].get(mode="fill", fill_value=-1) == prio)
        first = jnp.full(cells, ids.size).at[jnp.where(tied, cell, cells)].min(ids, mode="drop")
        dead = tied & (first.at[cell].get(mode="fill", fill_value=-1) == ids)
        return sheep & ~dead, count - (first < ids.size)

    return jax.lax.while_loop(lambda s: s[1].any(), one, (sheep, count))[0]


class WolfSheep(Study):
    Params = WolfSheepParams
    reporters = {
        "sheep": lambda w, out: (w["alive"] & ~w["wolf"]).sum(),
        "wolves": lambda w, out: (w["alive"] & w["wolf"]).sum(),
        "grass": lambda w, out: (w["grass"] == 0).sum(),
    }

    def capacity(p):
        return 2 * (p.initial_sheep + p.initial_wolves) + 64  # grown by the framework if need be

    def grow(w, capacity, p):  # the grass, (width, height), is not on the agents' axis
        return {**lifecycle.grow(w, capacity), "grass": w["grass"]}

    def init(key, p):
        k_cell, k_energy, k_grown, k_count = jax.random.split(key, 4)
        n, s, cells = WolfSheep.capacity(p), p.initial_sheep, p.width * p.height
        slot = jnp.arange(n)
        wolf = slot >= s
        gain = jnp.where(wolf, p.wolf_gain_from_food, p.sheep_gain_from_food)
        shape = (p.width, p.height)
        countdown = jax.random.randint(k_count, shape, 0, p.grass_regrowth_time)
        grown = jax.random.bernoulli(k_grown, 0.5, shape) | (countdown == 0)
        grass = (
            jnp.where(grown, 0, countdown + 1) if p.grass else jnp.ones(shape, jnp.int32)
        )  # none: never grown
        return {
            "alive": slot < s + p.initial_wolves, "wolf": wolf,
            "cell": jax.random.randint(k_cell, (n,), 0, cells),
            "energy": jax.random.uniform(k_energy, (n,)) * 2 * gain,
            "parent": jnp.full(n, -1), "grass": grass,
            "overflow": jnp.int32(0),
        }  # fmt: skip

    def step(key, w, actions, p):
        n, cells = w["alive"].shape[0], p.width * p.height
        bits = lifecycle.slot_bits(key, n, 4)
        turn, u, breed = (
            (bits[:, 0] >> 1).astype(jnp.int32),
            lifecycle.uniform(bits[:, 1]),
            lifecycle.uniform(bits[:, 2]),
        )
        grass = jnp.maximum(w["grass"] - p.grass, 0)  # regrowth events after the last step
        cand = candidates(w["cell"], p)

        sheep = w["alive"] & ~w["wolf"]
        wolves = (
            jnp.zeros(cells + 1, bool)
            .at[jnp.where(w["alive"] & w["wolf"], w["cell"], cells)]
            .set(True)
        )
        safe = ~wolves[cand[:, :4]]
        ok = jnp.concatenate([safe, ~safe.any(1, keepdims=True)], axis=1)  # none safe: it stays
        eat = lambda g, c: g.at[c].set(False, mode="drop")  # noqa: E731
        to, took, left = take_turns(turn, cand, ok, sheep, u, (grass == 0).ravel(), eat, p)
        gone = (grass == 0) & ~left.reshape(grass.shape)  # regrows after the step T steps on
        w = {**w, "grass": jnp.where(gone, p.grass_regrowth_time + 1, grass)}
        w = live(w, sheep, to, took, p.sheep_gain_from_food, p.sheep_reproduce, breed)

        wolf, sheep = w["alive"] & w["wolf"], w["alive"] & ~w["wolf"]
        count = (
            jnp.zeros(cells, jnp.int32).at[jnp.where(sheep, w["cell"], cells)].add(1, mode="drop")
        )
        hunt = lambda c, at: c.at[at].add(-1, mode="drop")  # noqa: E731
        ok = (jnp.arange(5) < 4)[None]
        to, took, left = take_turns(
            turn, cand, ok, wolf, u, count, hunt, p
        )  # wolves have not moved
        prio = (bits[:, 3] >> 1).astype(jnp.int32)
        w = {**w, "alive": wolf | eaten(sheep, w["cell"], prio, count - left, cells)}
        return live(w, wolf, to, took, p.wolf_gain_from_food, p.wolf_reproduce, breed), None
