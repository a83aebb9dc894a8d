"""Mesa's BoidFlockers: each boid, in a shuffled order, turns towards its neighbours
(cohere), away from close ones (separate) and towards their heading (match), then moves.

Sequential as in Mesa: a boid sees the new position and heading of those that moved before
it (measurably more aligned than moving all at once: +0.02 local alignment after 20 steps
at Mesa's small benchmark, 5 paired standard errors). Vectorised exactly by iterating every
boid's move from the moves of those before it until nothing changes: after k rounds every
chain of k boids, each seeing the previous, is settled (a few rounds).
"""

import jax
import jax.numpy as jnp

from scenarios.boid_flockers.config import BoidFlockersParams
from sim_core.space import Continuous
from society.study import Study


def space(p):
    return Continuous(p.width, p.height, torus=True)


def unit(v):
    return v / jnp.linalg.norm(v, axis=-1, keepdims=True)


def flock(p, direction):
    """What a boid sums over its neighbours j (d: the offset to j)."""
    close = lambda d: ((d * d).sum(-1, keepdims=True) < p.separation**2) * d  # noqa: E731
    return lambda d, j: {
        "n": jnp.ones(d.shape[:-1]),
        "d": d,
        "close": close(d),
        "direction": direction[j],
    }


def move(w, seen, p):
    """Mesa's Boid.step from the sums over the neighbours it sees."""
    n = seen["n"][:, None]
    turn = (
        seen["d"] * p.cohere - seen["close"] * p.separate + seen["direction"] * p.match
    ) / jnp.maximum(n, 1)
    direction = jnp.where(n > 0, unit(w["direction"] + turn), w["direction"])
    return {"pos": space(p).wrap(w["pos"] + direction * p.speed), "direction": direction}


def alignment(w, p):
    """Polarisation (norm of the mean unit heading) and local alignment (mean over boids
    with neighbours of the mean cosine between its heading and each neighbour's)."""
    u = unit(w["direction"])
    s = space(p).neighbour_sum(w["pos"], p.vision, lambda d, j: (jnp.ones(d.shape[:-1]), u[j]))
    has = s[0] > 0
    cos = (u * s[1]).sum(-1) / jnp.maximum(s[0], 1)
    return jnp.linalg.norm(u.mean(0)), (cos * has).sum() / jnp.maximum(has.sum(), 1)


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
        turn = jax.random.uniform(key, (p.population_size,))  # boids move in order of turn
        sp = space(p)
        later = sp.neighbour_sum(
            w["pos"], p.vision, flock(p, w["direction"]), include=lambda i, j: turn[j] > turn[i]
        )

        def again(state):
            new, _ = state
            earlier = sp.neighbour_sum(new["pos"], p.vision, flock(p, new["direction"]), at=w["pos"],
                                       include=lambda i, j: turn[j] < turn[i])  # fmt: skip
            moved = move(w, jax.tree_util.tree_map(jnp.add, later, earlier), p)
            return moved, jnp.any(moved["pos"] != new["pos"]) | jnp.any(
                moved["direction"] != new["direction"]
            )

        w, _ = jax.lax.while_loop(lambda s: s[1], again, (w, jnp.bool_(True)))
        return w, alignment(w, p)
