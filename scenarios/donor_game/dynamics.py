"""World rules of the donor game: the pairing schedule and one round as a pure JAX transition.

Agents are rows of flat arrays (every replicate of a batch side by side), so one compiled
call plays a round for all pairs of all replicates: no Python loop over agents or pairs.

A *trace* is what a donor is shown about a recipient: the recipient's most recent action as
donor, then the action of that round's recipient before it, and so on (Vallinder and Hughes
2024). When donor d acts on recipient r, d's new trace is d's own action followed by r's
trace, cut to ``depth`` entries. Each entry is one event:

===========  ================================================================
``kind``     -1 empty, 0 "no previous interactions", 1 donated, 2 punished, 3 invalid offer
``round``    round of the event (1-based)
``donor``    row of the acting agent (for kind 0: the agent itself)
``recipient``  row of its partner
``fraction`` share of its resources the donor gave up (donated or spent punishing)
``amount``   units the donor gave up
===========  ================================================================
"""

from __future__ import annotations

from functools import partial

import jax
import jax.numpy as jnp
import numpy as np

from sim_core.state import pytree_dataclass

EMPTY, NO_HISTORY, DONATED, PUNISHED, INVALID = -1, 0, 1, 2, 3
TRACE_FIELDS = ("kind", "round", "donor", "recipient", "fraction", "amount")


@pytree_dataclass
class DonorState:
    """Resources and traces of every agent row; trace arrays are (rows, depth), newest first."""

    resources: jax.Array
    kind: jax.Array
    round: jax.Array
    donor: jax.Array
    recipient: jax.Array
    fraction: jax.Array
    amount: jax.Array


def initial_state(rows: int, depth: int, endowment: float) -> DonorState:
    """Start of a game: everyone holds the endowment; each trace says 'no previous interactions'."""
    kind = np.full((rows, depth), EMPTY, np.int32)
    kind[:, 0] = NO_HISTORY
    ids = np.zeros((rows, depth), np.int32)
    ids[:, 0] = np.arange(rows)
    zeros_i = np.zeros((rows, depth), np.int32)
    zeros_f = np.zeros((rows, depth), np.float32)
    return DonorState(
        resources=jnp.full((rows,), endowment, jnp.float32),
        kind=jnp.asarray(kind),
        round=jnp.asarray(zeros_i),
        donor=jnp.asarray(ids),
        recipient=jnp.asarray(ids),
        fraction=jnp.asarray(zeros_f),
        amount=jnp.asarray(zeros_f),
    )


def pairings(
    halves_a: np.ndarray, halves_b: np.ndarray, rounds: int
) -> tuple[np.ndarray, np.ndarray]:
    """Donors and recipients of the first game, each ``(rounds, replicates, h)``.

    ``halves_a``/``halves_b`` are ``(replicates, h)`` agent indices. Round i < rounds/2 pairs
    a[j] with b[(j - i) mod h] (b rotated past a static a), a donating in even rounds and b in
    odd ones; round rounds/2 + i repeats round i's pairs with the roles reversed. This is the
    authors' bipartiteRoundRobin + extendRounds. The second game of a generation swaps the
    halves' roles: it is this schedule with donors and recipients exchanged.
    """
    a = np.asarray(halves_a)
    b = np.asarray(halves_b)
    if a.shape != b.shape or a.ndim != 2:
        raise ValueError(
            f"halves must be two (replicates, h) arrays of one shape, got {a.shape} and {b.shape}"
        )
    h = a.shape[1]
    half = rounds // 2
    i = np.arange(half)[:, None]
    j = np.arange(h)[None, :]
    rot_b = np.moveaxis(b[:, (j - i) % h], 1, 0)  # (half, replicates, h)
    a_b = np.broadcast_to(a, rot_b.shape)
    a_gives = (np.arange(half) % 2 == 0)[:, None, None]
    d = np.where(a_gives, a_b, rot_b)
    r = np.where(a_gives, rot_b, a_b)
    return np.concatenate([d, r]), np.concatenate([r, d])


