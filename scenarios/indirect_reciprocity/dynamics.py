"""Pure JAX kernels of indirect reciprocity with binary reputations (no loop over agents).

A round: every agent is donor once, to a uniformly random other agent. Donors decide from
their view of the recipient (1 good, 0 bad); then all acts are settled at once from the
reputations at the start of the round: payoffs (-c to a giving donor, +b to its recipient)
and new reputations of the donors.

Norms (second-order where the recipient's reputation matters; Ohtsuki & Iwasa 2004):

==================  ====================  ====================  ====================
act \\ recipient     image-scoring         standing              stern-judging
==================  ====================  ====================  ====================
give to good        good                  good                  good
refuse good         bad                   bad                   bad
give to bad         good                  good                  bad
refuse bad          bad                   good                  good
==================  ====================  ====================  ====================

Assessment:
- public: one reputation per agent; each act is observed with probability ``q`` and then
  sets the donor's reputation (judged against the recipient's public reputation).
- private: ``views[o, i]`` is observer o's view of agent i; every agent observes each act
  independently with probability ``q`` and judges it against its own view of the recipient
  (Uchida 2010; Hilbe et al. 2018). Everyone starts seen as good.

Errors: an intended gift fails with probability ``execution_error``; an observer records the
opposite of its judgement with probability ``assessment_error``.

A :class:`Game`'s numbers are traced; which draws a round needs is static: a draw whose
probability is 0 or 1 (no execution or assessment errors, ``q = 1``) is not made, and all
that are made come from one ``jax.random.bits`` call (each PRNG call compiles its own hash
circuit, about a second of XLA time on CPU).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from sim_core.state import pytree_dataclass, static_field

# Judgement of a donor for (refuse bad, refuse good, give to bad, give to good).
NORM_TABLES = {
    "image-scoring": (0, 0, 1, 1),
    "standing": (1, 0, 1, 1),
    "stern-judging": (1, 0, 0, 1),
}


@pytree_dataclass
class Game:
    """The rules of a run: numbers traced, the shape of the computation static."""

    table: jax.Array  # int8 (4,): NORM_TABLES entry
    q: jax.Array
    b: jax.Array
    c: jax.Array
    execution_error: jax.Array
    assessment_error: jax.Array
    private: bool = static_field()
    draws: tuple[str, ...] = static_field()  # of "execution", "assessment", "observation"


def make_game(
    norm: str,
    *,
    private: bool,
    q: float,
    b: float,
    c: float,
    execution_error: float = 0.0,
    assessment_error: float = 0.0,
) -> Game:
    if norm not in NORM_TABLES:
        raise ValueError(f"norm must be one of {', '.join(NORM_TABLES)}, got {norm!r}")
    f = np.float32
    needed = {"execution": execution_error > 0, "assessment": assessment_error > 0, "observation": q < 1}  # fmt: skip
    return Game(
        table=jnp.asarray(NORM_TABLES[norm], jnp.int8),
        q=f(q),
        b=f(b),
        c=f(c),
        execution_error=f(execution_error),
        assessment_error=f(assessment_error),
        private=bool(private),
        draws=tuple(k for k, v in needed.items() if v),
    )


def uniform(bits: jax.Array) -> jax.Array:
    """uint32 words to U(0, 1) (24 bits, midpoints: never exactly 0 or 1)."""
    return ((bits >> 8).astype(jnp.float32) + 0.5) * (1.0 / (1 << 24))


def assess(table: jax.Array, gave: jax.Array, recipient_good: jax.Array) -> jax.Array:
    """The donor's new reputation (int8, 1 good) from its act and the recipient's reputation
    (arrays broadcast together), by the norm's ``table``."""
    g = gave.astype(bool)
    r = recipient_good.astype(bool)
    return jnp.where(g, jnp.where(r, table[3], table[2]), jnp.where(r, table[1], table[0]))


def draw_recipients(key: jax.Array, n: int) -> jax.Array:
    """A uniformly random other agent for every donor (modulo bias below n / 2^32)."""
    offset = jax.random.bits(key, (n,)) % jnp.uint32(n - 1)
    return ((jnp.arange(n) + 1 + offset.astype(jnp.int32)) % n).astype(jnp.int32)


def donor_views(game: Game, rep: jax.Array, recipients: jax.Array) -> jax.Array:
    """Each donor's view of its recipient (public: the recipient's reputation)."""
    if game.private:
        return rep[jnp.arange(recipients.shape[0]), recipients]
    return rep[recipients]


def good_share(rep: jax.Array) -> jax.Array:
    """Share of good reputations (private, an (n, n) matrix: of views of others)."""
    if rep.ndim == 2:
        n = rep.shape[0]
        total = rep.sum(dtype=jnp.float32) - jnp.trace(rep).astype(jnp.float32)
        return total / (n * (n - 1))
    return rep.mean(dtype=jnp.float32)


def settle(game: Game, rep: jax.Array, recipients: jax.Array, intended: jax.Array, key: jax.Array):
    """Settle one round of one replicate. Returns (new reputations, executed gifts (int8),
    payoff of every agent this round). Private assessment draws its assessment and
    observation per observer and act (n x n)."""
    n = recipients.shape[0]
    rows = [n if game.private and k != "execution" else 1 for k in game.draws]
    u = uniform(jax.random.bits(key, (sum(rows), n))) if rows else None
    cut = np.cumsum([0, *rows]).tolist()
    drawn = {
        k: u[a:z] if z - a > 1 else u[a]
        for k, a, z in zip(game.draws, cut[:-1], cut[1:], strict=True)
    }
    gave = intended.astype(jnp.int8)
    if "execution" in drawn:
        gave = gave * (drawn["execution"] >= game.execution_error).astype(jnp.int8)
    received = jnp.zeros((n,), jnp.float32).at[recipients].add(gave.astype(jnp.float32))
    payoff = game.b * received - game.c * gave.astype(jnp.float32)
    # Private: entry [o, i] judges donor i against observer o's view of i's recipient.
    judged = assess(game.table, gave, rep[:, recipients] if game.private else rep[recipients])
    if "assessment" in drawn:
        judged = jnp.where(drawn["assessment"] < game.assessment_error, 1 - judged, judged)
    if "observation" in drawn:
        judged = jnp.where(drawn["observation"] < game.q, judged, rep)
    return judged.astype(jnp.int8), gave, payoff
