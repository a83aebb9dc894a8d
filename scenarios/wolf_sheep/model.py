"""Mesa's WolfSheep: on a von Neumann torus, every sheep in a shuffled order moves to a
neighbouring cell without wolves (grass preferred; it stays when none is safe), loses one
energy, eats the grass there, dies below zero or else breeds with its chance, splitting its
energy with the lamb; then every wolf in a shuffled order moves (cells with sheep preferred)
and eats a random sheep there. Eaten grass regrows ``grass_regrowth_time`` steps later.

Exact in distribution, and vectorised: an agent's choice and meal depend on earlier agents
only through the resource cells (grown grass, cells with sheep) among its candidate cells,
so in each round every agent that is first in turn at all of its own resource cells acts
(``Grid.take_turns``): Mesa's sequential order, in as many rounds as its longest chain.
Agents are slots of a capacity that the framework grows (``sim_core.lifecycle``).
"""

import jax
import jax.numpy as jnp

from scenarios.wolf_sheep.config import WolfSheepParams
from sim_core import lifecycle
from sim_core.space import Grid
from society.study import Study


def grid(p):
    return Grid(p.width, p.height, torus=True, neighbourhood="von_neumann")  # Mesa's


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
        g = grid(p)
        cand = g.around(w["cell"])[0]

        sheep = w["alive"] & ~w["wolf"]
        wolves = (
            jnp.zeros(cells + 1, bool)
            .at[jnp.where(w["alive"] & w["wolf"], w["cell"], cells)]
            .set(True)
        )
        safe = ~wolves[cand[:, :4]]
        ok = jnp.concatenate([safe, ~safe.any(1, keepdims=True)], axis=1)  # none safe: it stays
        eat = lambda g, c: g.at[c].set(False, mode="drop")  # noqa: E731
        to, took, left = g.take_turns(turn, cand, ok, sheep, u, (grass == 0).ravel(), eat)
        gone = (grass == 0) & ~left.reshape(grass.shape)  # regrows after the step T steps on
        w = {**w, "grass": jnp.where(gone, p.grass_regrowth_time + 1, grass)}
        w = live(w, sheep, to, took, p.sheep_gain_from_food, p.sheep_reproduce, breed)

        wolf, sheep = w["alive"] & w["wolf"], w["alive"] & ~w["wolf"]
        count = (
            jnp.zeros(cells, jnp.int32).at[jnp.where(sheep, w["cell"], cells)].add(1, mode="drop")
        )
        hunt = lambda c, at: c.at[at].add(-1, mode="drop")  # noqa: E731
        ok = (jnp.arange(5) < 4)[None]
        to, took, left = g.take_turns(turn, cand, ok, wolf, u, count, hunt)  # wolves: not moved
        prio = (bits[:, 3] >> 1).astype(jnp.int32)
        w = {**w, "alive": wolf | eaten(sheep, w["cell"], prio, count - left, cells)}
        return live(w, wolf, to, took, p.wolf_gain_from_food, p.wolf_reproduce, breed), None
