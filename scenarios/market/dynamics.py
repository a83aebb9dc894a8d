"""The market's rules as pure functions: clearing, ratings, Sybil re-entry, rule firms.

Clearing rule (one period of one market). Listings ``j`` post a price ``p_j`` and show a
perceived quality ``q^_j`` (the rating, or the claim without ratings); each has ``stock_j``
units. Consumers arrive one at a time in a uniformly random order. Consumer ``i`` (value
``v_i`` per unit of quality) looks at the listings it sees that still have stock and buys
one unit from the one with the highest perceived surplus ``v_i q^_j - p_j`` if that is
> 0 (ties: the lower listing index, honest firms first); else it buys nothing. It pays
``p_j`` and receives the TRUE quality ``q_j``: its realised surplus is ``v_i q_j - p_j``
(negative after a fraudulent purchase). Demand beyond a listing's stock thus flows to the
next-best listing of the consumers who come later.

The consumer sequence is a ``lax.scan`` (compiled; no Python loop over consumers): each step
is O(listings). Replicates are a leading axis, vmapped.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import partial
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

NO_PURCHASE = -1


def clear_market(
    values: jax.Array,
    order: jax.Array,
    visible: jax.Array,
    price: jax.Array,
    perceived: jax.Array,
    true_q: jax.Array,
    stock: jax.Array,
) -> dict[str, jax.Array]:
    """One period of one market (see the module docstring).

    ``values`` (C,), ``order`` (C,) a permutation of consumers, ``visible`` (C, L) bool,
    ``price``/``perceived``/``true_q`` (L,) float, ``stock`` (L,) int. Returns ``choice``
    (C,) listing bought by each consumer (-1: none), ``sales`` (L,), ``revenue`` (L,),
    ``surplus`` (C,) realised on true quality.
    """
    n_list = price.shape[0]

    def step(left, i):
        util = values[i] * perceived - price
        ok = visible[i] & (left > 0) & (util > 0)
        j = jnp.argmax(jnp.where(ok, util, -jnp.inf))
        buy = ok.any()
        left = left.at[j].add(-buy.astype(left.dtype))
        return left, jnp.where(buy, j, NO_PURCHASE)

    _, chosen = jax.lax.scan(step, stock, order)
    choice = (
        jnp.full(values.shape[0], NO_PURCHASE, jnp.int32).at[order].set(chosen.astype(jnp.int32))
    )
    bought = choice >= 0
    j = jnp.maximum(choice, 0)
    sales = jnp.zeros(n_list, jnp.int32).at[j].add(bought.astype(jnp.int32))
    surplus = jnp.where(bought, values * true_q[j] - price[j], 0.0)
    return {"choice": choice, "sales": sales, "revenue": sales * price, "surplus": surplus}


def stable_order(bits: jax.Array) -> jax.Array:
    """Indices that sort ``bits`` (uint32, 1-D) stably: ``argsort(bits, stable=True)``.

    XLA's CPU sort is ~8x slower with an index payload (a key-value sort) than on one array,
    so the index is packed into the low bits of the key and one array is sorted; keys equal
    in their high bits (rare) are then put in exact (bits, index) order by odd-even
    transposition passes, repeated only while some adjacent pair is out of order."""
    n = bits.shape[0]
    low = max((n - 1).bit_length(), 1)  # bits holding an index
    idx = jnp.arange(n, dtype=jnp.uint32)
    packed = jnp.sort(((bits >> low) << low) | idx)
    order = (packed & jnp.uint32((1 << low) - 1)).astype(jnp.int32)
    pos = jnp.arange(n)

    def after(b1, i1, b2, i2):  # (b1, i1) sorts after (b2, i2)
        return (b1 > b2) | ((b1 == b2) & (i1 > i2))

    def out_of_order(o):
        b = bits[o]
        return after(b[:-1], o[:-1], b[1:], o[1:]).any()

    def phase(o, parity):
        b = bits[o]
        nb, no = jnp.roll(b, -1), jnp.roll(o, -1)
        swap = (pos % 2 == parity) & (pos + 1 < n) & after(b, o, nb, no)  # pair (k, k + 1)
        return jnp.where(swap, no, jnp.where(jnp.roll(swap, 1), jnp.roll(o, 1), o))

    return jax.lax.while_loop(out_of_order, lambda o: phase(phase(o, 0), 1), order)


def arrival_order(key: jax.Array, n: int) -> jax.Array:
    """``jax.random.permutation(key, n)``, the same permutation, faster on CPU: jax draws
    32-bit keys from the second half of ``split(key)`` and sorts by them stably (one round
    of sorting for n <= 1625; larger n take jax's own function)."""
    if n > 1625:  # jax's shuffle sorts ceil(3 ln n / ln(2^32 - 1)) rounds: 2 from here
        return jax.random.permutation(key, n)
    _, sub = jax.random.split(key)
    return stable_order(jax.random.bits(sub, (n,), jnp.uint32))


def draw_period(key: jax.Array, n_consumers: int, n_listings: int, visible: int | None):
    """Arrival order and, with ``visible``, each consumer's random subset of listings."""
    k_order, k_vis = jax.random.split(key)
    order = arrival_order(k_order, n_consumers)
    if visible is None or visible >= n_listings:
        mask = jnp.ones((n_consumers, n_listings), bool)
    else:
        u = jax.random.uniform(k_vis, (n_consumers, n_listings))
        mask = jnp.argsort(jnp.argsort(u, axis=1), axis=1) < visible
    return order, mask


@partial(jax.jit, static_argnames=("visible",))
def market_period(keys, values, price, perceived, true_q, stock, *, visible: int | None):
    """``clear_market`` for every replicate (leading axis), with the period's random draws."""

    def one(key, v, p, q_hat, q, s):
        order, mask = draw_period(key, v.shape[0], p.shape[0], visible)
        return clear_market(v, order, mask, p, q_hat, q, s)

    return jax.vmap(one)(keys, values, price, perceived, true_q, stock)


def perceived_quality(
    claim: np.ndarray, rating_sum: np.ndarray, rating_n: np.ndarray, prior: float, ratings: bool
) -> np.ndarray:
    """A listing's rating: ``(prior x claim + sum of delivered qualities) / (prior + units
    rated)``; without a rating system consumers believe the claim."""
    if not ratings:
        return np.broadcast_to(np.asarray(claim, np.float64), np.shape(rating_sum)).copy()
    return (prior * claim + rating_sum) / (prior + rating_n)


def reenter(fraud: np.ndarray, perceived: np.ndarray, threshold: float | None) -> np.ndarray:
    """Sybil identities abandoned this period (rating below ``threshold``): they come back as
    fresh identities whose ratings restart from the claim."""
    if threshold is None:
        return np.zeros_like(fraud, dtype=bool)
    return fraud & (perceived < threshold)


def sybil_prices(
    honest_prices: np.ndarray, n_sybil_listings: int, discount: float, floor: float
) -> np.ndarray:
    """Rule Sybil operators: ``discount`` x the lowest honest price of the last period, never
    below their own cost; ``honest_prices`` is (replicates, firms)."""
    p = np.maximum(discount * honest_prices.min(axis=1), floor)
    return np.repeat(p[:, None], n_sybil_listings, axis=1)


def price_volatility(index: np.ndarray) -> np.ndarray:
    """Std over periods of the log returns of the price index: ``std_t log(I_t / I_{t-1})``
    per replicate (``index`` is (periods, replicates), positive)."""
    r = np.diff(np.log(np.maximum(index, 1e-12)), axis=0)
    return r.std(axis=0)


def crashes(index: np.ndarray, start: np.ndarray, drop: float, cost: float) -> np.ndarray:
    """Crash periods (periods, replicates): the index fell by more than ``drop`` since the
    period before, or lies below unit cost. ``start`` (replicates,) is the index of the
    warm-up period 0, so a fall from the initial price into period 1 counts too."""
    prev = np.concatenate([np.asarray(start, np.float64)[None], index[:-1]], axis=0)
    return (index < (1.0 - drop) * prev) | (index < cost)


# -- rule firms (strategies of a RuleCohort; prices as float32) ---------------------------------
def cost_plus(obs: Mapping[str, jax.Array], keys: jax.Array, params: Mapping[str, Any]):
    """Fixed markup over cost, whatever the market does."""
    return (jnp.asarray(obs["cost"]) * (1.0 + params["markup"])).astype(jnp.float32)


def undercut(obs: Mapping[str, jax.Array], keys: jax.Array, params: Mapping[str, Any]):
    """Just below the cheapest rival, down to cost (Bertrand price competition)."""
    cost = jnp.asarray(obs["cost"])
    target = jnp.asarray(obs["min_rival"]) - params["step"] * cost
    return jnp.maximum(target, cost).astype(jnp.float32)


def adaptive(obs: Mapping[str, jax.Array], keys: jax.Array, params: Mapping[str, Any]):
    """Raise the price after selling out, lower it after unsold stock (not below cost)."""
    cost = jnp.asarray(obs["cost"])
    mine = jnp.asarray(obs["my_price"])
    sold = jnp.asarray(obs["sold_frac"])
    step = params["step"]
    new = jnp.where(sold >= 1.0, mine * (1.0 + step), mine * (1.0 - step))
    return jnp.maximum(new, cost).astype(jnp.float32)


RULE_STRATEGIES = {"cost-plus": cost_plus, "undercut": undercut, "adaptive": adaptive}
LEARNED_FEATURES = ("price_ratio", "sold_frac", "index_ratio")
