"""World rules of the commons: regrowth, the sustainable catch, one month of fishing.

Every replicate is one lake: arrays have a leading replicate axis ``(R,)`` and requests are
``(R, N)``, so one compiled call fishes all lakes of a batch (no loop over agents or lakes).
A lake that collapsed keeps its stock and takes no more requests.
"""

from __future__ import annotations

from functools import partial

import jax
import jax.numpy as jnp


def regrow(stock: jax.Array, capacity, growth_rate, *, doubling: bool) -> jax.Array:
    """Stock after a month's regrowth: ``min(K, S + g S (1 - S/K))`` or GovSim's ``min(K, 2S)``."""
    if doubling:
        return jnp.minimum(capacity, 2.0 * stock)
    return jnp.minimum(capacity, stock + growth_rate * stock * (1.0 - stock / capacity))


def sustainable_catch(stock: jax.Array, capacity, growth_rate, *, doubling: bool) -> jax.Array:
    """GovSim's sustainability threshold f(S): the largest total catch after which the lake
    regrows to at least S (for S <= K). Regrowth is non-decreasing on [0, K], so the smallest
    stock ``s`` left with ``regrow(s) >= S`` is S/2 for doubling and, for logistic growth, the
    smaller root of ``g s^2 / K - (1 + g) s + S = 0``, written ``2S / ((1 + g) + sqrt(D))``
    (stable, and S itself when g = 0); ``D = (1 + g)^2 - 4 g S / K >= (1 - g)^2 >= 0``."""
    if doubling:
        left = stock / 2.0
    else:
        g = growth_rate
        disc = jnp.maximum((1.0 + g) ** 2 - 4.0 * g * stock / capacity, 0.0)
        left = 2.0 * stock / ((1.0 + g) + jnp.sqrt(disc))
    return jnp.maximum(stock - left, 0.0)


@partial(jax.jit, static_argnames=("doubling",))
def fish(
    stock: jax.Array,
    alive: jax.Array,
    requests: jax.Array,
    capacity,
    growth_rate,
    collapse_threshold,
    *,
    doubling: bool,
) -> tuple[jax.Array, jax.Array, dict[str, jax.Array]]:
    """One month for every lake: ``requests`` (R, N) tons (or (N,), one lake); negative or non-finite requests
    count as 0. When the requests of a lake exceed its stock, each fisher gets the stock times
    its share of the requests. A lake left with fewer than ``collapse_threshold`` tons
    collapses (its episode ends, no regrowth); the others regrow. Returns the new stock, the
    lakes still alive, and the month's outcome."""
    req = jnp.where(jnp.isfinite(requests) & (requests > 0), requests, 0.0)
    req = jnp.where(alive[..., None], req, 0.0)
    total = req.sum(axis=-1)
    scale = jnp.where(total > stock, stock / jnp.where(total > 0, total, 1.0), 1.0)
    caught = req * scale[..., None]
    left = jnp.maximum(stock - caught.sum(axis=-1), 0.0)
    collapsed = alive & (left < collapse_threshold)
    grown = regrow(left, capacity, growth_rate, doubling=doubling)
    new = jnp.where(alive, jnp.where(collapsed, left, grown), stock)
    out = {"requested": req, "caught": caught, "left": left, "collapsed": collapsed}
    return new, alive & ~collapsed, out
