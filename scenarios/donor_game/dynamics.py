"""World rules of the donor game: the pairing schedule and one round, pure JAX over all agents.

A *trace* is what a donor is shown about a recipient: the recipient's most recent action as
donor, then the action of that round's recipient before it, and so on (Vallinder and Hughes
2024). When donor d acts on recipient r, d's new trace is d's own action followed by r's
trace, cut to ``depth`` entries. Each entry is one event, a row of ``TRACE_FIELDS``:

===========  ================================================================
``kind``     -1 empty, 0 "no previous interactions", 1 donated, 2 punished, 3 invalid offer
``round``    round of the event (1-based)
``donor``    the acting agent (for kind 0: the agent itself)
``recipient``  its partner
``fraction`` share of its resources the donor gave up (donated or spent punishing)
``amount``   units the donor gave up
===========  ================================================================
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from sim_core.rng import inverse

EMPTY, NO_HISTORY, DONATED, PUNISHED, INVALID = -1, 0, 1, 2, 3
TRACE_FIELDS = ("kind", "round", "donor", "recipient", "fraction", "amount")


def fresh_trace(n: int, depth: int) -> jax.Array:
    """Start of a game: each agent's trace says 'no previous interactions' (n, depth, fields)."""
    ids = jnp.arange(n, dtype=jnp.float32)
    first = jnp.stack([jnp.zeros(n), jnp.zeros(n), ids, ids, jnp.zeros(n), jnp.zeros(n)], -1)
    rest = jnp.zeros((n, depth - 1, 6)).at[:, :, 0].set(EMPTY)
    return jnp.concatenate([first[:, None], rest], 1)


def pairs(order: jax.Array, rnd: jax.Array, game: jax.Array, rounds: int) -> tuple[jax.Array, ...]:
    """Each agent's partner and whether it donates in round ``rnd`` (0-based) of ``game``.

    ``order`` puts the agents in two halves a = order[:h], b = order[h:]. Round i < rounds/2
    pairs a[j] with b[(j - i) mod h], a donating in even rounds and b in odd ones; round
    rounds/2 + i repeats round i's pairs with the roles reversed (the authors'
    bipartiteRoundRobin + extendRounds); the second game swaps the halves' roles."""
    n = order.shape[0]
    h, i = n // 2, rnd % (rounds // 2)
    pos = inverse(order)
    side_a = pos < h
    j = jnp.where(side_a, pos, pos - h)
    partner = order[jnp.where(side_a, h + (j - i) % h, (j + i) % h)]
    a_gives = (i % 2 == 0) ^ (rnd >= rounds // 2) ^ (game == 1)
    return partner, side_a == a_gives


def play(res, trace, partner, donor, a, round_no, multiplier, loss, punishment):  # noqa: ANN001, ANN201
    """One round for all pairs at once. ``a`` is each donor's signed share of its resources:
    in [0, 1] gives ``a * resources`` (the recipient gets ``multiplier`` times it); with
    ``punishment``, ``a`` in [-1, 0) spends ``|a| * resources`` to remove ``loss`` times it
    from the recipient (floored at 0). Anything else (|a| > 1, NaN, a negative share without
    punishment) is an invalid offer: nothing changes hands. Returns (resources, trace,
    outcome), the outcome per agent as donor (zero for recipients)."""
    invalid = ~jnp.isfinite(a) | (jnp.abs(a) > 1.0) | ((a < 0) & (not punishment))
    share = jnp.where(invalid, 0.0, jnp.abs(a))
    x = share * res
    punished = ~invalid & (a < 0)
    gets = jnp.where(donor, 0.0, x[partner])
    hit = ~donor & punished[partner]
    got = jnp.where(hit, jnp.maximum(res - loss * gets, 0.0), res + multiplier * gets)
    new = jnp.where(donor, res - x, got)
    kind = jnp.where(invalid, INVALID, jnp.where(punished, PUNISHED, DONATED))
    ids = jnp.arange(res.shape[0])
    event = jnp.stack([kind, jnp.full_like(kind, round_no), ids, partner, share, x], -1).astype(
        jnp.float32
    )
    chained = jnp.concatenate([event[:, None], trace[partner, :-1]], 1)
    out = {
        "held": jnp.where(donor, res, 0.0),
        "given": jnp.where(donor & ~invalid & ~punished, x, 0.0),
        "punished": donor & punished,
        "invalid": donor & invalid,
        "gain": new - res,
    }
    return new, jnp.where(donor[:, None, None], chained, trace), out
