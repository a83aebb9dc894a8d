"""The indirect-reciprocity scenario: a Population of rule / learned / LLM donors, one round
per scheduler moment, all replicates of a batch in one vectorised world.

Agents of replicate r have the global ids ``r * N + i``, so one :class:`RuleCohort` decides
for every replicate of a batch in one compiled call, and an agent's random draws depend on
(round, replicate, agent) only, not on how replicates are batched. Learned agents get one
:class:`LearnedCohort` per replicate (selection must stay within a replicate); LLM agents of
all replicates share one cohort, so all their requests of a round are in flight together.

Headline: ``cooperation_rate`` (share of encounters in which the donor's gift was made,
over rounds >= ``average_from``) and ``payoff.<strategy>`` for every rule strategy or agent
kind present: the mean payoff per agent per round (b for each gift received, minus c for
each gift made) over the same rounds.

Recorded rows: per round ``cooperation_rate``, ``good_share`` and ``payoff`` (label
``strategy``: a rule strategy, or ``learned`` / ``llm``); at the end ``give_if_good`` and
``give_if_bad`` per strategy (the donors' decisions by their view of the recipient over the
averaged rounds, the signature of indirect reciprocity) and the LLM client's accounting
rows (per agent with its replicate; run totals and per-cohort rows with replicate -1).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import jax.numpy as jnp
import numpy as np
import pandas as pd

from scenarios.indirect_reciprocity import prompts
from scenarios.indirect_reciprocity.config import (
    KINDS,
    STRATEGIES,
    IndirectReciprocityConfig,
    parse_weights,
)
from scenarios.indirect_reciprocity.dynamics import (
    Game,
    batch_look,
    batch_settle,
    initial_reputations,
    key_at,
    make_game,
)
from sim_core.experiment import RunContext, Scenario
from sim_core.scheduler import Scheduler
from society.cohorts import LearnedCohort, RuleCohort, parse_mix
from society.cohorts.llm import LLMCohort
from society.driver import budget_reached, drive
from society.llm import LLMClient
from society.population import Population

# Private views of a batch (replicates x N x N) are split into batches of at most this many
# entries: each round also draws that many uniforms per random kind (float32).
MAX_BATCH_VIEWS = 2**25
MAX_LABELS = len(STRATEGIES) + len(KINDS) - 1  # every rule strategy, 'learned', 'llm'


def _disc(obs, keys, params):
    return (jnp.asarray(obs["partner_good"]) > 0).astype(jnp.int32)


def _pdisc(obs, keys, params):
    return (jnp.asarray(obs["partner_good"]) <= 0).astype(jnp.int32)


EXTRA_STRATEGIES = {"disc": _disc, "pdisc": _pdisc}


class ReputationLLMCohort(LLMCohort):
    """LLM donors: numeric observations rendered as words (good/bad, round from 1)."""

    def messages(self, agent: int, pos: int, fields: Mapping[str, Any]) -> list[dict[str, str]]:
        return super().messages(agent, pos, prompts.fields(fields))


def game_of(cfg: IndirectReciprocityConfig) -> Game:
    return make_game(
        cfg.norm,
        private=cfg.assessment == "private",
        q=cfg.q,
        b=cfg.b,
        c=cfg.c,
        execution_error=cfg.execution_error,
        assessment_error=cfg.assessment_error,
    )


def assign_labels(cfg: IndirectReciprocityConfig, rng: np.random.Generator) -> np.ndarray:
    """Each agent's label: its rule strategy, or its kind ('learned', 'llm'). Counts are
    fixed by the proportions (largest remainder), positions shuffled by ``rng``."""
    spec = cfg.split if cfg.agents == "mixed" else cfg.agents
    kinds = parse_mix(spec, cfg.population, rng).astype(object)
    rules = kinds == "rules"
    kinds[rules] = parse_mix(cfg.strategies, int(rules.sum()), rng)
    return kinds


def label_names(cfg: IndirectReciprocityConfig) -> list[str]:
    """Labels present in every replicate, in a fixed order (strategies as given, then kinds)."""
    labels = assign_labels(cfg, np.random.default_rng(0))  # counts do not depend on the rng
    order = list(parse_weights(cfg.strategies, STRATEGIES, "strategies")) + list(KINDS[1:])
    return [x for x in order if (labels == x).any()]


def batches(cfg: IndirectReciprocityConfig, ctx: RunContext) -> list[np.ndarray]:
    """The runner's replicate batches, split further so private views fit in memory."""
    out = []
    per = max(1, MAX_BATCH_VIEWS // cfg.population**2) if cfg.assessment == "private" else None
    for reps in ctx.replicate_batches():
        step = per or len(reps)
        out += [reps[i : i + step] for i in range(0, len(reps), step)]
    return out


class IndirectReciprocity(Scenario):
    """Indirect reciprocity with image scoring, standing or stern judging."""

    name = "indirect-reciprocity"
    Config = IndirectReciprocityConfig
    # Plus "payoff.<strategy>" for every strategy (or agent kind) present.
    headline = ("cooperation_rate",)
    labels = {"strategy": str, "agent": int, "cohort": str}
    checkpointing = True  # world, population (cohort states, LLM memories) and scheduler queue

    def run(self, cfg: IndirectReciprocityConfig, ctx: RunContext) -> Mapping[str, np.ndarray]:
        names = label_names(cfg)

        async def batch(reps: np.ndarray, client: LLMClient | None) -> tuple[dict, float]:
            done = ctx.checkpoints.finished(int(reps[0]))  # a batch finished before a resume
            if done is None:
                done = await self._run_batch(cfg, ctx, reps, names, client)
                ctx.checkpoints.finish(int(reps[0]), done)
            coop, payoff, last = (np.asarray(done[0]), np.asarray(done[1]), float(done[2]))
            return {
                "cooperation_rate": coop,
                **{f"payoff.{x}": payoff[:, i] for i, x in enumerate(names)},
            }, last

        # LLM agents present: a tiny share of a mix may round to none.
        llm = "llm" in names
        return drive(
            cfg, ctx, batch, llm=llm, agents_per_replicate=cfg.population, batches=batches(cfg, ctx)
        )

    async def _run_batch(self, cfg, ctx: RunContext, reps: np.ndarray, names: list[str], client):
        n, nr, nl = cfg.population, len(reps), len(names)
        game = game_of(cfg)
        labels = np.stack([assign_labels(cfg, ctx.rng.numpy("assignment", int(r))) for r in reps])
        ids = (reps[:, None] * n + np.arange(n)).ravel()
        flat = labels.ravel()
        cohorts = self._cohorts(cfg, ctx, reps, ids, flat, client)
        pop = Population(cohorts, capacity=int(ids.max()) + 1)
        learns = any(not isinstance(c, RuleCohort) for c in cohorts)
        talks = any(isinstance(c, LLMCohort) for c in cohorts)  # prompts need more fields
        # Padded to every possible label, so runs with different mixes share compilations.
        padded = np.asarray(names + [""] * (MAX_LABELS - nl), dtype=object)
        onehot = jnp.asarray(labels[..., None] == padded, jnp.float32)
        rep = jnp.stack([initial_reputations(game, n)] * nr)
        keys = ctx.rng.keys("encounters", reps)
        act_key, learn_key = ctx.rng.key("act"), ctx.rng.key("learn")
        acc = {k: np.zeros((nr, nl)) for k in ("payoff", "gave_good", "good", "gave_bad", "bad")}
        acc["cooperation"] = np.zeros(nr)
        # The world state, what a checkpoint saves with the population: reputations, each
        # agent's payoff so far (LLM agents see it), the averaged tallies.
        state = {
            "rep": rep,
            "rounds": 0,
            "total": np.zeros((nr, n), np.float32),
            "acc": acc,
            "counted": 0,
        }
        sim = Scheduler()
        rec = ctx.recorder
        strategy_col = np.tile(np.asarray(names, dtype=object), nr)

        async def play_round() -> None:
            t, total, acc = int(sim.now), state["total"], state["acc"]
            j, view, mine = batch_look(game, state["rep"], keys, t)
            obs = {"partner_good": np.asarray(view).ravel()}
            if talks:
                obs["my_good"] = np.asarray(mine).ravel()
                obs["my_payoff"] = total.ravel().copy()
                obs["round"] = np.full(ids.size, t, np.int32)
            actions = await pop.act(ids, obs, key_at(act_key, t))
            intended = np.asarray(actions).reshape(nr, n).astype(np.int8)
            new, pay, stats = batch_settle(game, state["rep"], j, intended, view, keys, t, onehot)
            state["rep"], state["rounds"] = new, t + 1
            if learns:  # rule cohorts do not learn: skip the call, its key and the transfer
                pay = np.asarray(pay)
                pop.learn(ids, obs, intended.ravel(), pay.ravel(), key_at(learn_key, t))
                state["total"] = total + pay
            stats = {
                k: np.asarray(v)[..., :nl] if np.ndim(v) == 2 else np.asarray(v)
                for k, v in stats.items()
            }
            if t >= cfg.average_from:
                state["counted"] += 1
                for k in acc:
                    acc[k] = acc[k] + stats[k]
            if t % cfg.record_every == 0 or t == cfg.steps - 1:
                rec.record(t, "cooperation_rate", stats["cooperation"], replicate=reps)
                rec.record(t, "good_share", stats["good_share"], replicate=reps)
                rec.record(
                    t,
                    "payoff",
                    stats["payoff"].ravel(),
                    replicate=np.repeat(reps, nl),
                    strategy=strategy_col,
                )
            if t + 1 >= cfg.steps:
                sim.stop("encounters")
            else:
                budget_reached(client, ctx, sim)

        sim.handle("round", play_round)
        batch = int(reps[0])
        saved = ctx.checkpoints.resume(batch, sim)
        if saved is not None:
            pop.load_state_dict(saved.pop("population"))
            state.update(
                saved,
                rep=jnp.asarray(saved["rep"]),
                acc={k: np.asarray(v) for k, v in saved["acc"].items()},
            )
        else:
            sim.every(1.0, play_round, name="indirect-reciprocity round")
        ctx.checkpoints.attach(batch, sim, lambda: {**state, "population": pop.state_dict()})
        await sim.arun()
        end, acc, counted = float(state["rounds"]), state["acc"], state["counted"]
        with np.errstate(invalid="ignore", divide="ignore"):
            for metric, num, den in (
                ("give_if_good", "gave_good", "good"),
                ("give_if_bad", "gave_bad", "bad"),
            ):
                rate = np.where(acc[den] > 0, acc[num] / acc[den], np.nan)
                rec.record(
                    end, metric, rate.ravel(), replicate=np.repeat(reps, nl), strategy=strategy_col
                )
            coop = acc["cooperation"] / counted if counted else np.full(nr, np.nan)
            payoff = acc["payoff"] / counted if counted else np.full((nr, nl), np.nan)
        return coop, payoff, end

    def _cohorts(self, cfg, ctx: RunContext, reps, ids, flat, client) -> list:
        cohorts: list = []
        kind = np.where(np.isin(flat, KINDS[1:]), flat, "rules")
        if (kind == "rules").any():
            m = kind == "rules"
            cohorts.append(
                RuleCohort("rules", ids[m], strategy=flat[m], strategies=EXTRA_STRATEGIES)
            )
        if (kind == "learned").any():
            per_rep = ids // cfg.population
            for r in reps:
                m = (kind == "learned") & (per_rep == r)
                cohorts.append(
                    LearnedCohort(
                        f"learned-{r}",
                        ids[m],
                        features=["partner_good"],
                        actions=2,
                        rule=cfg.learning,
                        learning_rate=cfg.learning_rate,
                        evolve_every=None if cfg.learning == "reinforce" else cfg.generation,
                        mutation=cfg.mutation,
                        key=ctx.rng.key("learned", int(r)),
                    )
                )
        if (kind == "llm").any():
            cohorts.append(
                ReputationLLMCohort(
                    "llm",
                    ids[kind == "llm"],
                    client,
                    schema=prompts.Decision,
                    fallback=prompts.FALLBACK,
                    template=prompts.template(cfg),
                    system_prompt=prompts.SYSTEM,
                    memory_size=cfg.llm_memory,
                    to_action=lambda d: float(d.give),
                )
            )
        return cohorts

    def plot(self, frame: pd.DataFrame, plots_dir: Path, config: Any) -> list[Path]:
        """cooperation.png (cooperation rate and share of good reputations per round) and
        payoff.png (each strategy's mean payoff per round up to each round), means over
        replicates against the round."""
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        plots_dir.mkdir(parents=True, exist_ok=True)
        written = []
        panels = {
            "cooperation": [("cooperation_rate", None), ("good_share", None)],
            "payoff": [
                ("payoff", s)
                for s in frame.loc[frame["metric"] == "payoff", "strategy"].dropna().unique()
            ],
        }
        for fname, lines in panels.items():
            fig, ax = plt.subplots(figsize=(6, 3.5), dpi=100)
            drawn = 0
            for metric, strategy in lines:
                sub = frame[frame["metric"] == metric]
                if strategy is not None:
                    sub = sub[sub["strategy"] == strategy]
                mean = sub.groupby("time")["value"].mean()
                if mean.empty:
                    continue
                if fname == "payoff":  # single rounds are noisy: the average up to each round
                    mean = mean.expanding().mean()
                ax.plot(mean.index, mean.values, lw=1.5, label=strategy or metric)
                drawn += 1
            if not drawn:
                plt.close(fig)
                continue
            ax.set_xlabel("round")
            if fname == "payoff":
                ax.set_ylabel("mean payoff per round so far")
            else:
                ax.set_ylabel("share")
                ax.set_ylim(-0.02, 1.02)
            ax.legend(loc="best", fontsize=8)
            fig.tight_layout()
            path = plots_dir / f"{fname}.png"
            fig.savefig(path)
            plt.close(fig)
            written.append(path)
        return written
