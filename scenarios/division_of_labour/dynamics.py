"""Pure JAX kernels of the response-threshold model (no Python loop over agents).

One step, for every agent at once, from the state at the start of the step:

1. each idle agent meets one task ``j`` drawn uniformly and takes it with probability
   ``s_j^2 / (s_j^2 + theta_ij^2)`` (Bonabeau, Theraulaz & Deneubourg 1996); with rule agents
   this is the ``threshold`` strategy of :mod:`society.cohorts.rules` (steepness 2), learned
   or LLM agents decide instead;
2. each active agent stops with probability ``quit_prob``;
3. stimuli move: ``s_j <- max(s_j + delta - alpha * n_j / N, 0)`` with ``n_j`` the agents on
   task ``j`` after the decisions;
4. with threshold reinforcement (Theraulaz, Bonabeau & Deneubourg 1998), every agent's threshold for the
   task it does falls by ``xi`` and its threshold for every task it does not do rises by
   ``phi``, clipped to ``[theta_min, theta_max]``;
5. from step ``average_from`` on, every agent doing task ``j`` adds one act to ``counts[i, j]``.

Meeting one random task per step is the usual multi-task form of the model: an agent reacts
to the stimulus it encounters. ``model.py`` (a Study on the contract) steps with
:func:`transition` and decides by :func:`response_probability`; its world holds the coming
step's draws (task met, quitting, the rule's chance). :func:`offer` and
:func:`rule_decisions` (the rule cohort's threshold strategy) are the same draws written
per step, kept as the rules' hand-checked reference.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from scenarios.division_of_labour.config import DivisionOfLabourConfig
from sim_core.state import pytree_dataclass
from society.cohorts.rules import BUILTINS, agent_keys

STEEPNESS = 2.0  # the exponent of the response function in Bonabeau et al. (1996)


@pytree_dataclass
class World:
    """One replicate: ``task`` (N,) int32 (-1 idle), ``theta`` (N, m), ``s`` (m,), ``counts``
    (N, m) acts counted from ``average_from``."""

    task: jax.Array
    theta: jax.Array
    s: jax.Array
    counts: jax.Array


def response_probability(s: jax.Array, theta: jax.Array) -> jax.Array:
    """``s^2 / (s^2 + theta^2)`` (1 when both are 0), as the rule cohort computes it."""
    s = jnp.maximum(s, 0.0)
    theta = jnp.maximum(theta, 0.0)
    p = jax.nn.sigmoid(STEEPNESS * (jnp.log(s) - jnp.log(theta)))
    return jnp.where((s == 0) & (theta == 0), 1.0, p)


def offer(p: DivisionOfLabourConfig, world: World, key: jax.Array, t: jax.Array):
    """The world's draws of step ``t``: the task each agent meets, who quits, and what an
    idle agent sees (the stimulus of its task and its own threshold for it)."""
    u = jax.random.uniform(jax.random.fold_in(key, t), (p.population, 2))
    met = jnp.minimum((u[:, 0] * p.tasks).astype(jnp.int32), p.tasks - 1)
    quit = (world.task >= 0) & (u[:, 1] < p.quit_prob)
    stim = world.s[met]
    theta = jnp.take_along_axis(world.theta, met[:, None], axis=1)[:, 0]
    return met, quit, stim, theta


def transition(
    p: DivisionOfLabourConfig, world: World, engage: jax.Array, met: jax.Array, quit: jax.Array, t
):
    """Apply every decision of step ``t`` at once. ``engage`` counts for idle agents only."""
    idle = world.task < 0
    task = jnp.where(idle & (engage > 0), met, jnp.where(quit, -1, world.task))
    doing = (task[:, None] == jnp.arange(p.tasks)[None, :]).astype(jnp.float32)
    n_on = doing.sum(axis=0)
    s = jnp.maximum(world.s + p.delta - p.alpha * n_on / p.population, 0.0)
    learnt = jnp.clip(world.theta - p.xi * doing + p.phi * (1.0 - doing), p.theta_min, p.theta_max)
    theta = jnp.where(p.reinforcement, learnt, world.theta)
    counts = world.counts + doing * (t >= p.average_from)
    return World(task=task, theta=theta, s=s, counts=counts)


def rule_decisions(stim: jax.Array, theta: jax.Array, key: jax.Array, ids: jax.Array) -> jax.Array:
    """The rule cohort's ``threshold`` strategy over all agents, with the per-agent keys the
    population engine gives cohort 0 (``fold_in(key, 0)``, then one key per agent id)."""
    keys = agent_keys(jax.random.fold_in(key, 0), ids)
    obs = {"stimulus": stim, "threshold": theta}
    return BUILTINS["threshold"](obs, keys, {"steepness": jnp.float32(STEEPNESS)})
