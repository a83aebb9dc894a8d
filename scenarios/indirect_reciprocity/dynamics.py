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

The norm and the numbers of a :class:`Game` are traced arrays, so one compilation serves
every norm, b, c, q and error rate; only the assessment kind, and for private assessment
which of its n x n random draws are needed, are static. Each kernel draws all its randomness in one ``jax.random.bits`` call
(every PRNG call compiles its own hash circuit, about a second of XLA time on CPU).
The ``batch_*`` functions vmap the one-replicate kernels over a leading replicate axis.
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
    # Private only (n x n draws per round are worth skipping): draw who observes (q < 1) and
    # which judgements are wrong (assessment_error > 0). Public rounds always draw both.
    partial: bool = static_field()
    assessment_errors: bool = static_field()


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
    return Game(
        table=jnp.asarray(NORM_TABLES[norm], jnp.int8),
        q=f(q),
        b=f(b),
        c=f(c),
        execution_error=f(execution_error),
        assessment_error=f(assessment_error),
        private=bool(private),
        partial=bool(private) and q < 1,
        assessment_errors=bool(private) and assessment_error > 0,
    )


def _unit(bits: jax.Array) -> jax.Array:
    """uint32 words to U(0, 1) (24 bits, midpoints: never exactly 0 or 1)."""
    return ((bits >> 8).astype(jnp.float32) + 0.5) * (1.0 / (1 << 24))


def assess(table: jax.Array, gave: jax.Array, recipient_good: jax.Array) -> jax.Array:
    """The donor's new reputation (int8, 1 good) from its act and the recipient's reputation
    (arrays broadcast together), by the norm's ``table``."""
    g = gave.astype(bool)
    r = recipient_good.astype(bool)
    return jnp.where(g, jnp.where(r, table[3], table[2]), jnp.where(r, table[1], table[0]))


def initial_reputations(game: Game, n: int) -> jax.Array:
    """Everyone starts good: (n,) public reputations or the (n, n) matrix of private views."""
    return jnp.ones((n, n) if game.private else (n,), jnp.int8)


def draw_recipients(key: jax.Array, n: int) -> jax.Array:
    """A uniformly random other agent for every donor (modulo bias below n / 2^32)."""
    offset = jax.random.bits(key, (n,)) % jnp.uint32(n - 1)
    return ((jnp.arange(n) + 1 + offset.astype(jnp.int32)) % n).astype(jnp.int32)


def donor_views(game: Game, rep: jax.Array, recipients: jax.Array) -> jax.Array:
    """Each donor's view of its recipient (public: the recipient's reputation)."""
    if game.private:
        return rep[jnp.arange(recipients.shape[0]), recipients]
    return rep[recipients]


def own_reputations(game: Game, rep: jax.Array) -> jax.Array:
    """What an agent can know of its own reputation: public, the shared one; private, -1."""
    if game.private:
        return jnp.full((rep.shape[0],), -1, jnp.int8)
    return rep


def good_share(game: Game, rep: jax.Array) -> jax.Array:
    """Share of good reputations (private: of views of others, the diagonal left out)."""
    if game.private:
        n = rep.shape[0]
        total = rep.sum(dtype=jnp.float32) - jnp.trace(rep).astype(jnp.float32)
        return total / (n * (n - 1))
    return rep.mean(dtype=jnp.float32)


def settle(game: Game, rep: jax.Array, recipients: jax.Array, intended: jax.Array, key: jax.Array):
    """Settle one round of one replicate. Returns (new reputations, executed gifts (int8),
    payoff of every agent this round). Uniform draws lie strictly inside (0, 1), so q = 1 and
    error rates of 0 are exact."""
    n = recipients.shape[0]
    if game.private:
        rows = 1 + n * (int(game.partial) + int(game.assessment_errors))
    else:
        rows = 3  # execution, assessment, observation
    u = _unit(jax.random.bits(key, (rows, n)))
    gave = intended.astype(jnp.int8) * (u[0] >= game.execution_error).astype(jnp.int8)
    received = jnp.zeros((n,), jnp.float32).at[recipients].add(gave.astype(jnp.float32))
    payoff = game.b * received - game.c * gave.astype(jnp.float32)
    if not game.private:
        judged = assess(game.table, gave, rep[recipients])
        judged = jnp.where(u[1] < game.assessment_error, 1 - judged, judged)
        return jnp.where(u[2] < game.q, judged, rep).astype(jnp.int8), gave, payoff
    # Entry [o, i] judges donor i against observer o's view of i's recipient.
    judged = assess(game.table, gave, rep[:, recipients])
    nxt = 1
    if game.assessment_errors:
        judged = jnp.where(u[nxt : nxt + n] < game.assessment_error, 1 - judged, judged)
        nxt += n
    if game.partial:
        judged = jnp.where(u[nxt : nxt + n] < game.q, judged, rep)
    return judged.astype(jnp.int8), gave, payoff


# Eager jax.random.fold_in costs ~0.3 ms per call on CPU; compiled, ~10 us.
key_at = jax.jit(jax.random.fold_in)


def round_key(key: jax.Array, t: jax.Array, phase: int) -> jax.Array:
    """The key of one phase (0 pairing, 1 settling) of round ``t``: a function of the
    replicate's key and the round only, so batching never changes the draws."""
    return jax.random.fold_in(key, 2 * t + phase)


@jax.jit
def batch_look(game: Game, rep: jax.Array, keys: jax.Array, t: jax.Array):
    """For every replicate in round ``t``: recipients, donors' views of them, and donors'
    own reputations as they can know them."""
    n = rep.shape[1]

    def one(r, k):
        j = draw_recipients(round_key(k, t, 0), n)
        return j, donor_views(game, r, j), own_reputations(game, r)

    return jax.vmap(one)(rep, keys)


@jax.jit
def batch_settle(
    game: Game,
    rep: jax.Array,
    recipients: jax.Array,
    intended: jax.Array,
    seen_good: jax.Array,
    keys: jax.Array,
    t: jax.Array,
    onehot: jax.Array,
):
    """Settle round ``t`` in every replicate and summarise it per label (strategy or kind).

    ``onehot`` (replicates, N, L) marks each agent's label. Returns the new reputations, the
    payoffs (replicates, N), and a dict of per-replicate statistics: ``cooperation`` (share of
    executed gifts), ``good_share``, ``payoff`` (mean per agent of each label, (R, L)) and
    the decision counts ``gave_good``, ``good``, ``gave_bad``, ``bad`` per label (R, L),
    where good/bad is the donor's view of its recipient.
    """

    def one(r, j, a, k):
        new, gave, pay = settle(game, r, j, a, round_key(k, t, 1))
        return new, gave, pay, good_share(game, new)

    new, gave, pay, share = jax.vmap(one)(rep, recipients, intended, keys)
    count = jnp.maximum(onehot.sum(axis=1), 1.0)
    a = intended.astype(jnp.float32)
    g = seen_good.astype(jnp.float32)

    def per_label(x):
        return jnp.einsum("rn,rnl->rl", x, onehot)

    stats = {
        "cooperation": gave.mean(axis=1, dtype=jnp.float32),
        "good_share": share,
        "payoff": per_label(pay) / count,
        "gave_good": per_label(a * g),
        "good": per_label(g),
        "gave_bad": per_label(a * (1 - g)),
        "bad": per_label(1 - g),
    }
    return new, pay, stats
