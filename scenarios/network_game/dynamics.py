"""Pure JAX kernels of evolutionary games on graphs (no Python loop over agents or edges).

Strategies are 1 (cooperate) or 0 (defect). A synchronous generation updates every agent
at once from the payoffs of the previous generation. An asynchronous generation is N
single-agent updates (random sequential updating) run in ``lax.scan``; it keeps each
agent's accumulated payoff up to date incrementally (O(max degree) per update), so it
needs the padded neighbour table of :class:`sim_core.graph.Neighbours`.

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
        return a * b * self.R + a * (1 - b) * self.S + (1 - a) * b * self.T + (1 - a) * (1 - b) * self.P

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


def sync_step(rules: Rules, nb: Neighbours, key: jax.Array, s: jax.Array) -> jax.Array:
    """One synchronous generation: every agent updates from the same payoffs."""
    k1, k2, k3 = jax.random.split(key, 3)
    pay = payoffs(rules, nb, s)
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
            denom = rules.spread * (1.0 if rules.average else jnp.maximum(jnp.maximum(deg, deg[j]), 1.0))
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
    """One single-agent update; ``carry`` = (s, raw) padded with a dummy agent at index n."""
    s, raw = carry
    u, key = xs
    n, table, deg = nb.n, nb.table, nb.degree
    games = jnp.maximum(_games(rules, nb), 1.0)

    def pay(idx):
        r = raw[idx]
        return r / games[jnp.minimum(idx, n - 1)] if rules.average else r

    def pick(weights, valid, uu):
        """Index into ``weights`` drawn proportional to it (uniform if all zero)."""
        w = jnp.where(valid, weights, 0.0)
        w = jnp.where(w.sum() > 0, w, valid.astype(w.dtype))
        c = jnp.cumsum(w)
        return jnp.minimum(jnp.searchsorted(c, uu * c[-1], side="right"), w.shape[0] - 1)

    i = jnp.minimum((u[0] * n).astype(jnp.int32), n - 1)
    row = table[i]
    valid = row < n
    k_i = deg[i]
    rand_nb = row[jnp.minimum((u[1] * k_i).astype(jnp.int32), jnp.maximum(k_i - 1, 0))]
    rand_nb = jnp.where(k_i > 0, rand_nb, i)
    site, new = i, s[i]
    if rules.update == "death-birth":
        j = row[pick(fitness(rules, pay(row)), valid, u[1])]
        new = jnp.where(k_i > 0, s[j], s[i])
    elif rules.update == "imitation":
        cand = jnp.concatenate([i[None], row])
        j = cand[pick(fitness(rules, pay(cand)), jnp.concatenate([jnp.array([True]), valid]), u[1])]
        new = s[j]
    elif rules.update == "fermi":
        prob = jax.nn.sigmoid(rules.beta * (pay(rand_nb) - pay(i)))
        new = jnp.where(u[2] < prob, s[rand_nb], s[i])
    elif rules.update == "birth-death":
        # Parent drawn proportional to fitness by rejection against the largest possible fitness.
        fmax = jnp.max(fitness(rules, pay(jnp.arange(n))))

        def cond(state):
            return ~state[2]

        def body(state):
            kk, _, _ = state
            kk, ka, kb = jax.random.split(kk, 3)
            cand = jax.random.randint(ka, (), 0, n)
            ok = jax.random.uniform(kb) * fmax <= fitness(rules, pay(cand))
            return kk, cand, ok | (fmax <= 0)

        _, parent, _ = jax.lax.while_loop(cond, body, (key, jnp.int32(0), jnp.bool_(False)))
        prow = table[parent]
        kp = deg[parent]
        child = prow[jnp.minimum((u[1] * kp).astype(jnp.int32), jnp.maximum(kp - 1, 0))]
        site = jnp.where(kp > 0, child, parent)
        new = s[parent]
    else:
        raise ValueError(f"update rule {rules.update!r} has no asynchronous form")
    old = s[site]
    srow = table[site]
    nbr_s = s[srow]  # padding entries read the dummy agent (masked below)
    m = (srow < n).astype(jnp.float32)
    # Neighbours' payoffs change by pay(s_y, new) - pay(s_y, old); the site's by the reverse.
    raw = raw.at[srow].add(m * (rules.pay(nbr_s, new) - rules.pay(nbr_s, old)))
    d_site = jnp.sum(m * (rules.pay(new, nbr_s) - rules.pay(old, nbr_s)))
    if rules.self_interaction:
        d_site = d_site + rules.pay(new, new) - rules.pay(old, old)
    raw = raw.at[site].add(d_site)
    s = s.at[site].set(new)
    return (s, raw), None


def async_generation(rules: Rules, nb: Neighbours, key: jax.Array, s: jax.Array) -> jax.Array:
    """N random sequential single-agent updates."""
    n = nb.n
    ku, kw = jax.random.split(key)
    u = jax.random.uniform(ku, (n, 3))
    # Only birth-death (rejection sampling of the parent) needs a key per update.
    keys = jax.random.split(kw, n) if rules.update == "birth-death" else jnp.zeros(n)
    sp = jnp.concatenate([s, jnp.zeros((1,), s.dtype)])
    raw = jnp.concatenate([raw_payoffs(rules, nb, s), jnp.zeros((1,), jnp.float32)])
    (sp, _), _ = jax.lax.scan(partial(_async_update, rules, nb), (sp, raw), (u, keys))
    return sp[:n]


@partial(jax.jit, static_argnames=("rules", "length"))
def advance(rules: Rules, nb: Neighbours, keys: jax.Array, s: jax.Array, start: jax.Array, stop: jax.Array, length: int):
    """Run generations ``start+1 .. start+length`` for a batch of replicates (vmapped over
    the leading axis of ``keys`` and ``s``); generations past ``stop`` leave ``s`` as it is,
    so every chunk has one shape and compiles once. Generation g draws from
    ``fold_in(key, g)``, so results do not depend on how the run is chunked.
    Returns the new strategies and the cooperator fraction after each generation,
    shape (replicates, length).
    """
    gen = sync_step if rules.synchronous else async_generation
    gens = start + 1 + jnp.arange(length)

    def one(key, s):
        def body(s, g):
            s = jnp.where(g <= stop, gen(rules, nb, jax.random.fold_in(key, g), s), s)
            return s, s.mean(dtype=jnp.float32)

        return jax.lax.scan(body, s, gens)

    return jax.vmap(one)(keys, s)


def initial_strategies(key: jax.Array, n: int, cooperators: int) -> jax.Array:
    """Exactly ``cooperators`` cooperators placed uniformly at random."""
    return (jax.random.permutation(key, n) < cooperators).astype(jnp.int8)
