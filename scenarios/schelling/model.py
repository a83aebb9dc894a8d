"""Mesa's Schelling: each unhappy agent, in a shuffled order, moves to a random empty cell;
then every agent is happy when at least ``homophily`` of its neighbours are of its type.

Each agent chooses to stay or move: rule agents by Mesa's rule (move when unhappy), learned
agents rewarded for being happy, LLM agents told their neighbours and their preference."""

import jax
import jax.numpy as jnp

from scenarios.schelling.config import SchellingParams
from sim_core.space import Grid
from society.study import Discrete, Study


def grid(p):
    return Grid(p.width, p.height, torus=p.torus, radius=p.radius)


def assess(w, p):
    """Each agent's share of similar neighbours and whether it is happy (Mesa's assign_state)."""
    g, shape = grid(p), (p.width, p.height)
    cell = jnp.where(w["alive"], w["cell"], g.cells)
    occupied = jnp.zeros(g.cells, bool).at[cell].set(True, mode="drop").reshape(shape)
    minority = jnp.zeros(g.cells, bool).at[cell].set(w["type"] == 1, mode="drop").reshape(shape)
    near, near_minority = g.neighbour_count(occupied).ravel(), g.neighbour_count(minority).ravel()
    c = jnp.minimum(cell, g.cells - 1)
    same = jnp.where(w["type"] == 1, near_minority[c], near[c] - near_minority[c])
    similar = jnp.where(near[c] > 0, same / jnp.maximum(near[c], 1), 0.0)
    return {**w, "neighbours": near[c], "same": same, "similar": similar,
            "happy": w["alive"] & (similar >= p.homophily)}  # fmt: skip


def share(x, w):
    return (x * w["alive"]).sum() / jnp.maximum(w["alive"].sum(), 1)


class Schelling(Study):
    Params = SchellingParams
    reporters = {
        "happy_fraction": lambda w, out: share(w["happy"], w),
        "similar_fraction": lambda w, out: share(w["similar"], w),
        "population": lambda w, out: w["alive"].sum(),
    }
    headline = ("happy_fraction", "similar_fraction")
    actions = Discrete(("stay", "move"), rule=lambda o, p: ~o["happy"])
    features = ("similar", "happy")  # learned agents' view
    prompt = lambda p: (  # noqa: E731
        "You live on a street grid. Of your {neighbours:.0f} neighbours, {same:.0f} belong to your "
        f"group. You are content when at least {p.homophily:.0%} of your neighbours do. Answer "
        "stay to keep your home or move to go to a random empty home."
    )

    def due(w, p):  # empty cells hold no agent
        return w["alive"]

    def reward(w, out, p):
        return w["happy"].astype(jnp.float32)

    def observe(w, p):
        return {k: w[k] for k in ("neighbours", "same", "similar", "happy")}

    def init(key, p):
        k_live, k_type = jax.random.split(key)
        cells = p.width * p.height
        alive = jax.random.uniform(k_live, (cells,)) < p.density
        type_ = (jax.random.uniform(k_type, (cells,)) < p.minority_pc).astype(jnp.int32)
        return assess({"cell": jnp.arange(cells), "alive": alive, "type": type_}, p)

    def step(key, w, actions, p):
        cell = grid(p).move_to_empty(key, w["cell"], actions == 1, w["alive"])
        moved = (cell != w["cell"]).any()  # a settled world stays as it was assessed
        return jax.lax.cond(moved, lambda: assess({**w, "cell": cell}, p), lambda: w), None
