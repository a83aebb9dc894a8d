"""A posted-price market with Sybil sellers, after Agent Bazaar (Karten, Crow and Jin 2026).

Agent Bazaar studies two failure modes of LLM-run markets: "The Crash" (B2C firms undercut
each other into a price spiral below unit cost) and "The Lemon Market" (C2C: one deceptive
agent runs several seller identities with fraudulent listings, eroding trust and consumer
welfare). This scenario puts both in one posted-price market, a Study on the contract (one
replicate is one market; the world's rules are in :mod:`scenarios.market.dynamics`):

- Honest firms (the agents: rules, learned, LLM or a mix) post a price each period, clipped
  to [0, ``max_price``] (an LLM firm without a valid reply keeps its last price); each has a
  unit cost, a capacity per period and a true quality that it also claims. Rule firms price
  by the strategy each firm draws from ``strategies``; a learned firm's action a in (0, 1)
  posts a x ``max_price`` and learns from its profit over ``capacity x unit_cost``; an LLM
  firm is shown its own last ``llm_memory`` periods and every other listing's price, rating
  and text (its rival LLM firms' last listings).
- ``sybil`` rule operators each control ``sybil_identities`` listings that claim the honest
  quality but deliver ``sybil_quality``; they price at ``sybil_discount`` x the lowest
  honest price of the last period, so they never see this period's honest prices. With
  ``ratings`` each listing's rating moves from its claim towards the quality buyers
  received; an identity rated below ``reentry_rating`` re-enters fresh.
- Consumers are vectorised rules arriving at ``arrivals`` moments of a period.

Period 0 is a warm-up (in ``init``): the market clears once at ``initial_price`` (not
recorded, ratings untouched), so every firm decides period 1 knowing a last period. Rows
each period: ``price_index`` (mean honest price), ``consumer_welfare`` (realised surplus per
consumer), ``fraud_rate`` (share of purchases from Sybil listings), ``units_sold`` (per
consumer), ``crash`` (the index fell by more than ``crash_drop``, or below cost),
``sybil_rating``, ``sybil_reentries``, and ``price`` and ``profit`` per firm by ``kind``.
Headline (``summary``, over periods 1..T): ``price_volatility`` (std of the index's log
returns), ``consumer_welfare``, ``fraud_rate``, ``crash_rate``, and with ``agents=mixed``
``price.<kind>`` and ``profit.<kind>`` (mean per firm per period).
"""

from __future__ import annotations

from pathlib import Path

import jax
import jax.numpy as jnp
import pandas as pd

from scenarios.market import prompts
from scenarios.market.config import RULES, MarketConfig
from scenarios.market.dynamics import (
    crashes,
    firm_price,
    perceived_quality,
    period,
    price_volatility,
    total,
)
from sim_core.experiment import plot_metrics, save_figure, subplots
from society.fields import KINDS
from society.mix import parse_weights
from society.study import Continuous, Study

HEADLINE = ("price_volatility", "consumer_welfare", "fraud_rate")
SUMS = ("welfare", "bought", "fraud", "crash", "price", "profit")  # tallies summed over periods


def by_kind(x, w):
    """The mean of ``x`` (per firm) over the firms of each kind (NaN: none of that kind)."""
    of = (w["kind"][:, None] == jnp.arange(len(KINDS))).astype(jnp.float32)
    return total(x[:, None] * of) / total(of)


def strategy(w, p):
    """Each rule firm's strategy (an index in ``RULES``): the ``strategies`` mix counted by
    largest remainder over the rule firms (as ``parse_mix``), in the random order ``w["u"]``."""
    mix = parse_weights(p.strategies, RULES, "strategies")
    rule = w["kind"] == 0
    exact = jnp.array(list(mix.values())) / sum(mix.values()) * rule.sum()
    counts = jnp.floor(exact)
    order = jnp.argsort(-(exact - counts), stable=True)  # the rest to the largest remainders
    counts = counts + (jnp.argsort(order) < rule.sum() - counts.sum())
    rank = jnp.argsort(jnp.argsort(jnp.where(rule, w["u"], 2.0)))
    at = jnp.searchsorted(jnp.cumsum(counts), rank, side="right")
    return jnp.array([RULES.index(s) for s in mix] + [0])[at]


def render(o, p):
    """One LLM firm's prompt: its own last periods, the other listings of the last period."""
    f, t, m = o["firm"], o["period"], p.llm_memory
    hist = [(s, *o["hist"][m - t + s]) for s in range(max(0, t - m), t)]

    def text(j):  # an LLM firm's last listing, else the listing its kind starts with
        if said := o["replies"].get(j, {}).get("listing"):
            return " ".join(str(said).split())[: prompts.MAX_LISTING_CHARS]
        return (prompts.SYBIL_LISTING if j >= p.population else prompts.HONEST_LISTING).format(
            q=p.quality
        )

    return prompts.firm_prompt(
        firm=f + 1, period=t, periods=p.steps, unit_cost=p.unit_cost, capacity=p.capacity,
        history=[(s, pr, int(sold), pi) for s, pr, sold, pi in hist], index=o["index"],
        rivals=[(o["prices"][j], o["ratings"][j], text(j)) for j in range(len(o["prices"])) if j != f],
    )  # fmt: skip


