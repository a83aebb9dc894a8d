"""Mesa's BoidFlockers: each boid, in a shuffled order, turns towards its neighbours
(cohere), away from close ones (separate) and towards their heading (match), then moves.

Sequential as in Mesa: a boid sees the new position and heading of those that moved before
it (measurably more aligned than moving all at once: +0.02 local alignment after 20 steps
at Mesa's small benchmark, 5 paired standard errors). So a step is a compiled loop over the
boids in turn order, each summing over all boids at once: measured 3-7 us a boid at 200-400
boids, 2-8x faster than iterating all boids' moves to a fixed point (6 rounds of
neighbourhood sums).
"""

import jax
import jax.numpy as jnp

from scenarios.boid_flockers.config import BoidFlockersParams
from sim_core.space import Continuous, shuffle
from society.study import Study


def space(p):
    return Continuous(p.width, p.height, torus=True)


def unit(v):
    return v / jnp.linalg.norm(v, axis=-1, keepdims=True)


def alignment(w, p):
    """Polarisation (norm of the mean unit heading) and local alignment (mean over boids
    with neighbours of the mean cosine between its heading and each neighbour's)."""
    u = unit(w["direction"])
    near = space(p).neighbours(w["pos"], p.vision).astype(jnp.float32)
    n = near @ jnp.ones(near.shape[0])
    cos = (u * (near @ u)).sum(-1) / jnp.maximum(n, 1)
    return jnp.linalg.norm(u.mean(0)), (cos * (n > 0)).sum() / jnp.maximum((n > 0).sum(), 1)


class BoidFlockers(Study):
    Params = BoidFlockersParams
    reporters = {"polarisation": lambda w, out: out[0], "local_alignment": lambda w, out: out[1]}

    def init(key, p):
        k_pos, k_dir = jax.random.split(key)
        size = jnp.array([p.width, p.height], jnp.float32)
        pos = jax.random.uniform(k_pos, (p.population_size, 2)) * size
        return {
            "pos": pos,
            "direction": jax.random.uniform(k_dir, (p.population_size, 2), minval=-1, maxval=1),
        }

    def step(key, w, actions, p):
        n, sp = p.population_size, space(p)
        order, _ = shuffle(key, n)  # boids move in this order

        def boid(k, state):  # Mesa's Boid.step for the k-th boid to move
            pos, direction = state
            i = order[k]
            d = sp.displacement(pos[i], pos)
            dist2 = d[:, 0] * d[:, 0] + d[:, 1] * d[:, 1]
            near = ((dist2 <= p.vision**2) & (jnp.arange(n) != i)).astype(jnp.float32)
            close = near * (dist2 < p.separation**2)
            count = near @ jnp.ones(n)
            turn = p.cohere * (near @ d) - p.separate * (close @ d) + p.match * (near @ direction)
            heading = direction[i] + turn / jnp.maximum(count, 1)
            heading = jnp.where(count > 0, unit(heading), direction[i])
            return pos.at[i].set(sp.wrap(pos[i] + heading * p.speed)), direction.at[i].set(heading)

        pos, direction = jax.lax.fori_loop(0, n, boid, (w["pos"], w["direction"]))
        w = {"pos": pos, "direction": direction}
        return w, alignment(w, p)
