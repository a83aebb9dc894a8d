"""The donor game of LLM societies (Vallinder and Hughes 2024), as in the authors' code.

Each generation, ``population`` agents are split at random into two halves and
play a game of ``rounds`` rounds (see :func:`dynamics.pairings`), then a second game with
the halves' roles swapped; resources and traces reset for each game. Agents are ranked by
their mean final resources over the two games; the top half survive and each survivor's
strategy passes to one newcomer (rule agents: the same share; learned agents: the policy,
mutated; LLM agents: a new strategy written from the survivors' strategies and scores).

All replicates of a batch are rows of one world (row = replicate * N + agent, agent id =
row + first replicate * N), so each round is one observation kernel, one call per cohort
(one LLM request per LLM donor, all in flight together) and one transition kernel.
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

from scenarios.donor_game import prompts
from scenarios.donor_game.config import DonorGameConfig
from scenarios.donor_game.dynamics import (
    LEARNED_FEATURES,
    DonorState,
    flat_trace,
    initial_state,
    observe,
    pairings,
    play_round,
)
from sim_core.experiment import RunContext, Scenario, plot_metrics
from sim_core.scheduler import Scheduler
from society.cohorts import LearnedCohort, RuleCohort
from society.cohorts.learned import reinforce_cohort
from society.cohorts.llm import LLMCohort
from society.driver import budget_reached, drive
from society.fields import KINDS
from society.llm import LLMClient, Request
from society.metrics import donation_fraction, gini
from society.population import build_population, kinds_of, uses_llm

HEADLINE = ("mean_resources", "donation_fraction", "punishment_rate")
# Resources are shown to LLM agents with two decimals, so an answer up to this much above
# what the donor holds means "all of it"; beyond it the offer is invalid (nothing moves).
DISPLAY_TOLERANCE = 0.005


def give_strategy(
    obs: Mapping[str, jax.Array], keys: jax.Array, params: Mapping[str, Any]
) -> jax.Array:
    """Rule agents: give the share ``give_fraction`` of current resources, whoever asks."""
    return jnp.full(keys.shape[:1], params["give_fraction"], jnp.float32)


def units_to_share(units: np.ndarray, held: np.ndarray) -> np.ndarray:
    """Signed units given up (negative: spent punishing) -> signed share of ``held``.

    More than ``held`` (beyond the display tolerance) is an invalid offer, returned as inf.
    """
    u = np.asarray(units, np.float64)
    held = np.asarray(held, np.float64)
    mag = np.abs(u)
    share = np.divide(np.minimum(mag, held), held, out=np.zeros_like(held), where=held > 0)
    share = np.where(mag <= held + DISPLAY_TOLERANCE, share, np.inf)
    return np.where(u < 0, -share, share).astype(np.float32)


class DonorLLMCohort(LLMCohort):
    """LLM donors. Prompts are rendered from the numeric observation by ``render(agent,
    strategy, fields)``; each agent's strategy is its persona (inherited by clones). Answers
    are units, as in the authors' prompts; the world receives them as a signed share."""

    def __init__(
        self,
        name: str,
        agents: np.ndarray,
        client: LLMClient,
        *,
        render: Callable[[int, str, Mapping[str, Any]], str],
        sample_of: Callable[[int], int],
        punishment: bool,
        system_prompt: str,
    ):
        if punishment:
            schema: Any = prompts.DonorPunishAction
            fallback = schema(reasoning="no valid reply", action="donate", amount=0.0)
        else:
            schema = prompts.DonorAction
            fallback = schema(reasoning="no valid reply", amount=0.0)
        super().__init__(
            name,
            agents,
            client,
            schema=schema,
            fallback=fallback,
            template="",
            system_prompt=system_prompt,
            memory_size=0,  # as in the paper: each decision sees its strategy and situation only
            to_action=prompts.signed_units,
            sample_of=sample_of,
        )
        self.render = render

    def messages(self, agent: int, pos: int, fields: Mapping[str, Any]) -> list[dict[str, str]]:
        user = self.render(agent, self.personas[pos], fields)
        return [
            {"role": "system", "content": self.system_prompt},
            {"role": "user", "content": user},
        ]

    def observation_fields(self, obs: Any) -> dict[str, np.ndarray]:
        return flat_trace({k: np.asarray(v) for k, v in dict(obs).items()})

    def finish(self, actions: np.ndarray, fields: Mapping[str, np.ndarray]) -> np.ndarray:
        return units_to_share(actions, fields["resources"])


