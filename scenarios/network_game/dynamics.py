"""Pure JAX kernels of evolutionary games on graphs (no Python loop over agents or edges).

Strategies are 1 (cooperate) or 0 (defect). A synchronous generation updates every agent
at once from the payoffs of the previous generation. An asynchronous generation is N
single-agent updates (random sequential updating) run in ``lax.scan``, one update of
every replicate per iteration; it keeps each agent's accumulated payoff up to date
incrementally (O(max degree) per update), so it needs the padded neighbour table of
:class:`sim_core.graph.Neighbours`.

Update rules (f = max(0, 1 - w + w * payoff) is fitness under selection intensity w):
- death-birth: a random agent dies; its neighbours compete for the site with probability
  proportional to f (Ohtsuki et al. 2006).
- birth-death: an agent chosen proportional to f in the whole population reproduces into a
  random neighbour's site. Synchronously, each site takes the strategy of neighbour j with
  probability proportional to f_j / k_j (the chance that j's offspring lands there).
- imitation: a random agent keeps its strategy or adopts a neighbour's, proportional to f
  over itself and its neighbours (Ohtsuki et al. 2006).
- fermi: a random agent x looks at a random neighbour y and copies it with probability
  1 / (1 + exp(-beta (P_y - P_x))) (Szabo and Toke 1998).
- best-neighbour: everyone copies the highest payoff in its neighbourhood, itself included,
  keeping its own strategy on ties (Nowak and May 1992). Synchronous.
- proportional: x copies a random neighbour y with probability (P_y - P_x) / (D max(k_x, k_y))
  when P_y > P_x, D = max(T, R) - min(S, P) (T - S in the PD, T - P in the snowdrift game;
  Santos and Pacheco 2005). With average payoffs the max(k) factor is dropped. Synchronous.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial

import jax
import jax.numpy as jnp

from sim_core.graph import (
    Neighbours,
    neighbour_argmax,
    neighbour_sum,
    random_neighbour,
    weighted_neighbour,
)


@dataclass(frozen=True)
class Rules:
    """Static description of the game and update rule (hashable: a jit static argument)."""

    R: float
    S: float
    T: float
    P: float
    self_interaction: bool
    average: bool
    update: str
    selection: float
    beta: float
    synchronous: bool

    def pay(self, a, b):
        """Payoff to a player with strategy ``a`` against ``b`` (arrays of 0/1)."""
        return (
            a * b * self.R
            + a * (1 - b) * self.S
            + (1 - a) * b * self.T
            + (1 - a) * (1 - b) * self.P
        )

    @property
    def spread(self) -> float:
        return max(self.T, self.R) - min(self.S, self.P)


def raw_payoffs(rules: Rules, nb: Neighbours, s: jax.Array) -> jax.Array:
    """Accumulated payoff of every agent (sum over the games it plays)."""
    sf = s.astype(jnp.float32)
    k = nb.degree.astype(jnp.float32)
    nc = neighbour_sum(nb, sf)
    raw = sf * (rules.R * nc + rules.S * (k - nc)) + (1 - sf) * (rules.T * nc + rules.P * (k - nc))
    if rules.self_interaction:
        raw = raw + rules.pay(sf, sf)
    return raw


def _games(rules: Rules, nb: Neighbours) -> jax.Array:
    return nb.degree.astype(jnp.float32) + (1.0 if rules.self_interaction else 0.0)


def payoffs(rules: Rules, nb: Neighbours, s: jax.Array) -> jax.Array:
    """Payoffs as the scenario defines them (accumulated or averaged over games played)."""
    raw = raw_payoffs(rules, nb, s)
    return raw / jnp.maximum(_games(rules, nb), 1.0) if rules.average else raw


def fitness(rules: Rules, payoff: jax.Array) -> jax.Array:
    return jnp.maximum(1.0 - rules.selection + rules.selection * payoff, 0.0)


def sync_step(
    rules: Rules, nb: Neighbours, key: jax.Array, s: jax.Array, pay: jax.Array | None = None
) -> jax.Array:
    """One synchronous generation: every agent updates from the same payoffs (``pay``, when
    the caller has them)."""
    k1, k2, k3 = jax.random.split(key, 3)
    pay = payoffs(rules, nb, s) if pay is None else pay
    n = nb.n
    if rules.update == "best-neighbour":
        j = neighbour_argmax(nb, pay)
        return jnp.where(pay[j] > pay, s[j], s)
    if rules.update in ("fermi", "proportional"):
        j = random_neighbour(nb, k1)
        diff = pay[j] - pay
        if rules.update == "fermi":
            prob = jax.nn.sigmoid(rules.beta * diff)
        else:
            deg = nb.degree.astype(jnp.float32)
            denom = rules.spread * (
                1.0 if rules.average else jnp.maximum(jnp.maximum(deg, deg[j]), 1.0)
            )
            prob = jnp.clip(diff / denom, 0.0, 1.0)
        return jnp.where(jax.random.uniform(k2, (n,)) < prob, s[j], s)
    f = fitness(rules, pay)
    if rules.update == "death-birth":
        return s[weighted_neighbour(nb, k1, f)]
    if rules.update == "birth-death":
        return s[weighted_neighbour(nb, k1, f / jnp.maximum(nb.degree, 1))]
    if rules.update == "imitation":
        j = weighted_neighbour(nb, k1, f)
        # Self versus the sampled neighbour, in proportion to self vs total neighbour fitness.
        nf = neighbour_sum(nb, f)
        keep = jax.random.uniform(k3, (n,)) * (f + nf) < f
        return jnp.where(keep | (nb.degree == 0), s, s[j])
    raise ValueError(f"unknown update rule {rules.update!r}")


def _async_update(rules: Rules, nb: Neighbours, carry, xs):
    """One single-agent update in each of R replicates at once.

    ``carry`` = (s, raw) flattened to ``(R * (n + 1),)``: replicate r's agents at
    ``r * (n + 1) + i``, then a dummy agent that the table's padding points at. Flat indices
    make each read and write one plain gather or scatter for all replicates: a ``vmap`` of
    the one-replicate update took 1.7x as long at R = 256 (XLA's batched gathers and scatters).
    ``xs`` = (u, key): per replicate three uniforms and, for birth-death, a key.
    """
    s, raw = carry
    u, key = xs
    n, table, deg = nb.n, nb.table, nb.degree
    reps = u.shape[0]
    base = jnp.arange(reps, dtype=jnp.int32) * (n + 1)  # each replicate's first agent
    games = jnp.maximum(_games(rules, nb), 1.0)

    def pay(idx):  # (R, m) agent ids, n for the dummy
        r = raw[base[:, None] + idx]
        return r / games[jnp.minimum(idx, n - 1)] if rules.average else r

    def pick(weights, valid):
        """Per replicate, a column of ``weights`` drawn proportional to it (uniform if all
        zero): searchsorted(cumsum, u * total, side="right"), written as a count."""
        w = jnp.where(valid, weights, 0.0)
        w = jnp.where(w.sum(axis=1, keepdims=True) > 0, w, valid.astype(w.dtype))
        c = jnp.cumsum(w, axis=1)
        hit = (c <= u[:, 1:2] * c[:, -1:]).sum(axis=1)
        return jnp.minimum(hit, w.shape[1] - 1)[:, None]

    def of(ids):  # agents' strategies
        return s[base + ids]

    i = jnp.minimum((u[:, 0] * n).astype(jnp.int32), n - 1)
    row = table[i]
    valid = row < n
    k_i = deg[i]
    site, new = i, of(i)
    if rules.update == "death-birth":
        j = jnp.take_along_axis(row, pick(fitness(rules, pay(row)), valid), axis=1)[:, 0]
        new = jnp.where(k_i > 0, of(j), of(i))
    elif rules.update == "imitation":
        cand = jnp.concatenate([i[:, None], row], axis=1)
        ok = jnp.concatenate([jnp.ones((reps, 1), bool), valid], axis=1)
        new = of(jnp.take_along_axis(cand, pick(fitness(rules, pay(cand)), ok), axis=1)[:, 0])
    elif rules.update == "fermi":
        col = jnp.minimum((u[:, 1] * k_i).astype(jnp.int32), jnp.maximum(k_i - 1, 0))
        y = jnp.where(k_i > 0, jnp.take_along_axis(row, col[:, None], axis=1)[:, 0], i)
        prob = jax.nn.sigmoid(rules.beta * (pay(y[:, None]) - pay(i[:, None]))[:, 0])
        new = jnp.where(u[:, 2] < prob, of(y), of(i))
    elif rules.update == "birth-death":
        # Parent drawn proportional to fitness by rejection against the largest possible
        # fitness; each replicate draws until it accepts (its own keys, as vmap would).
        every = jnp.broadcast_to(jnp.arange(n), (reps, n))
        fmax = jnp.max(fitness(rules, pay(every)), axis=1)
        split3 = jax.vmap(lambda k: jax.random.split(k, 3))

        def cond(state):
            return ~state[2].all()

        def body(state):
            kk, parent, done = state
            ks = split3(kk)
            cand = jax.vmap(lambda k: jax.random.randint(k, (), 0, n))(ks[:, 1])
            v = jax.vmap(jax.random.uniform)(ks[:, 2])
            ok = (v * fmax <= fitness(rules, pay(cand[:, None]))[:, 0]) | (fmax <= 0)
            return (
                jnp.where(done, kk, ks[:, 0]),
                jnp.where(done, parent, cand),
                done | ok,
            )

        start = (key, jnp.zeros(reps, jnp.int32), jnp.zeros(reps, bool))
        _, parent, _ = jax.lax.while_loop(cond, body, start)
        prow = table[parent]
        kp = deg[parent]
        col = jnp.minimum((u[:, 1] * kp).astype(jnp.int32), jnp.maximum(kp - 1, 0))
        child = jnp.take_along_axis(prow, col[:, None], axis=1)[:, 0]
        site = jnp.where(kp > 0, child, parent)
        new = of(parent)
    else:
        raise ValueError(f"update rule {rules.update!r} has no asynchronous form")
    old = of(site)
    srow = table[site]
    at = base[:, None] + srow  # padding entries hit the replicate's dummy (masked below)
    nbr_s = s[at]
    m = (srow < n).astype(jnp.float32)
    new_c, old_c = new[:, None], old[:, None]
    # Neighbours' payoffs change by pay(s_y, new) - pay(s_y, old); the site's by the reverse.
    raw = raw.at[at.ravel()].add((m * (rules.pay(nbr_s, new_c) - rules.pay(nbr_s, old_c))).ravel())
    d_site = jnp.sum(m * (rules.pay(new_c, nbr_s) - rules.pay(old_c, nbr_s)), axis=1)
    if rules.self_interaction:
        d_site = d_site + rules.pay(new, new) - rules.pay(old, old)
    raw = raw.at[base + site].add(d_site)
    s = s.at[base + site].set(new)
    return (s, raw), None


def async_generation(
    rules: Rules, nb: Neighbours, keys: jax.Array, s: jax.Array
) -> tuple[jax.Array, jax.Array]:
    """N random sequential single-agent updates in each replicate (``keys`` (R,), ``s``
    (R, N)); replicate r draws from ``keys[r]`` alone, so batching does not change it.
    Returns the strategies and the payoffs they earn, (R, N) each."""
    reps, n = s.shape
    ku, kw = jnp.moveaxis(jax.vmap(jax.random.split)(keys), 1, 0)
    u = jnp.moveaxis(jax.vmap(lambda k: jax.random.uniform(k, (n, 3)))(ku), 1, 0)  # (N, R, 3)
    # Only birth-death (rejection sampling of the parent) needs a key per update.
    if rules.update == "birth-death":
        per = jnp.moveaxis(jax.vmap(lambda k: jax.random.split(k, n))(kw), 1, 0)
    else:
        per = jnp.zeros((n, reps))
    pad = jnp.zeros((reps, 1), s.dtype)
    sp = jnp.concatenate([s, pad], axis=1).ravel()
    raw = jax.vmap(partial(raw_payoffs, rules, nb))(s)
    raw = jnp.concatenate([raw, pad.astype(jnp.float32)], axis=1).ravel()
    (sp, raw), _ = jax.lax.scan(partial(_async_update, rules, nb), (sp, raw), (u, per))
    raw = raw.reshape(reps, n + 1)[:, :n]
    pay = raw / jnp.maximum(_games(rules, nb), 1.0) if rules.average else raw
    return sp.reshape(reps, n + 1)[:, :n], pay
