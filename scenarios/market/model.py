"""A posted-price market with Sybil sellers, after Agent Bazaar (Karten, Crow and Jin 2026).

Agent Bazaar studies two failure modes of LLM-run markets: "The Crash" (B2C firms undercut
each other into a price spiral below unit cost) and "The Lemon Market" (C2C: one deceptive
agent runs several seller identities with fraudulent listings, eroding trust and consumer
welfare). This scenario puts both in one posted-price market:

- Honest firms (the decision makers: rules, learned, LLM or a mix) post a price each period
  (clipped to [0, ``max_price``]); each has a unit cost, a capacity per period and a true
  quality that it also claims.
- ``sybil`` rule operators each control ``sybil_identities`` listings that claim the honest
  quality but deliver ``sybil_quality``; they price at ``sybil_discount`` x the lowest
  honest price of the last period (``initial_price`` in period 1), so they never see this
  period's honest prices before posting. With ``ratings`` each listing's rating moves from
  its claim towards the quality buyers received; an identity rated below ``reentry_rating`` is
  abandoned and re-enters as a fresh identity (rating reset to the claim).
- Consumers are vectorised rules; the clearing rule is in :mod:`scenarios.market.dynamics`.

Period 0 is a warm-up: the market clears once at ``initial_price`` (not recorded, ratings
untouched), so every firm decides period 1 knowing a last period's sales and rivals.
Metrics (per replicate, over periods 1..T):

- ``price_volatility``: std over periods of ``log(I_t / I_{t-1})``, I_t = mean honest price;
- ``consumer_welfare``: mean realised surplus (on true quality) per consumer per period;
- ``fraud_rate``: share of all purchases made from Sybil listings (0 if nothing sold);
- ``crash_rate``: share of periods that are crashes (I fell by > ``crash_drop`` since the
  period before, period 1 against the warm-up's ``initial_price``; or I < cost);
- with ``agents=mixed``: ``price.<kind>`` and ``profit.<kind>`` (mean per firm per period).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import jax
import numpy as np
import pandas as pd

from scenarios.market import prompts
from scenarios.market.config import MarketConfig
from scenarios.market.dynamics import (
    LEARNED_FEATURES,
    RULE_STRATEGIES,
    crashes,
    market_period,
    perceived_quality,
    price_volatility,
    reenter,
    sybil_prices,
)
from sim_core.experiment import RunContext, Scenario, plot_metrics
from sim_core.scheduler import Scheduler, batched
from society.cohorts import LearnedCohort, RuleCohort, parse_mix
from society.cohorts.learned import reinforce_cohort
from society.cohorts.llm import LLMCohort
from society.driver import budget_reached, drive
from society.fields import KINDS
from society.llm import LLMClient
from society.population import build_population, kinds_of, uses_llm

HEADLINE = ("price_volatility", "consumer_welfare", "fraud_rate")
HONEST_LISTING = "Standard product, quality {q:g}, ships today."
SYBIL_LISTING = "Premium product, quality {q:g}, top rated, best price!"


class FirmLLMCohort(LLMCohort):
    """LLM firms: the prompt is rendered from the market state by ``render(agent)``; a reply
    gives a price (clipped to [0, max_price]) and a listing; no valid reply keeps last price."""

    def __init__(
        self,
        name: str,
        agents: np.ndarray,
        client: LLMClient,
        *,
        render: Callable[[int], str],
        sample_of: Callable[[int], int],
        system_prompt: str,
        max_price: float,
    ):
        fallback = prompts.FirmAction.model_construct(
            reason="no valid reply", price=-1.0, listing=""
        )
        super().__init__(
            name,
            agents,
            client,
            schema=prompts.FirmAction,
            fallback=fallback,
            template="",
            system_prompt=system_prompt,
            memory_size=0,  # the prompt carries the firm's own history explicitly
            to_action=self._take,
            sample_of=sample_of,
        )
        self.render = render
        self.max_price = max_price
        self.listings: list[str] = []  # listing texts of the last call, in agent order

    def _take(self, choice: Any) -> float:
        self.listings.append(" ".join(str(choice.listing).split())[: prompts.MAX_LISTING_CHARS])
        return float(choice.price)

    def messages(self, agent: int, pos: int, fields: Mapping[str, Any]) -> list[dict[str, str]]:
        return [
            {"role": "system", "content": self.system_prompt},
            {"role": "user", "content": self.render(agent)},
        ]

    async def aact(self, agents: np.ndarray, obs: Any, key: jax.Array) -> np.ndarray:
        self.listings = []
        return await super().aact(agents, obs, key)

    def finish(self, actions: np.ndarray, fields: Mapping[str, np.ndarray]) -> np.ndarray:
        bad = ~np.isfinite(actions) | (actions < 0)  # the fallback's sentinel
        return np.where(bad, fields["my_price"], np.clip(actions, 0.0, self.max_price))


class _Batch:
    """One batch of replicates: the market state, the firms' population and the period loop."""

    def __init__(
        self, cfg: MarketConfig, ctx: RunContext, reps: np.ndarray, client: LLMClient | None
    ):
        self.cfg, self.ctx, self.reps, self.client = cfg, ctx, reps, client
        f, b = cfg.population, len(reps)
        self.f, self.b, self.rows = f, b, b * f
        self.n_list = cfg.listings()
        self.offset = int(reps[0]) * f  # replicate batches are contiguous ranges
        kinds = np.concatenate([kinds_of(cfg, ctx.rng.numpy("split", int(r))) for r in reps])
        ids = np.arange(self.rows) + self.offset
        self.kind_names = tuple(k for k in KINDS if (kinds == k).any())
        self.system = prompts.system_prompt(
            firms=f,
            consumers=cfg.consumers,
            periods=cfg.steps,
            capacity=cfg.capacity,
            unit_cost=cfg.unit_cost,
            quality=cfg.quality,
            value_min=cfg.value_min,
            value_max=cfg.value_max,
            max_price=cfg.max_price,
            ratings=cfg.ratings,
        )
        self.pop = build_population(
            kinds, ids, {"rules": self._rules, "learned": self._learned, "llm": self._llm}
        )
        self.kind = np.asarray(self.kind_names, dtype=object)[self.pop.cohort_of[ids]].reshape(b, f)
        # Listings: honest firms first, then the Sybil identities.
        fraud = np.arange(self.n_list) >= f
        self.fraud = fraud
        self.claim = np.full(self.n_list, cfg.quality)
        self.true_q = np.where(fraud, cfg.sybil_quality, cfg.quality)
        self.cost = np.where(fraud, cfg.sybil_cost, cfg.unit_cost)
        self.values = np.stack(
            [
                ctx.rng.numpy("consumers", int(r)).uniform(
                    cfg.value_min, cfg.value_max, cfg.consumers
                )
                for r in reps
            ]
        )
        self.clear_keys = ctx.rng.keys("clear", reps)
        self.act_key = ctx.rng.key("act")
        self.learn_key = ctx.rng.key("learn")
        self.rating_sum = np.zeros((b, self.n_list))
        self.rating_n = np.zeros((b, self.n_list))
        self.texts = (
            np.where(
                fraud, SYBIL_LISTING.format(q=cfg.quality), HONEST_LISTING.format(q=cfg.quality)
            )
            .astype(object)[None]
            .repeat(b, axis=0)
        )
        self.series: dict[str, list[np.ndarray]] = {
            k: [] for k in ("index", "welfare", "purchases", "fraud", "price", "profit")
        }
        self.history: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []  # (price, sold, profit)
        self.sim = Scheduler()
        if cfg.arrivals > 1:
            self.arrival_rngs = [ctx.rng.numpy("arrivals", int(r)) for r in reps]
            self.arrive = self.sim.handle("market arrivals", batched(self._arrive))
            self.close = self.sim.handle("market close", self._close_period)
        honest = np.full((b, f), cfg.initial_price)
        self.last_honest = honest  # the Sybils' reference: the honest prices of the last period
        self._clear(honest)  # period 0: the market clears once at the initial price
        self.start_index = honest.mean(axis=1)  # period 0's price index, for period 1's crash

    @property
    def t(self) -> int:
        """The period now (0: the warm-up clearing): the scheduler is the clock."""
        return int(np.floor(self.sim.now))

    # -- setup -----------------------------------------------------------------------------
    def _rules(self, ids: np.ndarray) -> RuleCohort:
        cfg, reps = self.cfg, self.reps
        per_rep = np.bincount((ids - self.offset) // self.f, minlength=len(reps)).tolist()
        names = np.concatenate(
            [
                parse_mix(cfg.strategies, n, self.ctx.rng.numpy("strategies", int(r)))
                for n, r in zip(per_rep, reps, strict=True)
            ]
        )
        return RuleCohort(
            "rules",
            ids,
            names,
            strategies=RULE_STRATEGIES,
            params={
                "cost-plus": {"markup": cfg.markup},
                "undercut": {"step": cfg.undercut_step},
                "adaptive": {"step": cfg.adapt_step},
            },
        )

    def _learned(self, ids: np.ndarray) -> LearnedCohort:
        return reinforce_cohort(
            ids,
            LEARNED_FEATURES,
            learning_rate=self.cfg.learning_rate,
            key=self.ctx.rng.key("learned-init"),
        )

    def _llm(self, ids: np.ndarray) -> FirmLLMCohort:
        return FirmLLMCohort(
            "llm",
            ids,
            self.client,
            render=self.render,
            sample_of=lambda agent: agent,  # firms in the same situation draw independently
            system_prompt=self.system,
            max_price=self.cfg.max_price,
        )

    def strategy_of(self) -> np.ndarray:
        """Rule strategy of each firm (b, f); '' for other kinds."""
        out = np.full(self.rows, "", dtype=object)
        if "rules" in self.kind_names:
            c = self.pop.cohort("rules")
            out[c.agents - self.offset] = c.strategy_of(c.agents)
        return out.reshape(self.b, self.f)

    # -- one period ------------------------------------------------------------------------
    def _clear(self, honest: np.ndarray) -> dict[str, np.ndarray]:
        """One clearing with every consumer: post, shop, close (see the three)."""
        self._open(honest)
        keys = jax.vmap(jax.random.fold_in, in_axes=(0, None))(self.clear_keys, self.t)
        self._shop(self.values, keys)
        return self._close()

    def _open(self, honest: np.ndarray) -> None:
        """Post ``honest`` prices (b, f) plus the Sybil prices; stock is full. The Sybils
        price off the last period's honest prices: they do not see this period's."""
        cfg = self.cfg
        sybil = sybil_prices(
            self.last_honest, self.n_list - self.f, cfg.sybil_discount, cfg.sybil_cost
        )
        self.last_honest = honest.copy()
        price = np.concatenate([honest, sybil], axis=1)
        shown = perceived_quality(
            self.claim, self.rating_sum, self.rating_n, cfg.rating_prior, cfg.ratings
        )
        self.period = {
            "price": price, "shown": shown, "stock": np.full(price.shape, cfg.capacity, np.int32),
            "sales": np.zeros(price.shape), "surplus": np.zeros(self.values.shape),
        }  # fmt: skip

    def _shop(self, values: np.ndarray, keys: jax.Array) -> None:
        """Consumers with ``values`` (b, C; 0 for those not here) shop from what is left at
        the prices posted, seeing the ratings as they are now; their ratings count at once."""
        cfg, per = self.cfg, self.period
        perceived = perceived_quality(
            self.claim, self.rating_sum, self.rating_n, cfg.rating_prior, cfg.ratings
        )
        out = jax.device_get(
            market_period(
                keys,
                values.astype(np.float32),
                per["price"].astype(np.float32),
                perceived.astype(np.float32),
                np.broadcast_to(self.true_q, per["price"].shape).astype(np.float32),
                per["stock"],
                visible=cfg.visible,
            )
        )
        sales = np.asarray(out["sales"], np.float64)
        per["stock"] = per["stock"] - np.asarray(out["sales"], np.int32)
        per["sales"] += sales
        per["surplus"] += np.asarray(out["surplus"], np.float64)
        if self.t > 0:  # the warm-up clearing of period 0 leaves the ratings untouched
            self.rating_sum += sales * self.true_q
            self.rating_n += sales

    def _close(self) -> dict[str, np.ndarray]:
        """End the period: Sybil identities re-enter, profits and history are set."""
        cfg, per = self.cfg, self.period
        after = perceived_quality(
            self.claim, self.rating_sum, self.rating_n, cfg.rating_prior, cfg.ratings
        )
        gone = reenter(self.fraud[None] & np.ones_like(after, bool), after, cfg.reentry_rating)
        self.rating_sum[gone] = 0.0
        self.rating_n[gone] = 0.0
        price, sales = per["price"], per["sales"]
        self.price, self.sales = price, sales
        self.perceived = perceived_quality(
            self.claim, self.rating_sum, self.rating_n, cfg.rating_prior, cfg.ratings
        )
        self.profit = price * sales - self.cost * sales
        self.history.append((price[:, : self.f], sales[:, : self.f], self.profit[:, : self.f]))
        return {
            "surplus": per["surplus"],
            "sales": sales,
            "reentries": gone.sum(axis=1),
            "shown": per["shown"],
        }

    # -- arrivals > 1: consumers arrive at k moments of a period, as batched events ----------
    def _arrive(self, consumers: np.ndarray) -> None:
        """The consumers (batch rows, replicate-major) arriving now shop, in one call."""
        here = np.zeros(self.values.size, bool)
        here[consumers] = True
        moment = int(round((self.sim.now - np.floor(self.sim.now)) * self.cfg.arrivals))
        keys = jax.vmap(jax.random.fold_in, in_axes=(0, None))(self.clear_keys, self.t)
        keys = jax.vmap(jax.random.fold_in, in_axes=(0, None))(keys, moment + 1)
        self._shop(np.where(here.reshape(self.values.shape), self.values, 0.0), keys)

    def _close_period(self) -> None:
        self._settle(self._close(), *self.pending)

    def observe(self) -> dict[str, np.ndarray]:
        """Each firm's view of the last period (rows: replicate-major)."""
        cfg, f = self.cfg, self.f
        mine = self.price[:, :f]
        others = np.where(np.eye(f, self.n_list, dtype=bool)[None], np.inf, self.price[:, None, :])
        index = np.repeat(mine.mean(axis=1, keepdims=True), f, axis=1)
        cost = np.full(mine.shape, cfg.unit_cost)
        obs = {
            "cost": cost,
            "my_price": mine,
            "min_rival": others.min(axis=2) if self.n_list > 1 else mine,
            "sold_frac": self.sales[:, :f] / cfg.capacity,
            "index": index,
            "price_ratio": mine / cfg.unit_cost,
            "index_ratio": index / cfg.unit_cost,
        }
        return {k: v.reshape(-1).astype(np.float32) for k, v in obs.items()}

    def render(self, agent: int) -> str:
        """The prompt of one LLM firm (called by the LLM cohort, one firm at a time)."""
        row = agent - self.offset
        r, f = divmod(row, self.f)
        cfg = self.cfg
        start = max(0, len(self.history) - cfg.llm_memory)
        hist = [
            (t, float(p[r, f]), int(s[r, f]), float(pi[r, f]))
            for t, (p, s, pi) in enumerate(self.history[start:], start=start)
        ]
        rivals = [
            (float(self.price[r, j]), float(self.perceived[r, j]), str(self.texts[r, j]))
            for j in range(self.n_list)
            if j != f
        ]
        return prompts.firm_prompt(
            firm=f + 1,
            period=self.t,
            periods=cfg.steps,
            unit_cost=cfg.unit_cost,
            capacity=cfg.capacity,
            history=hist,
            rivals=rivals,
            index=float(self.price[r, : self.f].mean()),
        )

    # -- checkpoints -----------------------------------------------------------------------
    def state(self) -> dict[str, Any]:
        """Everything a period changes, as checkpoint data: ratings, the open period (arrivals
        mid-period), last period's outcome, the series so far, the firms and the RNGs."""
        out = {
            "rating_sum": self.rating_sum, "rating_n": self.rating_n, "texts": self.texts.tolist(),
            "last_honest": self.last_honest, "period": self.period, "price": self.price,
            "sales": self.sales, "perceived": self.perceived, "profit": self.profit,
            "series": self.series, "history": self.history, "population": self.pop.state_dict(),
        }  # fmt: skip
        if self.cfg.arrivals > 1:
            out["arrival_rngs"] = [rng.bit_generator.state for rng in self.arrival_rngs]
            out["pending"] = getattr(self, "pending", None)
        return out

    def load(self, saved: dict[str, Any]) -> None:
        """Put back a :meth:`state` (the warm-up clearing of ``__init__`` is overwritten)."""
        self.pop.load_state_dict(saved["population"])
        for k in ("rating_sum", "rating_n", "last_honest", "price", "sales", "perceived", "profit"):
            setattr(self, k, np.array(saved[k]))
        self.texts = np.array(saved["texts"], dtype=object).reshape(self.b, self.n_list)
        self.period = {k: np.array(v) for k, v in saved["period"].items()}
        self.series = {k: list(v) for k, v in saved["series"].items()}
        self.history = [tuple(h) for h in saved["history"]]
        if self.cfg.arrivals > 1:
            for rng, st in zip(self.arrival_rngs, saved["arrival_rngs"], strict=True):
                rng.bit_generator.state = st
            if saved["pending"] is not None:
                ids, obs, raw = saved["pending"]
                obs = {k: np.asarray(v) for k, v in obs.items()}
                self.pending = (np.asarray(ids), obs, np.asarray(raw))

    async def run(self, batch: int) -> None:
        """Play the periods; with checkpoints, from where a resumed batch left off."""
        self.sim.handle("market period", self.step)
        saved = self.ctx.checkpoints.resume(batch, self.sim)
        if saved is not None:
            self.load(saved)
        else:
            self.sim.every(1.0, self.step, start=1.0, name="market period")  # period p at time p
        self.ctx.checkpoints.attach(batch, self.sim, self.state)
        await self.sim.arun()

    async def step(self) -> None:
        """One period: observe, every cohort prices, clear, learn, record."""
        cfg = self.cfg
        ids = np.arange(self.rows) + self.offset
        obs = self.observe()
        key = jax.random.fold_in(self.act_key, self.t - 1)
        raw = np.asarray(await self.pop.act(ids, obs, key), np.float64)
        kind = self.kind.reshape(-1)
        price = np.where(kind == "learned", raw * cfg.max_price, raw)
        price = np.clip(price, 0.0, cfg.max_price)  # every honest firm, whatever its kind
        if "llm" in self.kind_names:
            llm = self.pop.cohort("llm")
            rows = llm.agents - self.offset
            self.texts[rows // self.f, rows % self.f] = [
                t or self.texts[r // self.f, r % self.f]
                for t, r in zip(llm.listings, rows, strict=True)
            ]
        if cfg.arrivals == 1:
            self._settle(self._clear(price.reshape(self.b, self.f)), ids, obs, raw)
            return
        # Consumers arrive at k moments of this period; the period closes after the last.
        self._open(price.reshape(self.b, self.f))
        self.pending = (ids, obs, raw)
        k, now = cfg.arrivals, self.sim.now
        slot = np.stack([rng.integers(k, size=cfg.consumers) for rng in self.arrival_rngs]).ravel()
        for j in range(k):  # arrival moments, not consumers
            here = np.flatnonzero(slot == j)
            if here.size:
                self.sim.at(
                    now + j / k, self.arrive, agents=here, priority=1, name="market arrivals"
                )
        self.sim.at(now + (k - 1) / k, self.close, priority=2, name="market close")

    def _settle(self, out: Mapping[str, np.ndarray], ids: np.ndarray, obs, raw: np.ndarray) -> None:
        """After a period's clearing: firms learn from their profit; rows; stop or go on."""
        cfg = self.cfg
        reward = self.profit[:, : self.f].reshape(-1) / (cfg.capacity * cfg.unit_cost)
        if "learned" in self.kind_names and cfg.learning_rate > 0:
            self.pop.learn(ids, obs, raw, reward, jax.random.fold_in(self.learn_key, self.t))
        self._record(out)
        if self.t == cfg.steps:
            self.sim.stop("done")
        else:
            budget_reached(self.client, self.ctx, self.sim)

    def _record(self, out: Mapping[str, np.ndarray]) -> None:
        cfg, rec, t, f = self.cfg, self.ctx.recorder, float(self.t), self.f
        sales = self.sales
        bought = sales.sum(axis=1)
        fraud = sales[:, f:].sum(axis=1)
        index = self.price[:, :f].mean(axis=1)
        welfare = np.asarray(out["surplus"], np.float64).sum(axis=1) / cfg.consumers
        s = self.series
        s["index"].append(index)
        s["welfare"].append(welfare)
        s["purchases"].append(bought)
        s["fraud"].append(fraud)
        s["price"].append(self.price[:, :f].copy())
        s["profit"].append(self.profit[:, :f].copy())
        reps = self.reps
        rec.record(t, "price_index", index, replicate=reps)
        rec.record(t, "consumer_welfare", welfare, replicate=reps)
        rec.record(
            t,
            "fraud_rate",
            np.divide(fraud, bought, out=np.zeros(self.b), where=bought > 0),
            replicate=reps,
        )
        rec.record(t, "units_sold", bought / cfg.consumers, replicate=reps)
        prev = s["index"][-2] if len(s["index"]) > 1 else self.start_index
        crash = (index < (1 - cfg.crash_drop) * prev) | (index < cfg.unit_cost)
        rec.record(t, "crash", crash.astype(float), replicate=reps)
        if cfg.sybil:
            rec.record(t, "sybil_rating", out["shown"][:, f:].mean(axis=1), replicate=reps)
            rec.record(t, "sybil_reentries", out["reentries"], replicate=reps)
        for kind in self.kind_names:  # behaviour by firm kind: one row per replicate holding it
            mask = self.kind == kind
            has = mask.any(axis=1)
            n = np.maximum(mask.sum(axis=1), 1)
            for metric, v in (("price", self.price[:, :f]), ("profit", self.profit[:, :f])):
                mean = (v * mask).sum(axis=1) / n
                rec.record(t, metric, mean[has], replicate=reps[has], kind=kind)

    def results(self) -> dict[str, np.ndarray]:
        """Headline values per replicate of this batch from the periods played."""
        s, cfg = self.series, self.cfg
        nan = np.full(self.b, np.nan)
        if not s["index"]:
            return {k: nan for k in (*HEADLINE, "crash_rate")}
        index = np.stack(s["index"])
        bought, fraud = np.stack(s["purchases"]).sum(axis=0), np.stack(s["fraud"]).sum(axis=0)
        crash = crashes(index, self.start_index, cfg.crash_drop, cfg.unit_cost)
        out = {
            "price_volatility": price_volatility(index) if len(index) > 1 else nan,
            "consumer_welfare": np.stack(s["welfare"]).mean(axis=0),
            "fraud_rate": np.divide(fraud, bought, out=np.zeros(self.b), where=bought > 0),
            "crash_rate": crash.mean(axis=0),
        }
        if cfg.agents == "mixed":
            price, profit = np.stack(s["price"]).mean(axis=0), np.stack(s["profit"]).mean(axis=0)
            for kind in KINDS:
                mask = self.kind == kind
                n = mask.sum(axis=1)
                for name, v in (("price", price), ("profit", profit)):
                    mean = np.where(n > 0, (v * mask).sum(axis=1) / np.maximum(n, 1), np.nan)
                    out[f"{name}.{kind}"] = mean
        return out


class Market(Scenario):
    """Agent Bazaar's market: price volatility and crashes of firms, Sybil fraud on consumers."""

    name = "market"
    Config = MarketConfig
    headline = HEADLINE
    labels = {"kind": str, "agent": int, "cohort": str}
    checkpointing = True  # market state, firms (population) and the period's queued arrivals

    def run(self, cfg: MarketConfig, ctx: RunContext) -> Mapping[str, np.ndarray]:
        async def batch(reps: np.ndarray, client: LLMClient | None) -> tuple[dict, float]:
            key = int(reps[0])  # batches are contiguous ranges of replicates
            done = ctx.checkpoints.finished(key)  # a batch finished before a resume
            if done is None:
                b = _Batch(cfg, ctx, reps, client)
                await b.run(key)
                done = (b.results(), float(b.t))
                ctx.checkpoints.finish(key, done)
            return {k: np.asarray(v) for k, v in done[0].items()}, float(done[1])

        return drive(cfg, ctx, batch, llm=uses_llm(cfg), agents_per_replicate=cfg.population)

    def plot(self, frame: pd.DataFrame, plots_dir: Path, config: MarketConfig) -> list[Path]:
        """Prices by firm kind against unit cost, then one PNG per other per-period metric."""
        if frame.empty:
            return []
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        plots_dir.mkdir(parents=True, exist_ok=True)
        written = []
        prices = frame[frame["metric"] == "price"]
        if prices["time"].nunique() > 1:
            fig, ax = plt.subplots(figsize=(6, 3.5), dpi=100)
            for kind, sub in prices.groupby("kind"):
                mean = sub.groupby("time")["value"].mean()
                ax.plot(mean.index, mean.values, lw=2, label=f"{kind} firms")
            ax.axhline(config.unit_cost, color="k", ls="--", lw=1, label="unit cost")
            ax.set_xlabel("period")
            ax.set_ylabel("mean posted price")
            ax.legend(loc="best", fontsize=8)
            fig.tight_layout()
            path = plots_dir / "prices.png"
            fig.savefig(path)
            plt.close(fig)
            written.append(path)
        skip = ("price", "profit")
        metrics = [
            m
            for m in sorted(frame["metric"].unique())
            if m not in skip and not m.startswith("llm_")
        ]
        return written + plot_metrics(frame, plots_dir, metrics)
