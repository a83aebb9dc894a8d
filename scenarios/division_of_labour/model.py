"""The division-of-labour scenario: response thresholds with reinforcement.

Two engines run the same model (``dynamics.py``):

- ``agents=rules``: the whole colony in one compiled ``lax.scan`` over a chunk of steps,
  vmapped over replicates (no Python loop over agents or steps inside a chunk);
- every other agent type: one scheduler moment per step over a :class:`Population` whose
  agents are all replicates' agents (global id ``replicate * agents + i``), so each cohort
  acts once per step for every replicate: idle agents are due, the world's draws and the
  transition are compiled calls vmapped over replicates.

Both draw the same numbers, so ``agents=mixed, split='rules:1'`` reproduces
``agents=rules`` exactly. Learned agents see ``log((1 + s_j) / (1 + theta_ij))`` (the
rule's logit is about twice it) and learn by REINFORCE from the reward of
:func:`dynamics.reward`; LLM agents are told that reward. Recorded: ``stimulus`` and
``active_share`` per task every ``record_every`` steps, ``threshold`` of the first
``trace_agents`` agents, and at the end each agent's ``acts`` and ``final_threshold`` per task
(label ``cohort``: the agent's kind), ``dol_index``, ``task_entropy`` and ``n_niches``.
LLM accounting rows (``llm_*``) carry ``replicate=-1`` (the whole run) unless per agent.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pandas as pd

from scenarios.division_of_labour.config import DivisionOfLabourConfig
from scenarios.division_of_labour.dynamics import (
    STEEPNESS,
    Params,
    World,
    advance,
    initial_world,
    make_params,
    observe_batch,
    offer_batch,
    reward,
    transition_batch,
)
from scenarios.division_of_labour.prompts import FALLBACK, SYSTEM, Work, template
from sim_core.experiment import RunContext, Scenario
from sim_core.scheduler import Scheduler
from society.cohorts import LearnedCohort, RuleCohort
from society.cohorts.llm import LLMCohort
from society.driver import budget_reached, drive
from society.llm import LLMClient
from society.metrics import dol_index, emergent_niches, task_entropy
from society.population import build_population, kinds_of, uses_llm

# Steps per compiled chunk of the rule engine: about this many agent-steps, within bounds.
CHUNK_WORK = 2_000_000
CHUNK_BOUNDS = (50, 1000)


def params_of(cfg: DivisionOfLabourConfig) -> Params:
    return make_params(
        cfg.population,
        cfg.tasks,
        reinforcement=cfg.reinforcement,
        average_from=cfg.average_from,
        delta=cfg.delta,
        alpha=cfg.alpha,
        quit_prob=cfg.quit_prob,
        xi=cfg.xi,
        phi=cfg.phi,
        theta_min=cfg.theta_min,
        theta_max=cfg.theta_max,
    )


def specialisation(counts: np.ndarray) -> tuple[float, float]:
    """(I/H(task) of Gorelick et al. 2004, mean normalised task entropy over agents with
    acts) of one act-count matrix; NaN when nothing was done."""
    if counts.sum() == 0:
        return float("nan"), float("nan")
    h = task_entropy(counts)
    return dol_index(counts)["dol_indiv_to_task"], float(np.nanmean(h))


def _stack(p: Params, theta_init: float, r: int) -> World:
    w = initial_world(p, theta_init)
    return jax.tree_util.tree_map(lambda x: jnp.broadcast_to(x, (r,) + x.shape), w)


class DivisionOfLabour(Scenario):
    """Response thresholds with reinforcement; rule replicates vmapped in one computation."""

    name = "division-of-labour"
    Config = DivisionOfLabourConfig
    headline = ("dol_index", "task_entropy")
    labels = {"task": int, "agent": int, "cohort": str}
    # The rule engine saves checkpoints (SIGINT/SIGTERM stop it cleanly; `society resume`
    # continues it); runs with learned or LLM agents resume by starting again.
    checkpointing = True

    def run(self, cfg: DivisionOfLabourConfig, ctx: RunContext) -> Mapping[str, np.ndarray]:
        p = params_of(cfg)

        async def batch(reps: np.ndarray, client: LLMClient | None) -> tuple[dict, float]:
            if cfg.agents == "rules":  # the whole colony in compiled chunks, with checkpoints
                counts = ctx.checkpoints.finished(int(reps[0]))  # a batch done before a resume
                if counts is None:
                    counts = await self._run_rules(cfg, ctx, p, reps)
                    ctx.checkpoints.finish(int(reps[0]), counts)
                end = float(cfg.steps)
            else:
                kinds = np.stack([kinds_of(cfg, ctx.rng.numpy("split", int(r))) for r in reps])
                counts, end = await self._run_population(cfg, ctx, p, reps, kinds, client)
            out = np.array([specialisation(c) for c in counts]).reshape(-1, 2)
            return {"dol_index": out[:, 0], "task_entropy": out[:, 1]}, end

        return drive(cfg, ctx, batch, llm=uses_llm(cfg), agents_per_replicate=cfg.population)

    # -- recording -------------------------------------------------------------------------
    def _record_series(self, cfg, ctx, reps, times, s, share, trace, last=None) -> None:
        """Rows of the steps in ``times`` (after-step times, aligned with axis 1 of the arrays
        (R, T, m) and (R, T, K, m)) that fall on the recording grid or are the ``last``
        (default ``steps``)."""
        keep = (times % cfg.record_every == 0) | (times == (cfg.steps if last is None else last))
        if not keep.any():
            return
        t = times[keep].astype(float)
        s, share, trace = (
            np.asarray(s)[:, keep],
            np.asarray(share)[:, keep],
            np.asarray(trace)[:, keep],
        )
        r, k, m = s.shape
        rep = np.broadcast_to(reps[:, None, None], s.shape).ravel()
        tt = np.broadcast_to(t[None, :, None], s.shape).ravel()
        task = np.broadcast_to(np.arange(m), s.shape).ravel()
        rec = ctx.recorder
        rec.record(tt, "stimulus", s.ravel(), replicate=rep, task=task)
        rec.record(tt, "active_share", share.ravel(), replicate=rep, task=task)
        if trace.shape[2]:
            shape = trace.shape
            rec.record(
                np.broadcast_to(t[None, :, None, None], shape).ravel(),
                "threshold",
                trace.ravel(),
                replicate=np.broadcast_to(reps[:, None, None, None], shape).ravel(),
                agent=np.broadcast_to(np.arange(shape[2])[:, None], shape).ravel(),
                task=np.broadcast_to(np.arange(m), shape).ravel(),
            )

    def _record_start(self, cfg, ctx, reps, worlds: World) -> None:
        s, share = observe_batch(worlds)
        trace = np.asarray(worlds.theta)[:, None, : cfg.trace_agents]
        self._record_series(
            cfg,
            ctx,
            reps,
            np.zeros(1, np.int64),
            np.asarray(s)[:, None],
            np.asarray(share)[:, None],
            trace,
        )

    def _record_end(
        self, cfg, ctx, reps, worlds: World, kinds: np.ndarray, time: float
    ) -> np.ndarray:
        counts = np.asarray(worlds.counts, dtype=float)
        theta = np.asarray(worlds.theta, dtype=float)
        r, n, m = counts.shape
        rec = ctx.recorder
        rep = np.broadcast_to(reps[:, None, None], counts.shape).ravel()
        agent = np.broadcast_to(np.arange(n)[:, None], counts.shape).ravel()
        task = np.broadcast_to(np.arange(m), counts.shape).ravel()
        cohort = np.broadcast_to(kinds[:, :, None], counts.shape).ravel()
        rec.record(
            time, "acts", counts.ravel(), replicate=rep, agent=agent, task=task, cohort=cohort
        )
        rec.record(
            time,
            "final_threshold",
            theta.ravel(),
            replicate=rep,
            agent=agent,
            task=task,
            cohort=cohort,
        )
        for i, rid in enumerate(reps.tolist()):  # a few numbers per replicate
            dol, ent = specialisation(counts[i])
            niches = emergent_niches(counts[i])["n_niches"] if counts[i].sum() else 0
            rec.record(time, "dol_index", dol, replicate=rid)
            rec.record(time, "task_entropy", ent, replicate=rid)
            rec.record(time, "n_niches", niches, replicate=rid)
        return counts

    # -- the rule engine -------------------------------------------------------------------
    async def _run_rules(self, cfg, ctx: RunContext, p: Params, reps: np.ndarray) -> np.ndarray:
        worlds = _stack(p, cfg.theta_init, reps.size)
        world_keys = ctx.rng.keys("world", reps)
        agent_key = ctx.rng.key("agents")
        ids = (reps[:, None] * cfg.population + np.arange(cfg.population)).astype(np.int32)
        trace = min(cfg.trace_agents, cfg.population)
        lo, hi = CHUNK_BOUNDS
        length = min(cfg.steps, max(lo, min(hi, CHUNK_WORK // (cfg.population * reps.size))))
        state = {"worlds": worlds, "t": 0}  # the world state: what a checkpoint saves
        sim = Scheduler()

        def chunk() -> None:
            t0 = state["t"]
            worlds, (s, share, th) = advance(
                p, state["worlds"], world_keys, agent_key, ids, t0, cfg.steps, length, trace
            )
            done = min(length, cfg.steps - t0)
            times = np.arange(t0 + 1, t0 + done + 1)
            self._record_series(cfg, ctx, reps, times, s[:, :done], share[:, :done], th[:, :done])
            state["worlds"], state["t"] = worlds, t0 + done
            if state["t"] >= cfg.steps:
                sim.stop("steps")

        sim.handle("chunk", chunk)
        batch = int(reps[0])
        saved = ctx.checkpoints.resume(batch, sim)
        if saved is not None:
            state.update(
                worlds=World(**{k: jnp.asarray(v) for k, v in saved["worlds"].items()}),
                t=saved["t"],
            )
        else:
            self._record_start(cfg, ctx, reps, worlds)
            sim.every(float(length), chunk, name="division-of-labour steps")

        def as_data() -> dict:
            w = state["worlds"]
            return {
                "worlds": {f.name: getattr(w, f.name) for f in dataclasses.fields(w)},
                "t": state["t"],
            }

        ctx.checkpoints.attach(batch, sim, as_data)
        await sim.arun()
        kinds = np.full((reps.size, cfg.population), "rules", dtype=object)
        return self._record_end(cfg, ctx, reps, state["worlds"], kinds, float(cfg.steps))

    # -- the population engine -------------------------------------------------------------
    def _cohorts(self, cfg, ctx: RunContext, client) -> dict[str, Callable[[np.ndarray], Any]]:
        """Cohort factories by kind (rules first: cohort 0, as the rule engine assumes)."""
        text = template(
            tasks=cfg.tasks,
            delta=cfg.delta,
            alpha=cfg.alpha,
            quit_prob=cfg.quit_prob,
            reinforcement=cfg.reinforcement,
            xi=cfg.xi,
            phi=cfg.phi,
            theta_min=cfg.theta_min,
            theta_max=cfg.theta_max,
        )
        return {
            "rules": lambda ids: RuleCohort(
                "rules", ids, "threshold", params={"threshold": {"steepness": STEEPNESS}}
            ),
            "learned": lambda ids: LearnedCohort(
                "learned", ids, features=["log_ratio"], actions=2, rule="reinforce",
                lr=cfg.learning_rate, key=ctx.rng.key("learned"),
            ),
            "llm": lambda ids: LLMCohort(
                "llm", ids, client, schema=Work, fallback=FALLBACK, template=text,
                system_prompt=SYSTEM, to_action=lambda m: float(m.work),
            ),
        }  # fmt: skip

    async def _run_population(
        self, cfg, ctx: RunContext, p: Params, reps, kinds, client
    ) -> tuple[np.ndarray, float]:
        """Run one batch of replicates; returns their act counts and the time it ended."""
        n = cfg.population
        gids = (reps[:, None] * n + np.arange(n)).ravel()
        population = build_population(kinds, gids, self._cohorts(cfg, ctx, client))
        numeric = kinds.ravel() != "llm"
        worlds = _stack(p, cfg.theta_init, reps.size)
        world_keys = ctx.rng.keys("world", reps)
        agent_key, learn_key = ctx.rng.key("agents"), ctx.rng.key("learn")
        trace = min(cfg.trace_agents, n)
        self._record_start(cfg, ctx, reps, worlds)
        state = {"worlds": worlds}
        sim = Scheduler()

        async def step() -> None:
            t, worlds = int(sim.now), state["worlds"]
            met, quit, stim, theta = offer_batch(p, worlds, world_keys, t)
            idle = np.asarray(worlds.task).ravel() < 0
            st, th = np.asarray(stim).ravel(), np.asarray(theta).ravel()
            obs = {
                "stimulus": st,
                "threshold": th,
                "log_ratio": np.log1p(st) - np.log1p(th),
                "task": np.asarray(met).ravel(),
                "step": np.full(gids.size, t),
            }
            # Numeric agents decide every step (one batch shape, one compile); only idle
            # agents' decisions count, and only idle LLM agents are asked.
            due = np.flatnonzero(idle | numeric)
            engage = np.zeros(gids.size, np.int32)
            if due.size:
                sub = {k: v[due] for k, v in obs.items()}
                actions = await population.act(gids[due], sub, jax.random.fold_in(agent_key, t))
                engage[due] = np.asarray(actions) > 0.5
            engage &= idle
            chose = np.flatnonzero(idle)
            if chose.size:
                sub = {k: v[chose] for k, v in obs.items()}
                gains = reward(st[chose], th[chose], engage[chose], cfg.theta_max)
                population.learn(
                    gids[chose], sub, engage[chose], gains, jax.random.fold_in(learn_key, t)
                )
            worlds = transition_batch(p, worlds, engage.reshape(reps.size, n), met, quit, t)
            s, share = observe_batch(worlds)
            state["worlds"] = worlds
            if t + 1 >= cfg.steps:
                sim.stop("steps")
            else:
                budget_reached(client, ctx, sim)
            th_trace = np.asarray(worlds.theta[:, :trace])[:, None]  # not the whole (R, N, m)
            s, share = np.asarray(s)[:, None], np.asarray(share)[:, None]
            last = t + 1 if sim.stop_reason else None
            self._record_series(cfg, ctx, reps, np.array([t + 1]), s, share, th_trace, last)

        sim.every(1.0, step, name="division-of-labour step")
        await sim.arun()
        end = sim.now + 1.0  # after the last step (the scheduler is the clock)
        return self._record_end(cfg, ctx, reps, state["worlds"], kinds, end), end

    # -- plots -----------------------------------------------------------------------------
    def plot(
        self, frame: pd.DataFrame, plots_dir: Path, config: DivisionOfLabourConfig
    ) -> list[Path]:
        """One figure: stimuli and task shares over time, thresholds of traced agents, and
        the spread of agents' task entropies (specialists near 0, generalists near 1)."""
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        plots_dir.mkdir(parents=True, exist_ok=True)
        if frame.empty:
            return []
        fig, axes = plt.subplots(2, 2, figsize=(10, 7), dpi=100)
        colours = plt.rcParams["axes.prop_cycle"].by_key()["color"]
        for ax, metric, label in (
            (axes[0, 0], "stimulus", "stimulus s_j"),
            (axes[0, 1], "active_share", "share of agents on task j"),
        ):
            sub = frame[frame["metric"] == metric]
            mean = sub.groupby(["task", "time"])["value"].mean()
            for j, series in mean.groupby(level=0):
                ax.plot(
                    series.index.get_level_values(1),
                    series.values,
                    color=colours[int(j) % len(colours)],
                    label=f"task {int(j)}",
                )
            ax.set_xlabel("step")
            ax.set_ylabel(label)
            ax.legend(fontsize=8, loc="best")
        ax = axes[1, 0]
        sub = frame[(frame["metric"] == "threshold") & (frame["task"] == 0)]
        sub = sub[sub["replicate"] == sub["replicate"].min()]
        for _, series in sub.groupby("agent"):
            ax.plot(series["time"], series["value"], color="tab:blue", alpha=0.5, lw=0.8)
        ax.set_xlabel("step")
        ax.set_ylabel("threshold for task 0")
        ax.set_title("traced agents, first replicate", fontsize=9)
        ax = axes[1, 1]
        acts = frame[frame["metric"] == "acts"]
        if not acts.empty:
            table = acts.pivot_table(
                index=["replicate", "agent"], columns="task", values="value", aggfunc="sum"
            )
            h = task_entropy(table.to_numpy())
            ax.hist(h[np.isfinite(h)], bins=20, range=(0, 1), color="tab:green")
        ax.set_xlabel("task entropy of an agent's acts (0 = specialist)")
        ax.set_ylabel("agents")
        fig.suptitle(
            f"division of labour: {config.population} agents, {config.tasks} tasks, reinforcement={config.reinforcement}"
        )
        fig.tight_layout()
        path = plots_dir / "division_of_labour.png"
        fig.savefig(path)
        plt.close(fig)
        return [path]
