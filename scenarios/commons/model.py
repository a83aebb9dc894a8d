"""The commons: a fishery shared by a society, after GovSim (Piatti et al. 2024).

Each replicate is one lake of ``population`` fishers. A month: (with ``communication``)
every LLM fisher posts one message that its lake's fishers see -> every fisher asks for a
catch -> requests beyond the stock are rationed in proportion -> the stock falls -> a lake
left with fewer than ``collapse_threshold`` tons collapses and its episode ends -> the rest
regrows (logistic, or GovSim's doubling). ``episodes`` fresh lakes are fished in sequence
by the same agents; learned agents take a REINFORCE step after each.

All lakes of a replicate batch are fished by one compiled call; agents are global ids
``replicate * population + seat``, so each cohort acts once per month for every lake
(numeric agents of collapsed lakes act too, keeping one batch shape; their requests are
ignored; LLM agents of collapsed lakes are not asked).

Metrics of an episode, per lake (GovSim's definitions, with continuous tons):

- ``survival_time``: GovSim's survival months: the month in which the lake collapsed, or
  ``periods`` if it never did. This follows GovSim's analysis code
  (``compute_survival_months_stats`` in ``simulation/analysis/plots.py``: round index + 1 of
  the first stock below 5 t, else 12) and its paper's ``m = max{t | h(t) > C}`` with h(t)
  the stock at the start of month t, so values compare with GovSim's tables. Hence a lake
  that collapsed in its last month also scores ``periods``; ``survived`` (1 if it never
  collapsed; its mean is GovSim's survival rate, and it is GovSim's collapse flag) tells the
  two apart, as GovSim's own Kaplan-Meier event indicator does.
- ``sustainability``: 1 - over-usage, where over-usage is the share of positive catch
  requests, over all fishers and months of the episode, above the per-fisher sustainability
  threshold f(S)/N (f: :func:`dynamics.sustainable_catch`, the largest total catch after which
  the lake regrows to its current size). As in GovSim's ``o = sum 1[r > f/N] / sum 1[r > 0]``,
  but on what fishers asked for (their decision) rather than what rationing gave them; a
  request within half a displayed unit (0.005 t) of the threshold is not over it; 1 when
  nobody asked for anything.
- ``gini_harvest``: :func:`society.metrics.gini` of each fisher's total catch (GovSim's
  equality is 1 - this).
- ``efficiency``: min(1, total catch / (periods x f(initial stock))), GovSim's u.
- ``catch_per_agent``: mean total catch of a fisher (GovSim's gain, in tons).

With ``agents=mixed`` ``sustainability`` and ``catch_per_agent`` are also recorded per kind
(label ``kind``) and returned as ``sustainability.<kind>`` and ``catch_per_agent.<kind>``.
Monthly rows (time = month, label ``episode``): ``stock`` before fishing, ``catch``,
``sustainable_catch``, ``over_usage``. Episode rows have time = episode. LLM accounting rows
(``llm_*``) carry ``replicate=-1`` (the whole run) unless per agent. Posted messages go to
``messages.jsonl`` in the run directory.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pandas as pd

from scenarios.commons import prompts
from scenarios.commons.config import CommonsConfig
from scenarios.commons.dynamics import fish, observe, sustainable_catch
from sim_core.experiment import RunContext, Scenario
from sim_core.scheduler import Scheduler
from society.cohorts import LearnedCohort, RuleCohort, parse_mix
from society.cohorts.learned import reinforce_cohort
from society.cohorts.llm import LLMCohort
from society.driver import budget_reached, drive
from society.fields import KINDS
from society.llm import LLMClient, Request
from society.population import build_population, kinds_of, uses_llm

HEADLINE = ("survival_time", "sustainability", "gini_harvest")
EXTRA = ("survived", "efficiency", "catch_per_agent")
BY_KIND = ("sustainability", "catch_per_agent")
# Tons are shown to LLM agents with two decimals: asking for the displayed threshold (rounded
# up by at most 0.005) is not over-usage.
TOLERANCE = 0.005
LEARNED_FEATURES = ("stock_norm", "time_norm")


# -- rule strategies: requests in tons from the month's observation -------------------------
def _sustainable(obs, keys, params):
    return jnp.asarray(obs["sustainable_share"], jnp.float32)


def _greedy(obs, keys, params):
    return jnp.asarray(obs["equal_share"], jnp.float32)


def _fixed(obs, keys, params):
    return jnp.full(keys.shape[:1], params["amount"], jnp.float32)


def _proportional(obs, keys, params):
    return params["fraction"] * jnp.asarray(obs["stock"], jnp.float32)


RULE_FNS = {
    "sustainable": _sustainable,
    "greedy": _greedy,
    "fixed": _fixed,
    "proportional": _proportional,
}


def gini_rows(x: np.ndarray) -> np.ndarray:
    """:func:`society.metrics.gini` of each row of ``x`` (non-negative), in one sort: the
    same formula ``2 sum_i i x_(i) / (n sum x) - (n + 1) / n``, 0 for an all-zero row."""
    n = x.shape[1]
    total = x.sum(axis=1)
    ranks = np.arange(1, n + 1, dtype=np.float64)
    g = 2.0 * (np.sort(x, axis=1) @ ranks) / (n * np.where(total > 0, total, 1.0)) - (n + 1) / n
    return np.where(total > 0, g, 0.0)


class CommonsLLMCohort(LLMCohort):
    """LLM fishers: prompts rendered by ``render(agent, fields)`` from the lake's state."""

    def __init__(
        self,
        name: str,
        agents: np.ndarray,
        client: LLMClient,
        *,
        render: Callable[[int, Mapping[str, Any]], list[dict[str, str]]],
        sample_of: Callable[[int], int],
    ):
        super().__init__(
            name,
            agents,
            client,
            schema=prompts.Catch,
            fallback=prompts.FALLBACK_CATCH,
            template="",
            memory_size=0,  # the lake's history is in the prompt
            to_action=lambda m: float(m.catch),
            sample_of=sample_of,
        )
        self.render = render

    def messages(self, agent: int, pos: int, fields: Mapping[str, Any]) -> list[dict[str, str]]:
        return self.render(agent, fields)