@partial(jax.jit, static_argnames=("punishment",))
def play_round(
    state: DonorState,
    donors: jax.Array,
    recipients: jax.Array,
    action: jax.Array,
    round_no: jax.Array,
    multiplier: jax.Array,
    loss: jax.Array,
    *,
    punishment: bool,
) -> tuple[DonorState, dict[str, jax.Array]]:
    """All pairs of one round at once. ``action`` is a signed share of the donor's current
    resources: ``a`` in [0, 1] gives ``a * resources`` (the recipient gets ``multiplier``
    times it); with ``punishment``, ``a`` in [-1, 0) spends ``|a| * resources`` to remove
    ``loss`` times it from the recipient (floored at 0). Anything else (|a| > 1, NaN, a
    negative share without punishment) is an invalid offer: nothing changes hands.
    Each agent appears at most once per round, so the scatters never collide."""
    res = state.resources
    held = res[donors]
    got = res[recipients]
    a = action.astype(jnp.float32)
    invalid = ~jnp.isfinite(a) | (jnp.abs(a) > 1.0)
    if not punishment:
        invalid = invalid | (a < 0)
    share = jnp.where(invalid, 0.0, jnp.abs(a))
    x = share * held
    punished = ~invalid & (a < 0)
    donated = ~invalid & ~punished
    new_got = jnp.where(punished, jnp.maximum(got - loss * x, 0.0), got + multiplier * x)
    res = res.at[donors].set(held - x).at[recipients].set(new_got)
    kind = jnp.where(invalid, INVALID, jnp.where(punished, PUNISHED, DONATED)).astype(jnp.int32)
    event = {
        "kind": kind,
        "round": jnp.broadcast_to(round_no, donors.shape).astype(jnp.int32),
        "donor": donors.astype(jnp.int32),
        "recipient": recipients.astype(jnp.int32),
        "fraction": share,
        "amount": x,
    }
    new = {}
    for f in TRACE_FIELDS:
        old = getattr(state, f)
        row = jnp.concatenate([event[f][:, None], old[recipients, :-1]], axis=1)
        new[f] = old.at[donors].set(row)
    outcome = {
        "held": held,
        "given": jnp.where(donated, x, 0.0),
        "share": jnp.where(donated, share, 0.0),
        "punished": punished,
        "invalid": invalid,
    }
    return state.replace(resources=res, **new), outcome


@jax.jit
def observe(
    state: DonorState,
    donors: jax.Array,
    recipients: jax.Array,
    round_no: jax.Array,
    endowment: jax.Array,
) -> dict[str, jax.Array]:
    """What each donor sees (one row per donor): the round, both resources, the recipient,
    its trace as ``trace`` (donors, depth, fields in TRACE_FIELDS order; ids as exact
    floats) and features for learned policies. Few leaves: every cohort gets them all."""
    n = donors.shape[0]
    trace = jnp.stack(
        [getattr(state, f)[recipients].astype(jnp.float32) for f in TRACE_FIELDS], axis=-1
    )
    kind0 = state.kind[recipients, 0]
    frac0 = state.fraction[recipients, 0]
    acted = (kind0 == DONATED) | (kind0 == PUNISHED) | (kind0 == INVALID)
    resources = state.resources[donors]
    recipient_resources = state.resources[recipients]
    return {
        "round": jnp.broadcast_to(round_no, (n,)).astype(jnp.int32),
        "recipient": recipients.astype(jnp.int32),
        "resources": resources,
        "recipient_resources": recipient_resources,
        "trace": trace,
        "recipient_last_given": jnp.where(
            kind0 == DONATED, frac0, jnp.where(kind0 == PUNISHED, -frac0, 0.0)
        ),
        "has_trace": acted.astype(jnp.float32),
        "resources_norm": resources / endowment,
        "recipient_resources_norm": recipient_resources / endowment,
    }


def flat_trace(obs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """``obs`` with ``trace`` split into scalar fields ``t{k}_{field}`` (k = 0 newest), the
    form an LLM cohort renders one agent at a time."""
    out = {k: v for k, v in obs.items() if k != "trace"}
    trace = np.asarray(obs["trace"])
    for k in range(trace.shape[1]):
        for i, f in enumerate(TRACE_FIELDS):
            out[f"t{k}_{f}"] = trace[:, k, i]
    return out


# Observations a learned policy reads (all scalars per donor).
LEARNED_FEATURES = (
    "recipient_last_given",
    "has_trace",
    "resources_norm",
    "recipient_resources_norm",
)
