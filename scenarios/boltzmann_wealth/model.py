"""Mesa's BoltzmannWealth: each agent, in a shuffled order, moves to a random neighbouring
cell and, if it has wealth, gives one unit to a random agent in its cell.

Vectorised exactly: moves do not depend on other agents, so at agent i's turn its cellmates
are the earlier agents whose new cell is i's and the later ones whose old cell is; a giver
gives if it started with wealth or received from an earlier giver (a fixed point).
"""

import jax
import jax.numpy as jnp

from scenarios.boltzmann_wealth.config import BoltzmannWealthParams
from sim_core.rng import shuffle
from sim_core.space import Grid, random_cellmate
from society.metrics import gini_jax
from society.study import Study


def givers(wealth, target, turn, n):
    """Who gives: those with wealth at their turn (a fixed point over receipts)."""

    def more(g):
        first = jnp.full(n, n).at[jnp.where(g, target, n)].min(turn, mode="drop")
        return (target >= 0) & ((wealth > 0) | (first < turn))

    return jax.lax.while_loop(lambda gg: (gg[0] != gg[1]).any(), lambda gg: (gg[1], more(gg[1])),
                              (jnp.zeros(n, bool), more(jnp.zeros(n, bool))))[1]  # fmt: skip


class BoltzmannWealth(Study):
    Params = BoltzmannWealthParams
    reporters = {"gini": lambda w, out: gini_jax(w["wealth"])}
    agent_reporters = {"wealth": lambda w, out: w["wealth"]}

    def init(key, p):
        cell = jax.random.randint(key, (p.n,), 0, p.width * p.height)
        return {"cell": cell, "wealth": jnp.ones_like(cell)}

    def step(key, w, actions, p):
        k_order, k_move, k_pick = jax.random.split(key, 3)
        order, turn = shuffle(k_order, p.n)
        new = Grid(p.width, p.height).random_neighbour(k_move, w["cell"])  # Mesa's: Moore
        old = w["cell"] if p.order == "sequential" else new
        target = random_cellmate(k_pick, order, turn, new, old)
        give = givers(w["wealth"], target, turn, p.n)
        got = jnp.zeros(p.n, jnp.int32).at[jnp.where(give, target, p.n)].add(1, mode="drop")
        return {"cell": new, "wealth": w["wealth"] - give + got}, None
