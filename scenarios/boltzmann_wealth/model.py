"""Mesa's BoltzmannWealth: each agent, in a shuffled order, moves to a random neighbouring
cell and, if it has wealth, gives one unit to a random agent in its cell.

Vectorised exactly: moves do not depend on other agents, so at agent i's turn its cellmates
are the earlier agents whose new cell is i's and the later ones whose old cell is; a giver
gives if it started with wealth or received from an earlier giver (a fixed point).
"""

from functools import partial

import jax
import jax.numpy as jnp

from scenarios.boltzmann_wealth.config import BoltzmannWealthParams
from sim_core.space import Grid
from society.metrics import gini_jax
from society.study import Study


def grid(p):
    return Grid(p.width, p.height)  # Mesa's OrthogonalMooreGrid: bounded, radius 1


def shuffle(key, n):
    """A uniformly random order of ``n`` agents and each agent's turn in it: an integer sort
    (XLA's CPU sorts of floats cost about 10x those of int32), ties broken by id."""
    order = jnp.sort(jax.random.randint(key, (n,), 0, (2**31 - 1) // n) * n + jnp.arange(n)) % n
    return order, jnp.zeros(n, jnp.int32).at[order].set(jnp.arange(n, dtype=jnp.int32))


def cellmate(key, order, turn, new, old, n):
    """A random agent sharing agent i's cell at its turn (-1: none): earlier agents by
    their ``new`` cell, later ones by their ``old`` cell (keys cell * n + turn, sorted)."""
    sa, sb = jnp.sort(new * n + turn), jnp.sort(old * n + turn)
    find = partial(jnp.searchsorted, method="compare_all" if n <= 2048 else "scan")  # measured
    lo_a = find(sa, new * n)
    before = find(sa, new * n + turn) - lo_a
    lo_b = find(sb, new * n + turn + 1)
    after = find(sb, new * n + n) - lo_b
    u = (jax.random.uniform(key, new.shape) * (before + after)).astype(jnp.int32)
    at = jnp.where(
        u < before, sa[jnp.clip(lo_a + u, 0, n - 1)], sb[jnp.clip(lo_b + u - before, 0, n - 1)]
    )
    return jnp.where(before + after > 0, order[at % n], -1)


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
    headline = ("gini",)

    def init(key, p):
        return {
            "cell": jax.random.randint(key, (p.n,), 0, p.width * p.height),
            "wealth": jnp.ones(p.n, jnp.int32),
        }

    def step(key, w, actions, p):
        k_order, k_move, k_pick = jax.random.split(key, 3)
        order, turn = shuffle(k_order, p.n)
        new = grid(p).random_neighbour(k_move, w["cell"])
        target = cellmate(
            k_pick, order, turn, new, w["cell"] if p.order == "sequential" else new, p.n
        )
        give = givers(w["wealth"], target, turn, p.n)
        got = jnp.zeros(p.n, jnp.int32).at[jnp.where(give, target, p.n)].add(1, mode="drop")
        return {"cell": new, "wealth": w["wealth"] - give + got}, None
