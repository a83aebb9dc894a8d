"""Pure JAX kernels of the stochastic SIR/SEIR chain with per-agent contact levels.

Health codes: 0 susceptible, 1 exposed (SEIR only; infected, not yet infectious),
2 infectious, 3 recovered. Each agent has a contact level w in [0, 1] for the day
(1 = usual contacts, 0 = isolated). In one transmission step of length dt a susceptible
agent i is infected with probability 1 - exp(-h_i), all agents at once from the state at
the start of the step:

- well mixed (mass action on counts, no graph built): h_i = beta dt w_i sum_j w_j I_j / N;
- on a graph: h_i = tau dt w_i sum_{j ~ i} w_j I_j, tau = beta / <k>.

An exposed agent becomes infectious with probability 1 - exp(-sigma dt), an infectious one
recovers with probability q = 1 - exp(-gamma dt). beta = r0 q / dt: an infective then
exerts a total hazard of beta dt / q = r0 (times w's) over its geometric infectious
period, so r0 is the exact basic reproduction number of the well-mixed chain at any dt,
and its final size z obeys z = 1 - exp(-r0 z) as N grows (the escape probability of a
susceptible depends only on the summed infectious pressure; E only delays it).
Whether an infection shows symptoms is drawn when it happens (probability ``symptomatic``).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from sim_core.graph import Neighbours, neighbour_sum
from sim_core.state import pytree_dataclass, static_field

S, E, I, R = 0, 1, 2, 3  # noqa: E741 (the compartments' standard names)


@pytree_dataclass
class Params:
    """Rates of one run (traced: changing them does not recompile) and its static shape."""

    rate: jax.Array  # per-step hazard per unit of contact-weighted infectious pressure
    p_onset: jax.Array  # E -> I per step
    p_recover: jax.Array  # I -> R per step
    symptomatic: jax.Array
    seir: bool = static_field()
    well_mixed: bool = static_field()
    substeps: int = static_field()


def make_params(
    *,
    model: str,
    r0: float,
    recovery_rate: float,
    incubation_rate: float,
    symptomatic: float,
    dt: float,
    n: int,
    mean_degree: float | None,
) -> Params:
    """Per-step probabilities; ``mean_degree`` None means well mixed."""
    q = -np.expm1(-recovery_rate * dt)
    beta_dt = r0 * q  # = beta * dt
    rate = beta_dt / n if mean_degree is None else beta_dt / max(mean_degree, 1e-12)
    return Params(
        rate=np.float32(rate),
        p_onset=np.float32(-np.expm1(-incubation_rate * dt)),
        p_recover=np.float32(q),
        symptomatic=np.float32(symptomatic),
        seir=model == "SEIR",
        well_mixed=mean_degree is None,
        substeps=int(round(1.0 / dt)),
    )


def infection_probability(
    p: Params, nb: Neighbours | None, health: jax.Array, w: jax.Array
) -> jax.Array:
    """Probability that each agent is infected in one step (0 for non-susceptibles)."""
    pressure = (health == I).astype(jnp.float32) * w
    contact = pressure.sum() if p.well_mixed else neighbour_sum(nb, pressure)
    prob = -jnp.expm1(-p.rate * w * contact)
    return jnp.where(health == S, prob, 0.0)


def step(p: Params, nb: Neighbours | None, key: jax.Array, health, sym, w):
    """One transmission step of one replicate: (health, sym, newly infected).

    An agent is in one compartment, so one uniform per agent decides its one possible
    move (infection, onset or recovery); a second, independent one its symptoms if it is
    infected. Two draws of N, not one per kind of move: the draws are most of a small
    population's step."""
    k_move, k_sym = jax.random.split(key)
    u = jax.random.uniform(k_move, health.shape)
    new = u < infection_probability(p, nb, health, w)
    h = jnp.where(new, E if p.seir else I, health)
    if p.seir:
        h = jnp.where((health == E) & (u < p.p_onset), I, h)
    h = jnp.where((health == I) & (u < p.p_recover), R, h).astype(health.dtype)
    sym = jnp.where(new, jax.random.uniform(k_sym, health.shape) < p.symptomatic, sym)
    return h, sym, new


def day(p: Params, nb: Neighbours | None, key: jax.Array, health, sym, w):
    """One day of one replicate (``p.substeps`` steps at fixed contact levels ``w``); step k
    draws from fold_in(key, k). Returns the new health and symptom flags and who was
    infected during the day."""

    def body(carry, i):
        h, s, infected = carry
        h, s, new = step(p, nb, jax.random.fold_in(key, i), h, s, w)
        return (h, s, infected | new), None

    init = (health, sym, jnp.zeros(health.shape, bool))
    return jax.lax.scan(body, init, jnp.arange(p.substeps))[0]