class _Batch:
    """One batch of replicates (lakes): the world, the population and the month loop."""

    def __init__(
        self, cfg: CommonsConfig, ctx: RunContext, reps: np.ndarray, client: LLMClient | None
    ):
        self.cfg, self.ctx, self.reps, self.client = cfg, ctx, reps, client
        n = cfg.population
        self.n, self.b = n, len(reps)
        self.offset = int(reps[0]) * n  # replicate batches are contiguous ranges
        self.gids = np.arange(self.b * n) + self.offset
        self.kinds = np.stack([kinds_of(cfg, ctx.rng.numpy("split", int(r))) for r in reps])
        flat = self.kinds.ravel()
        self.is_llm = flat == "llm"
        self.is_learned = flat == "learned"
        self.numeric = ~self.is_llm
        self.kind_names = tuple(k for k in KINDS if (flat == k).any())
        self.pop = build_population(
            self.kinds,
            self.gids,
            {"rules": self._rules, "learned": self._learned, "llm": self._llm},
        )
        self.doubling = cfg.regrowth == "doubling"
        self.names = [prompts.name_of(i) for i in range(n)]
        self.systems = [
            prompts.system_prompt(
                name=self.names[i],
                others=self.names[:i] + self.names[i + 1 :],
                capacity=cfg.capacity,
                growth_rate=cfg.growth_rate,
                doubling=self.doubling,
                collapse_threshold=cfg.collapse_threshold,
                periods=cfg.steps,
                communication=cfg.communication,
            )
            for i in range(n)
        ]
        self.act_key = ctx.rng.key("act")
        self.learn_key = ctx.rng.key("learn")
        f0 = float(
            sustainable_catch(
                np.float32(cfg.start_stock),
                cfg.capacity,
                cfg.growth_rate,
                doubling=self.doubling,
            )
        )
        self.f0 = f0
        # Learned agents' return unit: a fisher's sustainable catch over an episode.
        self.unit = cfg.steps * (f0 if f0 > 0 else cfg.capacity) / n
        self.last: dict[str, np.ndarray] = {}
        self.episodes_done = 0
        self.sim = Scheduler()
        self.transcript = (
            ctx.run_dir / "messages.jsonl"
            if ctx.run_dir is not None and cfg.communication and self.is_llm.any()
            else None
        )

    # -- setup -----------------------------------------------------------------------------
    def _rules(self, ids: np.ndarray) -> RuleCohort:
        cfg, ctx = self.cfg, self.ctx
        names = []
        for i, rep in enumerate(self.reps.tolist()):
            count = int((self.kinds[i] == "rules").sum())
            names.append(parse_mix(cfg.strategies, count, ctx.rng.numpy("strategies", rep)))
        self.strategy = np.full(self.b * self.n, "", dtype=object)
        self.strategy[self.kinds.ravel() == "rules"] = np.concatenate(names)
        return RuleCohort(
            "rules",
            ids,
            np.concatenate(names),
            strategies=RULE_FNS,
            params={
                "fixed": {"amount": cfg.fixed_harvest},
                "proportional": {"fraction": cfg.harvest_fraction},
            },
        )

    def _learned(self, ids: np.ndarray) -> LearnedCohort:
        return reinforce_cohort(
            ids,
            LEARNED_FEATURES,
            learning_rate=self.cfg.learning_rate,
            key=self.ctx.rng.key("learned-init"),
        )

    def _llm(self, ids: np.ndarray) -> CommonsLLMCohort:
        return CommonsLLMCohort(
            "llm", ids, self.client, render=self.render, sample_of=lambda a: a // self.n
        )

    # -- prompts ---------------------------------------------------------------------------
    def _situation(self, lake: int, seat: int) -> str:
        cfg = self.cfg
        return prompts.situation(
            month=self.month,
            periods=cfg.steps,
            stock=float(self.view["stock"][lake]),
            sustainable_share=float(self.view["sustainable_share"][lake]),
            universalization=cfg.universalization,
            history=prompts.history_text(self.history[lake], seat, self.names),
        )

    def render(self, agent: int, fields: Mapping[str, Any]) -> list[dict[str, str]]:
        """The catch prompt of one LLM fisher (called by the cohort, one agent at a time)."""
        lake, seat = divmod(agent - self.offset, self.n)
        posts = prompts.messages_text(self.posts[lake]) if self.cfg.communication else None
        user = prompts.catch_prompt(self._situation(lake, seat), posts, float(fields["stock"]))
        return [
            {"role": "system", "content": self.systems[seat]},
            {"role": "user", "content": user},
        ]

    async def _discuss(self, rows: np.ndarray) -> None:
        """One round of messages: every LLM fisher of a living lake posts one (in flight together)."""
        cfg = self.cfg
        self.posts = [[] for _ in range(self.b)]
        if rows.size == 0:
            return
        requests = []
        for row in rows.tolist():  # one prompt per LLM agent: the accepted loop of LLM cohorts
            lake, seat = divmod(row, self.n)
            user = prompts.message_prompt(self._situation(lake, seat), cfg.message_chars)
            requests.append(
                Request(
                    [
                        {"role": "system", "content": self.systems[seat]},
                        {"role": "user", "content": user},
                    ],
                    schema=prompts.Message,
                    fallback=prompts.FALLBACK_MESSAGE,
                    sample=int(self.gids[row]) // self.n,  # independent across replicates
                    agent=int(self.gids[row]),
                    cohort="llm",
                )
            )
        done = await self.client.complete_many(requests)
        log = []
        for row, c in zip(rows.tolist(), done, strict=True):
            lake, seat = divmod(row, self.n)
            text = c.parsed.message if c.parsed is not None else ""
            text = " ".join(text.split())[: cfg.message_chars]
            self.posts[lake].append((self.names[seat], text))
            log.append(
                {
                    "replicate": int(self.reps[lake]),
                    "episode": self.episode + 1,
                    "month": self.month,
                    "seat": seat,
                    "name": self.names[seat],
                    "message": text,
                }
            )
        posted = np.zeros(self.b)
        for lake, posts in enumerate(self.posts):
            posted[lake] = sum(1 for _, text in posts if text)
        live = self.alive
        self.ctx.recorder.record(
            float(self.month),
            "messages",
            posted[live],
            replicate=self.reps[live],
            episode=self.episode + 1,
        )
        if self.transcript is not None:
            with self.transcript.open("a") as fh:
                fh.writelines(json.dumps(e) + "\n" for e in log)

    # -- the run ---------------------------------------------------------------------------
    @property
    def t(self) -> int:
        """Months since the start, over episodes: the scheduler is the clock."""
        return int(self.sim.now)

    async def run(self, batch: int) -> None:
        """Fish month by month; with checkpoints, from where a resumed batch left off. Each
        month schedules the next (a plain event, saved with the queue), so an episode that
        ends early starts the next one at its first month, across a resume too."""
        self.sim.handle("commons month", self.step)
        saved = self.ctx.checkpoints.resume(batch, self.sim)
        if saved is not None:
            self.load(saved)
        else:
            self.sim.at(0.0, self.step, name="commons month")
        self.ctx.checkpoints.attach(batch, self.sim, self.state)
        await self.sim.arun()

    # -- checkpoints -----------------------------------------------------------------------
    TALLIES = ("stock", "alive", "survival", "caught", "over", "positive")

    def state(self) -> dict[str, Any]:
        """Everything a month changes, as checkpoint data: the episode's lakes and tallies,
        the lakes' histories (prompts), learned decisions awaiting the episode's end, the
        last episode's values, the population, and how much of the transcript is written."""
        written = self.transcript is not None and self.transcript.exists()
        out = {k: getattr(self, k) for k in self.TALLIES}
        out.update(
            episode=self.episode, history=self.history, decisions=self.decisions, last=self.last,
            episodes_done=self.episodes_done, population=self.pop.state_dict(),
            transcript=self.transcript.stat().st_size if written else 0,
        )  # fmt: skip
        return out

    def load(self, saved: dict[str, Any]) -> None:
        """Put back a :meth:`state`; transcript lines written after it are dropped (the
        resumed run writes them again)."""
        self.pop.load_state_dict(saved["population"])
        for k in self.TALLIES:
            setattr(self, k, np.array(saved[k]))
        self.episode, self.episodes_done = int(saved["episode"]), int(saved["episodes_done"])
        self.history = [list(h) for h in saved["history"]]
        self.decisions = [tuple(d) for d in saved["decisions"]]
        self.last = dict(saved["last"])
        self.posts = [[] for _ in range(self.b)]
        if self.transcript is not None and self.transcript.exists():
            with self.transcript.open("r+b") as fh:
                fh.truncate(int(saved["transcript"]))

    def _begin_episode(self, e: int) -> None:
        b, n = self.b, self.n
        self.episode = e
        self.stock = np.full(b, self.cfg.start_stock, np.float32)
        self.alive = np.ones(b, bool)
        self.survival = np.full(b, self.cfg.steps, np.int64)
        self.caught = np.zeros((b, n))
        self.over = np.zeros((b, n))
        self.positive = np.zeros((b, n))
        self.history: list[list[dict]] = [[] for _ in range(b)]
        self.posts: list[list[tuple[str, str]]] = [[] for _ in range(b)]
        self.decisions: list[tuple] = []

    async def step(self) -> None:
        """One month in every lake of the batch: observe, talk, act, fish, record; then the
        next month is scheduled (the next episode's first, after an early end)."""
        cfg, b, n = self.cfg, self.b, self.n
        e, m = divmod(self.t, cfg.steps)
        if m == 0:
            self._begin_episode(e)
        self.month = m + 1
        self.view = observe(
            jnp.asarray(self.stock),
            cfg.capacity,
            cfg.growth_rate,
            float(self.month),
            float(cfg.steps),
            n,
            doubling=self.doubling,
        )
        alive_agents = np.repeat(self.alive, n)
        if cfg.communication and self.is_llm.any():
            await self._discuss(np.flatnonzero(self.is_llm & alive_agents))
            if budget_reached(self.client, self.ctx, self.sim):
                return
        obs = {k: np.repeat(v, n) for k, v in self.view.items()}
        due = np.flatnonzero(self.numeric | alive_agents)
        key = jax.random.fold_in(self.act_key, self.t)
        actions = await self.pop.act(self.gids[due], {k: v[due] for k, v in obs.items()}, key)
        raw = np.zeros(b * n)
        raw[due] = np.asarray(actions, np.float64)
        # Learned policies give a share of the equal split S/N; everyone else asks in tons.
        asked = np.where(self.is_learned, raw * obs["equal_share"], raw)
        asked = np.where(alive_agents, asked, 0.0).reshape(b, n)
        stock, alive, out = fish(
            jnp.asarray(self.stock),
            jnp.asarray(self.alive),
            jnp.asarray(asked, jnp.float32),
            cfg.capacity,
            cfg.growth_rate,
            cfg.collapse_threshold,
            doubling=self.doubling,
        )
        out = {k: np.asarray(v) for k, v in jax.device_get(out).items()}
        self._account(asked, out, np.asarray(stock))
        if self.is_learned.any():
            mask = self.is_learned & alive_agents
            feats = {f: obs[f][mask] for f in LEARNED_FEATURES}
            self.decisions.append((np.flatnonzero(mask), feats, raw[mask]))
        self.stock, self.alive = np.asarray(stock), np.asarray(alive)
        following = self.t + 1
        if m == cfg.steps - 1 or not self.alive.any():
            self._end_episode(e)
            if e == cfg.episodes - 1:
                self.sim.stop("done")
                return
            following = (e + 1) * cfg.steps  # every lake collapsed early: the next episode
        self.sim.at(float(following), self.step, name="commons month")
        budget_reached(self.client, self.ctx, self.sim)

    def _account(self, asked: np.ndarray, out: dict[str, np.ndarray], new_stock: np.ndarray):
        """Fold one month into the episode's tallies and record its rows (living lakes)."""
        live = self.alive
        share = self.view["sustainable_share"][:, None]
        positive = (asked > 0) & live[:, None]
        over = positive & (asked > share + TOLERANCE)
        self.positive += positive
        self.over += over
        self.caught += out["caught"]
        self.survival[out["collapsed"]] = self.month
        if self.is_llm.any():  # the lake's history, for prompts
            for lake in np.flatnonzero(live).tolist():
                self.history[lake].append(
                    {
                        "month": self.month,
                        "stock": float(self.stock[lake]),
                        "asked": asked[lake].tolist(),
                        "caught": out["caught"][lake].tolist(),
                        "left": float(out["left"][lake]),
                        "regrown": float(new_stock[lake]),
                    }
                )
        rec, t, reps, ep = self.ctx.recorder, float(self.month), self.reps[live], self.episode + 1
        rec.record(t, "stock", self.stock[live], replicate=reps, episode=ep)
        rec.record(t, "catch", out["caught"][live].sum(axis=1), replicate=reps, episode=ep)
        rec.record(
            t, "sustainable_catch", self.view["sustainable_catch"][live], replicate=reps, episode=ep
        )
        pos = positive[live].sum(axis=1)
        has = pos > 0
        rec.record(
            t,
            "over_usage",
            over[live].sum(axis=1)[has] / pos[has],
            replicate=reps[has],
            episode=ep,
        )

    def _end_episode(self, e: int) -> None:
        cfg, b, n = self.cfg, self.b, self.n
        caught = self.caught
        over_usage = self.over.sum(axis=1) / np.maximum(self.positive.sum(axis=1), 1)
        values = {
            "survival_time": self.survival.astype(float),
            "sustainability": 1.0 - over_usage,
            "gini_harvest": gini_rows(caught),
            "survived": (self.survival == cfg.steps) & self.alive,
            "efficiency": (
                np.minimum(1.0, caught.sum(axis=1) / (cfg.steps * self.f0))
                if self.f0 > 0
                else np.full(b, np.nan)
            ),
            "catch_per_agent": caught.mean(axis=1),
        }
        values["survived"] = values["survived"].astype(float)
        rec, t = self.ctx.recorder, float(e + 1)
        for k, v in values.items():
            rec.record(t, k, v, replicate=self.reps, episode=e + 1)
        if cfg.agents == "mixed":
            for kind in self.kind_names:
                mask = self.kinds == kind
                pos = (self.positive * mask).sum(axis=1)
                sust = 1.0 - (self.over * mask).sum(axis=1) / np.maximum(pos, 1)
                per = (caught * mask).sum(axis=1) / np.maximum(mask.sum(axis=1), 1)
                for name, v in (("sustainability", sust), ("catch_per_agent", per)):
                    rec.record(t, name, v, replicate=self.reps, episode=e + 1, kind=kind)
                    values[f"{name}.{kind}"] = v
        rec.record(
            t,
            "agent_catch",
            caught.ravel(),
            replicate=np.repeat(self.reps, n),
            episode=e + 1,
            agent=np.tile(np.arange(n), b),
            kind=self.kinds.ravel().astype(str),
        )
        self.last = values
        self.episodes_done = e + 1
        if self.decisions and cfg.learning_rate > 0:
            # REINFORCE: every decision of the episode is credited with the agent's total
            # catch of the episode, in units of its sustainable catch. One call per month.
            total = caught.ravel() / self.unit
            base = jax.random.fold_in(self.learn_key, e)
            for k, (rows, feats, raw) in enumerate(self.decisions):
                self.pop.learn(
                    self.gids[rows], feats, raw, total[rows], jax.random.fold_in(base, k)
                )