class Market(Study):
    """Agent Bazaar's market: price volatility and crashes of firms, Sybil fraud on consumers."""

    Params = MarketConfig
    name = "market"
    unit = "period"
    labels = {"kind": str, "agent": int, "cohort": str}
    actions = Continuous(0.0, lambda p: p.max_price, rule=firm_price)
    features = ("price_ratio", "sold_frac", "index_ratio")
    reply = prompts.FirmAction
    render = render
    system = staticmethod(lambda p: prompts.system_prompt(
        firms=p.population, consumers=p.consumers, periods=p.steps, capacity=p.capacity,
        unit_cost=p.unit_cost, quality=p.quality, value_min=p.value_min, value_max=p.value_max,
        max_price=p.max_price, ratings=p.ratings,
    ))  # fmt: skip
    reporters = {
        "price_index": lambda w, out: w["index"][w["t"]],
        "consumer_welfare": lambda w, out: out["welfare"],
        "fraud_rate": lambda w, out: jnp.where(out["bought"] > 0, out["fraud"] / out["bought"], 0.0),
        "units_sold": lambda w, out: out["bought"] / w["values"].size,
        "crash": lambda w, out: out["crash"],
        "sybil_rating": lambda w, out: out["shown"],
        "sybil_reentries": lambda w, out: out["reentries"],
        "price": lambda w, out: by_kind(out["price"], w),
        "profit": lambda w, out: by_kind(out["profit"], w),
    }  # fmt: skip
    axes = {"price": ("kind",), "profit": ("kind",)}
    axis_labels = {"kind": KINDS}
    headline = HEADLINE

    def init(key, p):
        f, n = p.population, p.listings()
        k_values, k_rules, k_warm = jax.random.split(key, 3)
        w = {"values": jax.random.uniform(k_values, (p.consumers,), minval=p.value_min, maxval=p.value_max),
             "u": jax.random.uniform(k_rules, (f,)), "kind": jnp.zeros(f, jnp.int32),
             "price": jnp.full(n, p.initial_price, jnp.float32), "rating_sum": jnp.zeros(n), "rating_n": jnp.zeros(n),
             "index": jnp.zeros(p.steps + 1).at[0].set(p.initial_price), "t": jnp.int32(0),
             "sums": {k: jnp.zeros(f if k in ("price", "profit") else ()) for k in SUMS}}  # fmt: skip
        market, tally = period(k_warm, w, jnp.full(f, p.initial_price, jnp.float32), p, rate=False)
        history = jnp.stack([tally["price"], tally["sales"], tally["profit"]], -1)
        return {**w, **market, "hist": jnp.repeat(history[:, None], p.llm_memory, 1)}

    def observe(w, p):
        f, n = p.population, p.listings()
        mine, index = w["price"][:f], total(w["price"][:f]) / f
        others = jnp.where(jnp.eye(f, n, dtype=bool), jnp.inf, w["price"][None])
        rating = perceived_quality(
            p.quality, w["rating_sum"], w["rating_n"], p.rating_prior, p.ratings
        )
        full = lambda x: jnp.broadcast_to(x, (f, *jnp.shape(x)))  # noqa: E731
        return {"cost": full(jnp.float32(p.unit_cost)), "my_price": mine, "sold_frac": w["sales"][:f] / p.capacity,
                "min_rival": others.min(1) if n > 1 else mine, "index": full(index), "price_ratio": mine / p.unit_cost,
                "index_ratio": full(index / p.unit_cost), "strategy": strategy(w, p), "firm": jnp.arange(f),
                "period": full(w["t"] + 1), "hist": w["hist"], "prices": full(w["price"]), "ratings": full(rating)}  # fmt: skip

    def step(key, w, act, p):
        f, t = p.population, w["t"] + 1
        honest = jnp.where(jnp.isnan(act), w["price"][:f], jnp.clip(act, 0.0, p.max_price))
        market, out = period(key, w, honest, p, rate=True)
        index, prev = total(out["price"]) / f, w["index"][w["t"]]
        out["crash"] = crashes(index[None], prev, p.crash_drop, p.unit_cost)[0] * 1.0
        now = jnp.stack([out["price"], out["sales"], out["profit"]], -1)[:, None]
        sums = {k: w["sums"][k] + out[k] for k in SUMS}
        return {**w, **market, "t": t, "index": w["index"].at[t].set(index), "sums": sums,
                "hist": jnp.concatenate([w["hist"], now], 1)[:, 1:]}, out  # fmt: skip

    def reward(w, out, p):
        return out["profit"] / (p.capacity * p.unit_cost)

    def summary(w, p):
        n, s = w["t"], w["sums"]
        out = {"price_volatility": price_volatility(w["index"][1:], n), "consumer_welfare": s["welfare"] / n,
               "fraud_rate": jnp.where(s["bought"] > 0, s["fraud"] / s["bought"], 0.0), "crash_rate": s["crash"] / n}  # fmt: skip
        for name in ("price", "profit") if p.agents == "mixed" else ():
            out |= dict(zip([f"{name}.{k}" for k in KINDS], by_kind(s[name] / n, w), strict=True))
        return out

    def plot(self, frame: pd.DataFrame, plots_dir: Path, config: MarketConfig) -> list[Path]:
        """Prices by firm kind against unit cost, then one PNG per other per-period metric."""
        if frame.empty:
            return []
        written = []
        prices = frame[frame["metric"] == "price"]
        if prices["time"].nunique() > 1:
            fig, ax = subplots(plots_dir, figsize=(6, 3.5), dpi=100)
            for kind, sub in prices.groupby("kind"):
                mean = sub.groupby("time")["value"].mean()
                ax.plot(mean.index, mean.values, lw=2, label=f"{kind} firms")
            ax.axhline(config.unit_cost, color="k", ls="--", lw=1, label="unit cost")
            ax.set_xlabel("period")
            ax.set_ylabel("mean posted price")
            ax.legend(loc="best", fontsize=8)
            written.append(save_figure(fig, plots_dir / "prices.png"))
        skip = ("price", "profit")
        metrics = [
            m
            for m in sorted(frame["metric"].unique())
            if m not in skip and not m.startswith("llm_")
        ]
        return written + plot_metrics(frame, plots_dir, metrics)