class _Batch:
    """One batch of replicates: the world, the population and the generation loop."""

    def __init__(
        self, cfg: DonorGameConfig, ctx: RunContext, reps: np.ndarray, client: LLMClient | None
    ):
        self.cfg, self.ctx, self.reps, self.client = cfg, ctx, reps, client
        n = cfg.population
        self.n, self.h, self.b = n, n // 2, len(reps)
        self.rows = self.b * n
        self.offset = int(reps[0]) * n  # replicate batches are contiguous ranges
        kinds = np.concatenate([kinds_of(cfg, ctx.rng.numpy("split", int(r))) for r in reps])
        ids = np.arange(self.rows) + self.offset
        self.system = prompts.system_prompt(
            endowment=cfg.endowment,
            multiplier=cfg.multiplier,
            trace_depth=cfg.trace_depth,
            punishment=cfg.punishment,
            punishment_loss=cfg.punishment_loss,
        )
        self.kind_names = tuple(k for k in KINDS if (kinds == k).any())
        self.pop = build_population(
            kinds, ids, {"rules": self._rules, "learned": self._learned, "llm": self._llm}
        )
        # Names as in the authors' code: "<generation born>_<index among that generation's newcomers>".
        self.born = np.ones(self.rows, np.int64)
        self.index = np.tile(np.arange(1, n + 1), self.b)
        self.halves_rng = [ctx.rng.numpy("halves", int(r)) for r in reps]
        self.act_key = ctx.rng.key("act")
        self.learn_key = ctx.rng.key("learn")
        self.last = {k: np.full(self.b, np.nan) for k in HEADLINE}
        self.gen = 0
        self.generations_done = 0
        self.sim = Scheduler()

    @property
    def t(self) -> int:
        """The round now: the scheduler is the clock (one round per unit of time)."""
        return int(self.sim.now)

    # -- setup -----------------------------------------------------------------------------
    def _rules(self, ids: np.ndarray) -> RuleCohort:
        strategy = {"give": {"give_fraction": self.cfg.give_fraction}}
        return RuleCohort("rules", ids, "give", strategies={"give": give_strategy}, params=strategy)

    def _learned(self, ids: np.ndarray) -> LearnedCohort:
        return reinforce_cohort(
            ids,
            LEARNED_FEATURES,
            learning_rate=self.cfg.learning_rate,
            key=self.ctx.rng.key("learned-init"),
        )

    def _llm(self, ids: np.ndarray) -> DonorLLMCohort:
        return DonorLLMCohort(
            "llm",
            ids,
            self.client,
            render=self.render,
            sample_of=lambda agent: agent // self.n,  # the agent's replicate
            punishment=self.cfg.punishment,
            system_prompt=self.system,
        )

    def _has(self, kind: str) -> bool:
        return kind in self.kind_names

    def kind_of(self, rows: np.ndarray) -> np.ndarray:
        """Kind of the agents in ``rows`` now."""
        return np.asarray(self.kind_names, dtype=object)[self.pop.cohort_of[rows + self.offset]]

    def name(self, row: int) -> str:
        return f"{self.born[row]}_{self.index[row]}"

    def render(self, agent: int, strategy: str, fields: Mapping[str, Any]) -> str:
        """The donor prompt of one LLM agent (called by the LLM cohort, one agent at a time)."""
        cfg = self.cfg
        return prompts.donor_prompt(
            name=self.name(agent - self.offset),
            strategy=strategy,
            generation=self.gen,
            round_no=int(fields["round"]),
            recipient=self.name(int(fields["recipient"])),
            recipient_resources=float(fields["recipient_resources"]),
            trace=prompts.trace_text(fields, cfg.trace_depth, self.name, cfg.punishment_loss),
            resources=float(fields["resources"]),
            multiplier=cfg.multiplier,
            punishment=cfg.punishment,
            punishment_loss=cfg.punishment_loss,
        )

    async def _strategies(
        self, rows: np.ndarray, fitness: np.ndarray | None, survivors: np.ndarray | None
    ) -> None:
        """New LLM agents in ``rows`` write their strategies (generation 1: from the rules
        alone; later: from the strategies and scores of their replicate's LLM survivors)."""
        if not self._has("llm"):
            return
        rows = rows[self.kind_of(rows) == "llm"]
        if rows.size == 0:
            return
        llm = self.pop.cohort("llm")
        requests = []
        # One prompt per new LLM agent: the accepted Python loop of LLM cohorts.
        for row in rows.tolist():
            advice = None
            if survivors is not None and fitness is not None:
                mine = survivors[row // self.n]
                mine = mine[self.kind_of(mine) == "llm"]
                mine = mine[np.argsort(-fitness[mine], kind="stable")]
                pos = llm.local(mine + self.offset)
                advice = [
                    (self.name(s), float(fitness[s]), llm.personas[p])
                    for s, p in zip(mine.tolist(), pos.tolist(), strict=True)
                ]
            user = prompts.strategy_prompt(self.name(row), advice)
            requests.append(
                Request(
                    [{"role": "system", "content": self.system}, {"role": "user", "content": user}],
                    schema=prompts.StrategyReply,
                    fallback=prompts.StrategyReply(reasoning="", strategy=""),
                    sample=(row + self.offset) // self.n,  # independent across replicates
                    agent=row + self.offset,
                    cohort="llm",
                )
            )
        done = await self.client.complete_many(requests)
        for p, c in zip(llm.local(rows + self.offset).tolist(), done, strict=True):
            text = c.parsed.strategy if c.parsed is not None else ""
            llm.personas[p] = " ".join(text.split())[: prompts.MAX_STRATEGY_CHARS]

    # -- checkpoints -------------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        """Everything a round changes, as checkpoint data: the game's world, the generation's
        pairings and outcomes so far, names, the halves' generators and the population."""
        return {
            "world": {f.name: getattr(self.state, f.name) for f in dataclasses.fields(DonorState)},
            "decisions": self.decisions,
            "donors": self.donors,
            "recipients": self.recipients,
            "outcomes": self.outcomes,
            "finals": self.finals,
            "gen": self.gen,
            "generations_done": self.generations_done,
            "last": self.last,
            "born": self.born,
            "index": self.index,
            "halves_rng": [rng.bit_generator.state for rng in self.halves_rng],
            "population": self.pop.state_dict(),
        }

    def load_state_dict(self, saved: dict[str, Any]) -> None:
        """Put back what :meth:`state_dict` saved (in a batch built afresh, same config)."""
        self.state = DonorState(**{k: jnp.asarray(v) for k, v in saved["world"].items()})
        self.decisions = [tuple(d) for d in saved["decisions"]]
        self.donors, self.recipients = saved["donors"], saved["recipients"]
        self.outcomes, self.finals = list(saved["outcomes"]), list(saved["finals"])
        self.gen, self.generations_done = int(saved["gen"]), int(saved["generations_done"])
        self.last = dict(saved["last"])
        self.born, self.index = saved["born"].copy(), saved["index"].copy()
        for rng, state in zip(self.halves_rng, saved["halves_rng"], strict=True):
            rng.bit_generator.state = state
        self.pop.load_state_dict(saved["population"])

    # -- the run ---------------------------------------------------------------------------
    async def run(self) -> None:
        checkpoints, batch = self.ctx.checkpoints, int(self.reps[0])
        self.sim.handle("round", self.step)
        saved = checkpoints.resume(batch, self.sim)
        if saved is not None:
            self.load_state_dict(saved)
        else:
            await self._strategies(np.arange(self.rows), None, None)
            if budget_reached(self.client, self.ctx, self.sim):
                return
            self.sim.every(1.0, self.step, name="donor-game round")
        checkpoints.attach(batch, self.sim, self.state_dict)
        await self.sim.arun()

    async def step(self) -> None:
        """One round of one game: observe, act (all cohorts), transition."""
        cfg = self.cfg
        per_gen = 2 * cfg.steps
        g, rest = divmod(self.t, per_gen)
        game, rnd = divmod(rest, cfg.steps)
        if rest == 0:
            self._begin_generation(g)
        if rnd == 0:
            self.state = initial_state(self.rows, cfg.trace_depth, cfg.endowment)
            self.decisions: list[tuple] = []
        d, r = (self.donors, self.recipients) if game == 0 else (self.recipients, self.donors)
        d, r = d[rnd], r[rnd]
        round_no = np.int32(rnd + 1)
        obs = jax.device_get(observe(self.state, d, r, round_no, np.float32(cfg.endowment)))
        key = jax.random.fold_in(self.act_key, self.t)
        actions = await self.pop.act(d + self.offset, obs, key)
        self.state, out = play_round(
            self.state,
            d,
            r,
            jnp.asarray(actions, jnp.float32),
            round_no,
            np.float32(cfg.multiplier),
            np.float32(cfg.punishment_loss),
            punishment=cfg.punishment,
        )
        self.outcomes.append(jax.device_get(out))
        if self._has("learned") and cfg.learning_rate > 0:
            self.decisions.append((d, obs, np.asarray(actions), np.asarray(out["held"])))
        if rnd == cfg.steps - 1:
            self._end_game(game)
        if rest == per_gen - 1:
            await self._end_generation(g)
        if self.t + 1 == cfg.generations * per_gen:
            self.sim.stop("done")
        else:
            budget_reached(self.client, self.ctx, self.sim)

    def _begin_generation(self, g: int) -> None:
        self.gen = g + 1
        perm = np.stack([rng.permutation(self.n) for rng in self.halves_rng])
        rows = perm + (np.arange(self.b) * self.n)[:, None]
        d, r = pairings(rows[:, : self.h], rows[:, self.h :], self.cfg.steps)
        self.donors = d.reshape(self.cfg.steps, -1).astype(np.int32)
        self.recipients = r.reshape(self.cfg.steps, -1).astype(np.int32)
        self.outcomes: list[dict[str, np.ndarray]] = []
        self.finals: list[np.ndarray] = []

    def _end_game(self, game: int) -> None:
        final = np.asarray(self.state.resources, np.float64)
        self.finals.append(final)
        if not self._has("learned") or not self.decisions:
            return
        idx = self.kind_names.index("learned")
        base = jax.random.fold_in(self.learn_key, self.t)
        # REINFORCE on returns: each donation is credited with the change in the donor's
        # resources from just before it to the end of the game. One call per round.
        for k, (d, obs, actions, held) in enumerate(self.decisions):
            mask = self.pop.cohort_of[d + self.offset] == idx
            if mask.any():
                feats = {f: obs[f][mask] for f in LEARNED_FEATURES}
                ret = (final[d] - held)[mask]
                self.pop.learn(
                    d[mask] + self.offset, feats, actions[mask], ret, jax.random.fold_in(base, k)
                )

    async def _end_generation(self, g: int) -> None:
        cfg, ctx, b, n = self.cfg, self.ctx, self.b, self.n
        finals = np.stack(self.finals)  # (2 games, rows)
        out = {
            k: np.stack([o[k] for o in self.outcomes]).reshape(2 * cfg.steps, b, self.h)
            for k in self.outcomes[0]
        }
        per_rep = finals.reshape(2, b, n)
        values = {
            "mean_resources": per_rep.mean(axis=(0, 2)),
            "donation_fraction": np.array(
                [self._donation_fraction(out["given"][:, i], out["held"][:, i]) for i in range(b)]
            ),
            "punishment_rate": out["punished"].mean(axis=(0, 2)),
        }
        t = float(g + 1)
        rec = ctx.recorder
        for k, v in values.items():
            rec.record(t, k, v, replicate=self.reps)
        # Units given per agent per game: total resources grow by (multiplier - 1) times it.
        given = out["given"].sum(axis=(0, 2)) / (2 * n)
        rec.record(t, "given_per_agent", given, replicate=self.reps)
        rec.record(
            t,
            "gini",
            np.array([gini(per_rep[:, i].ravel()) for i in range(b)]),
            replicate=self.reps,
        )
        if self._has("llm"):
            rec.record(t, "invalid_rate", out["invalid"].mean(axis=(0, 2)), replicate=self.reps)
        rows = np.arange(self.rows)
        kinds = self.kind_of(rows).reshape(b, n)
        if cfg.agents == "mixed":
            for kind in KINDS:
                mask = kinds == kind
                rec.record(t, f"share.{kind}", mask.mean(axis=1), replicate=self.reps)
                has = mask.any(axis=1)
                if has.any():
                    mean = (per_rep.mean(axis=0) * mask).sum(axis=1) / np.maximum(
                        mask.sum(axis=1), 1
                    )
                    rec.record(t, f"mean_resources.{kind}", mean[has], replicate=self.reps[has])
        self.last = values
        self.generations_done = g + 1
        if g < cfg.generations - 1:
            await self._select(g, finals.mean(axis=0))

    @staticmethod
    def _donation_fraction(given: np.ndarray, held: np.ndarray) -> float:
        """Mean share of their resources that donors gave (society.metrics.donation_fraction
        with the resources held as the endowment); donors holding nothing had no choice."""
        ok = held > 0
        return donation_fraction(given[ok], held[ok]) if ok.any() else float("nan")

    async def _select(self, g: int, fitness: np.ndarray) -> None:
        """Top half survive; survivor i's strategy passes to the newcomer in dead slot i."""
        cfg, n, h = self.cfg, self.n, self.h
        order = np.argsort(-fitness.reshape(self.b, n), axis=1, kind="stable")
        base = (np.arange(self.b) * n)[:, None]
        survivors, dead = order[:, :h] + base, order[:, h:] + base
        if self._has("learned") and cfg.mutation > 0:
            # Per replicate, so the mutation noise of learned newcomers comes from the
            # replicate's own stream whatever the batching (one fork call per replicate).
            for i, rep in enumerate(self.reps.tolist()):
                key = jax.random.fold_in(self.ctx.rng.key("select", rep), g)
                self.pop.remove(dead[i] + self.offset)
                self.pop.fork(
                    survivors[i] + self.offset,
                    dead[i] + self.offset,
                    key=key,
                    mutation=cfg.mutation,
                    time=float(self.t),
                )
        else:  # exact copies: one call for the whole batch
            self.pop.remove(dead.ravel() + self.offset)
            self.pop.fork(
                survivors.ravel() + self.offset,
                dead.ravel() + self.offset,
                key=self.ctx.rng.key("select"),
                time=float(self.t),
            )
        self.born[dead] = g + 2
        self.index[dead] = np.arange(1, h + 1)
        await self._strategies(dead.ravel(), fitness, survivors)


class DonorGame(Scenario):
    """Vallinder and Hughes (2024): cultural evolution of cooperation in the donor game."""

    name = "donor-game"
    Config = DonorGameConfig
    headline = HEADLINE
    labels = {"agent": int, "cohort": str}
    checkpointing = True  # world, generation so far, halves' generators, population, queue

    def horizon(self, config: DonorGameConfig) -> tuple[float, str] | None:
        """Generations: rows are recorded once per generation (time = generation)."""
        return float(config.generations), "generations"

    def run(self, cfg: DonorGameConfig, ctx: RunContext) -> Mapping[str, np.ndarray]:
        async def batch(reps: np.ndarray, client: LLMClient | None) -> tuple[dict, float]:
            done = ctx.checkpoints.finished(int(reps[0]))  # a batch finished before a resume
            if done is None:
                b = _Batch(cfg, ctx, reps, client)
                await b.run()
                done = (b.last, float(b.generations_done))
                ctx.checkpoints.finish(int(reps[0]), done)
            last, end = done
            return {k: np.asarray(v) for k, v in last.items()}, float(end)

        return drive(cfg, ctx, batch, llm=uses_llm(cfg), agents_per_replicate=cfg.population)

    def plot(self, frame: pd.DataFrame, plots_dir: Path, config: DonorGameConfig) -> list[Path]:
        """One PNG per per-generation metric against the generation (time = generation)."""
        if frame.empty:
            return []
        metrics = [m for m in sorted(frame["metric"].unique()) if not m.startswith("llm_")]
        return plot_metrics(frame, plots_dir, metrics)
