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
is O(listings). :func:`period` is one period of one market (the model's ``step`` and its
warm-up); the framework vmaps it over markets (replicates).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

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


def total(x) -> jax.Array:
    """Sum over the leading axis in a fixed order (a scan): the same bits whether or not the
    replicates are vmapped, which XLA's reductions are not."""
    x = jnp.asarray(x)
    return jax.lax.scan(lambda a, v: (a + v, None), jnp.zeros(x.shape[1:], x.dtype), x)[0]


def perceived_quality(claim, rating_sum, rating_n, prior: float, ratings: bool) -> jax.Array:
    """A listing's rating: ``(prior x claim + sum of delivered qualities) / (prior + units
    rated)``; without a rating system consumers believe the claim."""
    if not ratings:
        return jnp.broadcast_to(jnp.asarray(claim, jnp.float32), jnp.shape(rating_sum))
    return (prior * claim + rating_sum) / (prior + rating_n)


def reenter(fraud, perceived, threshold: float | None) -> jax.Array:
    """Sybil identities abandoned this period (rating below ``threshold``): they come back as
    fresh identities whose ratings restart from the claim."""
    if threshold is None:
        return jnp.zeros(jnp.shape(fraud), bool)
    return jnp.asarray(fraud) & (jnp.asarray(perceived) < threshold)


def price_volatility(index, periods=None) -> jax.Array:
    """Std over periods of the log returns of the price index, ``std_t log(I_t / I_{t-1})``,
    over the first ``periods`` (default all) of ``index`` (periods, ...), positive."""
    r = jnp.diff(jnp.log(jnp.maximum(jnp.asarray(index), 1e-12)), axis=0)
    n = jnp.shape(index)[0] if periods is None else periods
    ok = (jnp.arange(r.shape[0]) < n - 1).reshape(-1, *[1] * (r.ndim - 1))
    mean = total(jnp.where(ok, r, 0.0)) / (n - 1)
    return jnp.sqrt(total(jnp.where(ok, (r - mean) ** 2, 0.0)) / (n - 1))


def crashes(index, start, drop: float, cost: float) -> jax.Array:
    """Crash periods (periods, ...): the index fell by more than ``drop`` since the period
    before, or lies below unit cost. ``start`` is the index of the warm-up period 0, so a
    fall from the initial price into period 1 counts too."""
    index = jnp.asarray(index)
    prev = jnp.concatenate([jnp.asarray(start, index.dtype)[None], index[:-1]], axis=0)
    return (index < (1.0 - drop) * prev) | (index < cost)


def firm_price(o, p) -> jax.Array:
    """A rule firm's price from its observation, by its ``strategy``: cost-plus (a fixed
    markup over cost), undercut (just below the cheapest rival, down to cost: Bertrand) or
    adaptive (up after selling out, down after unsold stock, not below cost)."""
    cost, mine = o["cost"], o["my_price"]
    adapt = jnp.where(
        o["sold_frac"] >= 1.0, mine * (1.0 + p.adapt_step), mine * (1.0 - p.adapt_step)
    )
    return jnp.select(
        [o["strategy"] == 0, o["strategy"] == 1],
        [cost * (1.0 + p.markup), jnp.maximum(o["min_rival"] - p.undercut_step * cost, cost)],
        jnp.maximum(adapt, cost),
    )


def period(key, w, honest, p, rate: bool):
    """One period of one market: the Sybils post ``sybil_discount`` x the lowest honest price of
    the last period (not below their cost), consumers arrive at ``arrivals`` moments (each
    consumer at one drawn uniformly) and shop from the stock left, seeing the ratings as they
    are then (each moment's ratings count at once when ``rate``), then identities rated below
    ``reentry_rating`` re-enter fresh. Returns the world's market part and the period's tallies."""
    f, n, c = p.population, p.listings(), p.consumers
    fraud = jnp.arange(n) >= f
    true_q, cost = jnp.where(fraud, p.sybil_quality, p.quality), jnp.where(fraud, p.sybil_cost, p.unit_cost)  # fmt: skip
    sybil = jnp.maximum(p.sybil_discount * w["price"][:f].min(), p.sybil_cost)
    price = jnp.concatenate([honest, jnp.full(n - f, sybil)]).astype(jnp.float32)
    rated = lambda rs, rn: perceived_quality(p.quality, rs, rn, p.rating_prior, p.ratings)  # noqa: E731
    k_slot, k_shop = jax.random.split(key)
    slot = jax.random.randint(k_slot, (c,), 0, p.arrivals) if p.arrivals > 1 else 0

    def moment(carry, j):
        stock, rs, rn, sales, surplus = carry
        order, mask = draw_period(jax.random.fold_in(k_shop, j), c, n, p.visible)
        v = jnp.where(slot == j, w["values"], 0.0)
        out = clear_market(v, order, mask, price, rated(rs, rn), true_q, stock)
        s = out["sales"].astype(jnp.float32)
        rs, rn = (rs + s * true_q, rn + s) if rate else (rs, rn)
        return (stock - out["sales"], rs, rn, sales + s, surplus + out["surplus"]), None

    carry = (jnp.full(n, p.capacity, jnp.int32), w["rating_sum"], w["rating_n"], jnp.zeros(n), jnp.zeros(c))  # fmt: skip
    if p.arrivals == 1:
        carry = moment(carry, 0)[0]
    else:
        carry = jax.lax.scan(moment, carry, jnp.arange(p.arrivals))[0]
    _, rs, rn, sales, surplus = carry
    gone = reenter(fraud, rated(rs, rn), p.reentry_rating)
    profit = price * sales - cost * sales
    tally = {"shown": total(jnp.where(fraud, rated(w["rating_sum"], w["rating_n"]), 0.0)) / (n - f),
             "reentries": gone.sum(), "welfare": total(surplus) / c, "bought": sales.sum(),
             "fraud": sales[f:].sum(), "price": price[:f], "profit": profit[:f], "sales": sales[:f]}  # fmt: skip
    market = {"price": price, "sales": sales, "rating_sum": jnp.where(gone, 0.0, rs), "rating_n": jnp.where(gone, 0.0, rn)}  # fmt: skip
    return market, tally