class Commons(Scenario):
    """GovSim's fishery (Piatti et al. 2024) with logistic regrowth, for any kind of agent."""

    name = "commons"
    Config = CommonsConfig
    headline = HEADLINE
    labels = {"episode": int, "agent": int, "kind": str, "cohort": str}
    checkpointing = True  # lakes, tallies, histories, population and the next month's event

    def horizon(self, config: CommonsConfig) -> tuple[float, str] | None:
        """Months of one episode; unknown with several (time restarts each episode)."""
        return (float(config.steps), "months") if config.episodes == 1 else None

    def run(self, cfg: CommonsConfig, ctx: RunContext) -> Mapping[str, np.ndarray]:
        kinds = kinds_of(cfg, 0)  # the counts of a split do not depend on the shuffle
        keys = list(HEADLINE + EXTRA)
        if cfg.agents == "mixed":
            keys += [f"{m}.{k}" for k in KINDS if (kinds == k).any() for m in BY_KIND]

        async def batch(reps: np.ndarray, client: LLMClient | None) -> tuple[dict, float]:
            key = int(reps[0])  # batches are contiguous ranges of replicates
            done = ctx.checkpoints.finished(key)  # a batch finished before a resume
            if done is None:
                b = _Batch(cfg, ctx, reps, client)
                await b.run(key)
                done = {k: b.last.get(k, np.full(len(reps), np.nan)) for k in keys}
                ctx.checkpoints.finish(key, done)
            return {k: np.asarray(v) for k, v in done.items()}, float(cfg.episodes)

        return drive(cfg, ctx, batch, llm=uses_llm(cfg), agents_per_replicate=cfg.population)

    def plot(self, frame: pd.DataFrame, plots_dir: Path, config: CommonsConfig) -> list[Path]:
        """One figure: the stock month by month (last episode; capacity and collapse line),
        catch against the sustainable catch, and the per-episode headline metrics (or, for
        one episode, each fisher's total catch by kind)."""
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        plots_dir.mkdir(parents=True, exist_ok=True)
        if frame.empty or not (frame["metric"] == "stock").any():
            return []
        last = int(frame.loc[frame["metric"] == "stock", "episode"].max())
        month = frame[frame["episode"] == last]
        fig, axes = plt.subplots(1, 3, figsize=(14, 4), dpi=100)
        ax = axes[0]
        stock = month[month["metric"] == "stock"]
        for _, rep in stock.groupby("replicate"):
            ax.plot(rep["time"], rep["value"], color="tab:blue", alpha=0.25, lw=0.8)
        mean = stock.groupby("time")["value"].mean()
        ax.plot(mean.index, mean.values, color="tab:blue", lw=2, label="mean of living lakes")
        ax.axhline(config.capacity, color="grey", ls=":", label="capacity")
        ax.axhline(config.collapse_threshold, color="tab:red", ls="--", label="collapse")
        ax.set_xlabel("month")
        ax.set_ylabel("tons before fishing")
        ax.set_title(f"stock (episode {last})", fontsize=9)
        ax.legend(fontsize=7, loc="best")
        ax = axes[1]
        for metric, colour in (("catch", "tab:orange"), ("sustainable_catch", "tab:green")):
            sub = month[month["metric"] == metric].groupby("time")["value"].mean()
            ax.plot(sub.index, sub.values, color=colour, marker="o", ms=3, label=metric)
        ax.set_xlabel("month")
        ax.set_ylabel("tons per lake (mean)")
        ax.legend(fontsize=7, loc="best")
        ax = axes[2]
        episodes = frame[frame["metric"].isin(HEADLINE) & frame["kind"].isna()]
        if config.episodes > 1:
            for metric in HEADLINE:
                sub = episodes[episodes["metric"] == metric].groupby("time")["value"].mean()
                scale = config.steps if metric == "survival_time" else 1.0
                ax.plot(sub.index, sub.values / scale, marker="o", ms=3, label=metric)
            ax.set_xlabel("episode")
            ax.set_ylabel("value (survival_time / periods)")
            ax.legend(fontsize=7, loc="best")
        else:
            per = frame[frame["metric"] == "agent_catch"]
            kinds = [k for k in KINDS if (per["kind"] == k).any()]
            ax.boxplot([per.loc[per["kind"] == k, "value"] for k in kinds], tick_labels=kinds)
            ax.set_ylabel("total catch of a fisher (tons)")
            ax.set_title("catch by kind of agent", fontsize=9)
        fig.suptitle(
            f"commons: {config.population} fishers, {config.regrowth} regrowth, "
            f"agents={config.agents}"
        )
        fig.tight_layout()
        path = plots_dir / "commons.png"
        fig.savefig(path)
        plt.close(fig)
        return [path]
