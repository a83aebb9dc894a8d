"""The epidemic scenario: SIR/SEIR with behaviour, driven by the scheduler one day per moment.

All replicates of a batch are one population (agent id ``replicate * N + i``): each day
every cohort acts once for the agents of the replicates where the epidemic is still going
(someone exposed or infectious), all contact levels are applied at once by the compiled,
replicate-vmapped transition of ``dynamics.py``, and agents get the day's reward
``-isolation_cost * (1 - w) - infection_cost * [infected today]`` (learned agents learn
from it, per-agent LLM agents remember it). A replicate whose epidemic is over stops acting
and recording, so results do not depend on how replicates are batched. A batch of rule
agents only (periods=chain) runs many days per compiled call (``_run_days``: the same keys,
states and rows as one call per day) and one scheduler event per chunk of days.

Rows (time = day): ``susceptible``, ``exposed``, ``infectious``, ``recovered`` (shares),
``incidence`` (share infected that day), ``contact`` (mean contact level, label ``kind``),
``llm_calls`` (requests an LLM cohort made that day); at the end ``attack_rate`` (also per
``kind``), ``peak_prevalence``, ``peak_day``, ``mean_contact`` and the LLM accounting
(``llm_*``, replicate -1: the whole run).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from functools import partial
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pandas as pd

from scenarios.epidemic import prompts
from scenarios.epidemic.config import EpidemicConfig
from scenarios.epidemic.dynamics import (
    E,
    I,
    Params,
    R,
    S,
    advance_day,
    initial_world,
    make_params,
    observe,
)
from sim_core.errors import ConfigError
from sim_core.experiment import RunContext, Scenario
from sim_core.graph import Neighbours
from sim_core.scheduler import Scheduler, batched
from society.cohorts import Cohort, LearnedCohort, LLMCohort, RuleCohort, parse_mix
from society.cohorts.learned import reinforce_cohort
from society.cohorts.rules import _decide
from society.driver import budget_reached, drive
from society.fields import KINDS
from society.llm import LLMClient
from society.llm.archetypes import Archetypes
from society.population import build_population, kinds_of, uses_llm
from society.topology import make_topology

HEADLINE = ("attack_rate", "peak_prevalence", "peak_day", "mean_contact")
FEATURES = ["symptomatic", "recovered_known", "local_prevalence", "global_prevalence"]
COMPARTMENTS = ("susceptible", "exposed", "infectious", "recovered")
# Batches of rule agents only (periods=chain) run several days per compiled call: the same
# draws, states and rows as one call per day (tests switch this off to compare the two).
FUSE_DAYS = True
CHUNK_WORK = 2_000_000  # agent-days per fused call at most (its per-day contact output)
MAX_CHUNK_DAYS = 1024
# Observation fields each kind of agent reads (only these are pulled to the host each day;
# rule agents: those of their strategies). "day" and "degree" are host constants (LLM agents).
DEVICE_FIELDS = (
    "symptomatic",
    "recovered_known",
    "local_prevalence",
    "global_prevalence",
    "global_change",
    "prevalence_seen",
)
NEEDS = {
    "learned": tuple(FEATURES),
    "llm": (
        "symptomatic",
        "recovered_known",
        "local_prevalence",
        "global_prevalence",
        "global_change",
        "day",
        "degree",
    ),
}


# -- rule behaviours (vectorised over the due agents) -------------------------------------------
def _none(obs, keys, params):
    return jnp.ones(keys.shape[:1], jnp.float32)


def _isolate_when_sick(obs, keys, params):
    return jnp.where(jnp.asarray(obs["symptomatic"]) > 0, 0.0, 1.0).astype(jnp.float32)


def _prevalence_threshold(obs, keys, params):
    sick = jnp.asarray(obs["symptomatic"]) > 0
    high = jnp.asarray(obs["prevalence_seen"]) > params["threshold"]
    return jnp.where(sick, 0.0, jnp.where(high, params["reduced"], 1.0)).astype(jnp.float32)


# Config names -> strategy names ("threshold" is taken by the rule library's responder).
BEHAVIOUR_STRATEGY = {
    "none": "none",
    "isolate-when-sick": "isolate-when-sick",
    "threshold": "prevalence-threshold",
}
STRATEGIES = {
    "none": _none,
    "isolate-when-sick": _isolate_when_sick,
    "prevalence-threshold": _prevalence_threshold,
}
# Observation fields each strategy reads (only those of the strategies in play are pulled).
STRATEGY_NEEDS = {
    "none": (),
    "isolate-when-sick": ("symptomatic",),
    "prevalence-threshold": ("symptomatic", "prevalence_seen"),
}


def status_code(obs: Mapping[str, np.ndarray]) -> np.ndarray:
    """Health as the agent knows it: 0 no symptoms, 1 ill with symptoms, 2 recovered after them."""
    return np.where(obs["symptomatic"] > 0, 1, np.where(obs["recovered_known"] > 0, 2, 0))


# -- LLM agents ----------------------------------------------------------------------------------
class ArchetypeLLMCohort(Cohort):
    """LLM agents as archetypes (AgentTorch): each day, one request per distinct profile
    (replicate, known health, local and town prevalence buckets, trend) and sample, fanned
    out to the profile's agents as arrays. The replicate is part of the profile so that
    replicates draw independently; the prompt itself does not show it."""

    is_async = True

    def __init__(
        self,
        name: str,
        agents: np.ndarray,
        client: LLMClient,
        *,
        system: str,
        n_agents: int,
        n_samples: int,
        graph: bool,
    ):
        super().__init__(name, agents)
        self.client, self.system, self.n_agents = client, system, n_agents
        self.n_samples, self.graph = n_samples, graph
        self.failures = 0
        self.last_calls = 0

    def render(self, day: int, profile: np.ndarray) -> list[dict[str, str]]:
        _, status, local, town, tr = (int(x) for x in profile)
        user = prompts.situation(
            day=day,
            status=status,
            contacts="Among the people you meet regularly" if self.graph else None,
            local=prompts.BUCKET_TEXT[local],
            town=prompts.BUCKET_TEXT[town],
            trend_code=tr,
        )
        return [{"role": "system", "content": self.system}, {"role": "user", "content": user}]

    async def aact(self, agents: np.ndarray, obs: Any, key: jax.Array) -> np.ndarray:
        agents = np.asarray(agents, np.int64)
        obs = {k: np.asarray(v) for k, v in dict(obs).items()}
        rows = np.stack(
            [
                agents // self.n_agents,
                status_code(obs),
                prompts.bucket(obs["local_prevalence"]),
                prompts.bucket(obs["global_prevalence"]),
                prompts.trend(obs["global_change"], obs["global_prevalence"]),
            ],
            axis=1,
        )
        seed = int(jax.random.randint(key, (), 0, 2**31 - 1))
        # Each agent's sample depends on (day's seed, agent id) only, not on the batch.
        arch = Archetypes.from_profiles(rows, n_samples=self.n_samples, seed=seed, agents=agents)
        day = int(obs["day"][0])
        requests = arch.requests(
            lambda prof: self.render(day, prof),
            schema=prompts.ContactChoice,
            fallback=prompts.FALLBACK,
            cohort=self.name,
        )
        rep = arch.profiles[arch.group_profile, 0]
        requests = [
            dataclasses.replace(r, sample=int(g) * self.n_samples + r.sample)
            for r, g in zip(requests, rep.tolist(), strict=True)
        ]
        done = await self.client.complete_many(requests)
        self.last_calls = len(done)
        self.failures += sum(not c.ok for c in done)
        contact = np.array(
            [(c.parsed or prompts.FALLBACK).contact for c in done], dtype=np.float64
        )  # a loop over groups, not agents
        return arch.fan_out(contact)


class PerAgentLLMCohort(LLMCohort):
    """One LLM call per agent per day with exact numbers and a short memory of its choices
    and their costs (``llm_archetypes=false``; for small populations)."""

    def __init__(self, name, agents, client, *, system: str, graph: bool, memory: int):
        super().__init__(
            name,
            agents,
            client,
            schema=prompts.ContactChoice,
            fallback=prompts.FALLBACK,
            template="{prompt}",
            system_prompt=system,
            memory_size=memory,
            to_action=lambda m: m.contact,
            sample_of=lambda agent: agent,  # every agent draws its own reply
        )
        self.graph = graph
        self.last_calls = 0

    def observation_fields(self, obs: Any) -> dict[str, np.ndarray]:
        obs = {k: np.asarray(v) for k, v in dict(obs).items()}
        status = status_code(obs)
        tr = prompts.trend(obs["global_change"], obs["global_prevalence"])
        texts = []
        for i in range(status.size):  # one prompt per LLM agent: the accepted loop
            deg = int(obs["degree"][i])
            texts.append(
                prompts.situation(
                    day=int(obs["day"][i]),
                    status=int(status[i]),
                    contacts=prompts.contacts_phrase(deg) if self.graph else None,
                    local=str(int(round(float(obs["local_prevalence"][i]) * deg))),
                    town=prompts.percent(float(obs["global_prevalence"][i])),
                    trend_code=int(tr[i]),
                )
            )
        self.last_calls = status.size
        return {"prompt": np.asarray(texts, dtype=str)}


# -- compiled parts of a day ---------------------------------------------------------------------
@partial(jax.jit, static_argnames=("fields", "seen"))
def _observe_day(
    p: Params, nb: Neighbours | None, health, sym, prev_global, act_key, day, *, fields, seen
):
    """The day's observations as one (len(fields), replicates * N) array (one transfer),
    the compartment shares (replicates, 4), the town prevalence (replicates,) and the
    day's act key (folded here: a separate fold_in is a dispatch as dear as a kernel).
    ``prev_global`` is yesterday's town prevalence (NaN on the first day: no change)."""
    obs, shares = observe(p, nb, health, sym)
    glob = obs["global_prevalence"][:, 0]
    change = glob - jnp.where(jnp.isnan(prev_global), glob, prev_global)
    obs["global_change"] = jnp.broadcast_to(change[:, None], health.shape)
    obs["prevalence_seen"] = obs[f"{seen}_prevalence"]
    rows = [obs[k].astype(jnp.float32).ravel() for k in fields]
    stacked = jnp.stack(rows) if rows else jnp.zeros((0, health.size), jnp.float32)
    return stacked, shares, glob, jax.random.fold_in(act_key, day)


@jax.jit
def _advance(p: Params, nb: Neighbours | None, keys, day, health, sym, w, learn_key):
    """One day of the chain, each replicate's number of new infections and the day's
    learn key."""
    health, sym, new = advance_day(p, nb, keys, day, health, sym, w)
    count = new.sum(axis=1, dtype=jnp.int32)
    return health, sym, new, count, jax.random.fold_in(learn_key, day)


@partial(jax.jit, static_argnames=("fields", "seen", "table", "length"))
def _run_days(
    p: Params, nb: Neighbours | None, world_keys, health, sym, prev_global, act_key, day0,
    n_days, steps, ids, sid, params, min_contact, *, fields, seen, table, length,
):  # fmt: skip
    """Up to ``n_days`` days from ``day0`` for a batch of rule agents only, each exactly as
    the per-day path runs it (``_observe_day``, the rule cohort's ``_decide`` with its key,
    the clip to [min_contact, 1], ``advance_day``). A day with no replicate active, or day
    ``steps``, is observed only and ends the loop. Returns the state after the last day
    run, yesterday's town prevalence, and per day (``length`` rows; those after the end
    are zeros) the compartment shares (b, 4), the new infections (b,) and the contact
    levels (b, N)."""
    b, n = health.shape

    def day_of(carry):
        j, (health, sym, prev), _, (shares_out, count_out, w_out) = carry
        day = day0 + j
        stacked, shares, glob, key = _observe_day(
            p, nb, health, sym, prev, act_key, day, fields=fields, seen=seen
        )
        go = (day < steps) & ((shares[:, E] + shares[:, I]) > 0).any()
        obs = {k: stacked[i] for i, k in enumerate(fields)}
        raw = _decide(obs, ids, sid, params, jax.random.fold_in(key, 0), table)
        w = jnp.clip(raw, min_contact, 1.0).astype(jnp.float32).reshape(b, n)
        h, s, new = advance_day(p, nb, world_keys, day, health, sym, w)
        # The stop day is observed only: its state stays (its draws are not used).
        state = (jnp.where(go, h, health), jnp.where(go, s, sym), jnp.where(go, glob, prev))
        outs = (
            shares_out.at[j].set(shares),
            count_out.at[j].set(new.sum(axis=1, dtype=jnp.int32)),
            w_out.at[j].set(w),
        )
        return j + 1, state, go, outs

    outs = (
        jnp.zeros((length, b, 4), jnp.float32),
        jnp.zeros((length, b), jnp.int32),
        jnp.zeros((length, b, n), jnp.float32),
    )
    init = (jnp.zeros((), jnp.int32), (health, sym, prev_global), jnp.ones((), bool), outs)
    _, (health, sym, prev), _, (shares, count, w) = jax.lax.while_loop(
        lambda c: c[2] & (c[0] < n_days), day_of, init
    )
    return health, sym, prev, shares, count, w


# -- one batch of replicates ---------------------------------------------------------------------
class _Batch:
    def __init__(
        self,
        cfg: EpidemicConfig,
        ctx: RunContext,
        reps: np.ndarray,
        p: Params,
        nb: Neighbours | None,
        degree: np.ndarray,
        client: LLMClient | None,
        system: str,
    ):
        self.cfg, self.ctx, self.reps, self.p, self.nb, self.client = cfg, ctx, reps, p, nb, client
        n, b = cfg.population, reps.size
        self.n, self.b = n, b
        self.gids = (reps[:, None] * n + np.arange(n)).ravel()
        self.kinds = np.concatenate([kinds_of(cfg, ctx.rng.numpy("split", int(r))) for r in reps])
        self.kind_names = tuple(k for k in KINDS if (self.kinds == k).any())
        self.rule_fields: tuple[str, ...] = ()  # set by the rule cohort
        makers = {
            "rules": self._rules,
            "learned": self._learned,
            "llm": partial(self._llm, system=system),
        }
        try:
            self.pop = build_population(self.kinds, self.gids, makers)
        except ValueError as exc:  # a bad behaviour mix is user input
            raise ConfigError(str(exc)) from None
        cohorts = self.pop.cohorts
        # Only cohorts that override learn() need the day's rewards (rule and archetype
        # cohorts do not learn), so the reward arrays are built only for them.
        self.learns = any(type(c).learn is not Cohort.learn for c in cohorts)
        self.numeric = self.kinds != "llm"
        self.all_numeric = bool(self.numeric.all())
        needs = {f for k in self.kind_names for f in NEEDS.get(k, self.rule_fields)}
        self.fields = tuple(f for f in DEVICE_FIELDS if f in needs)
        self.host_fields = tuple(f for f in ("day", "degree") if f in needs)
        # Agents per (replicate, kind) and the slot of each agent in a (b, kinds) table.
        n_kinds = len(self.kind_names)
        kind_idx = np.zeros(b * n, np.int64)
        for i, kind in enumerate(self.kind_names):
            kind_idx[self.kinds == kind] = i
        self.kind_slot = np.repeat(np.arange(b), n) * n_kinds + kind_idx
        self.kind_count = np.bincount(self.kind_slot, minlength=b * n_kinds).reshape(b, n_kinds)
        self.degree = np.tile(degree.astype(np.float32), b)
        self.world_keys = ctx.rng.keys("world", reps)
        self.act_key, self.learn_key = ctx.rng.key("act"), ctx.rng.key("learn")
        worlds = [
            initial_world(ctx.rng.numpy("init", int(r)), n, cfg.seeds(), cfg.symptomatic)
            for r in reps
        ]
        self.health = jnp.asarray(np.stack([h for h, _ in worlds]))
        self.sym = jnp.asarray(np.stack([s for _, s in worlds]))
        self.was_active = np.ones(b, bool)
        self.prev_global = jnp.full(b, jnp.nan, jnp.float32)  # NaN: no day before
        self.contact_sum = np.zeros((b, n_kinds))  # summed contact levels per (replicate, kind)
        self.active_days = np.zeros(b)
        self.peak = np.zeros(b)
        self.peak_day = np.zeros(b)
        self.sim = Scheduler()
        self.fused = FUSE_DAYS and self.kind_names == ("rules",) and cfg.periods == "chain"
        if self.fused:
            self._fuse_setup()
        # periods=drawn: latent and infectious periods drawn per agent at infection, and the
        # transitions scheduled as batched events (one call per day for all agents due).
        self.drawn = cfg.periods == "drawn"
        self.transitions: list[tuple[float, str, int]] = []  # (time, kind, agents) per call
        if self.drawn:
            self.q_onset = -np.expm1(-cfg.incubation_rate)
            self.q_recover = -np.expm1(-cfg.recovery_rate)
            self.period_rngs = [ctx.rng.numpy("periods", int(r)) for r in reps]
            self.onset = self.sim.handle("epidemic onset", batched(self._onset))
            self.recover = self.sim.handle("epidemic recovery", batched(self._recover))
            # Day-0 seeds are infectious already: as if infected the day before, no latency.
            self._schedule(np.asarray(self.health) == I, -1, latent=False)

    def _rules(self, ids: np.ndarray) -> RuleCohort:
        cfg, ctx = self.cfg, self.ctx
        # A behaviour mix is drawn per replicate, over that replicate's rule agents.
        mix = np.concatenate(
            [
                parse_mix(
                    cfg.behaviour,
                    int((ids // self.n == r).sum()),
                    ctx.rng.numpy("behaviour", int(r)),
                )
                for r in self.reps
            ]
        )
        names = [BEHAVIOUR_STRATEGY[m] for m in mix.tolist()]
        self.rule_fields = tuple({f for s in set(names) for f in STRATEGY_NEEDS[s]})
        params = {
            "prevalence-threshold": {"threshold": cfg.threshold, "reduced": cfg.reduced_contact}
        }
        return RuleCohort("rules", ids, names, strategies=STRATEGIES, params=params)

    def _learned(self, ids: np.ndarray) -> LearnedCohort:
        return reinforce_cohort(
            ids,
            FEATURES,
            learning_rate=self.cfg.learning_rate,
            key=self.ctx.rng.key("learned-init"),
        )

    def _llm(self, ids: np.ndarray, system: str) -> Cohort:
        cfg, graph = self.cfg, self.nb is not None
        if cfg.llm_archetypes:
            return ArchetypeLLMCohort(
                "llm", ids, self.client, system=system, n_agents=self.n,
                n_samples=cfg.llm_samples, graph=graph,
            )  # fmt: skip
        return PerAgentLLMCohort(
            "llm", ids, self.client, system=system, graph=graph, memory=cfg.llm_memory
        )

    @property
    def day(self) -> int:
        """The day now: the scheduler is the clock (one day per unit of time)."""
        return int(self.sim.now)

    # -- periods=drawn: transitions as scheduled events --------------------------------------
    def _schedule(self, infected: np.ndarray, day: int, *, latent: bool) -> None:
        """Draw the periods of agents infected during ``day`` ((b, N) mask) and schedule
        their onset (SEIR) and recovery. Laws as in the chain: an agent infected on day d is
        infectious from day d + L + 1 for D days, L ~ Geometric(q_onset) (0 in SIR) and
        D ~ Geometric(q_recover), so its transitions land on the chain's days."""
        ids, onset, recover = [], [], []
        for i, rng in enumerate(self.period_rngs):  # per replicate: draws do not depend on batching
            idx = np.flatnonzero(infected[i])
            if not idx.size:
                continue
            lat = rng.geometric(self.q_onset, idx.size) if latent else np.zeros(idx.size, np.int64)
            dur = rng.geometric(self.q_recover, idx.size)
            ids.append(i * self.n + idx)
            onset.append(day + lat + 1)
            recover.append(day + lat + dur + 1)
        if not ids:
            return
        ids = np.concatenate(ids)
        if latent:
            self._at_times(self.onset, np.concatenate(onset), ids)
        self._at_times(self.recover, np.concatenate(recover), ids)

    def _at_times(self, handler, times: np.ndarray, ids: np.ndarray) -> None:
        """One event per distinct day (not per agent), before that day's step; events of
        one handler that meet on a day are merged by the scheduler into one call."""
        keep = times <= self.cfg.steps
        times, ids = times[keep], ids[keep]
        if not times.size:
            return
        order = np.argsort(times, kind="stable")
        days, first = np.unique(times[order], return_index=True)
        for day, group in zip(days.tolist(), np.split(ids[order], first[1:]), strict=True):
            self.sim.at(float(day), handler, agents=group, priority=-1)

    def _set_health(self, agents: np.ndarray, code: int, kind: str) -> None:
        health = np.array(self.health).reshape(-1)
        health[agents] = code
        self.health = jnp.asarray(health.reshape(self.b, self.n))
        self.transitions.append((self.sim.now, kind, int(agents.size)))

    def _onset(self, agents: np.ndarray) -> None:
        self._set_health(agents, I, "onset")

    def _recover(self, agents: np.ndarray) -> None:
        self._set_health(agents, R, "recovery")

    async def run(self, batch: int | None = None) -> None:
        """Run the batch's days; with ``batch`` (its checkpoint id), resume it from the run's
        checkpoint if it stopped inside it, and save checkpoints as it goes."""
        sim = self.sim
        # Every handler that can be queued at a checkpoint (the drawn transitions: __init__).
        sim.handle("epidemic day", self.step)
        sim.handle("epidemic days", self.chunk)
        sim.handle("epidemic end", sim.stop)
        checkpoints = self.ctx.checkpoints if batch is not None else None
        saved = checkpoints.resume(batch, sim) if checkpoints is not None else None
        if saved is not None:
            self.load_state(saved)
        elif self.fused:
            sim.at(0.0, self.chunk, name="epidemic days")
        else:
            sim.every(1.0, self.step, name="epidemic day")
        if checkpoints is not None:
            checkpoints.attach(batch, sim, self.state)
        await sim.arun()

    # -- checkpoints ---------------------------------------------------------------------------
    def state(self) -> dict[str, Any]:
        """Everything the days change, as checkpoint data (the clock and the queue, with the
        drawn transitions' agents, are saved with the scheduler)."""
        out: dict[str, Any] = {
            "health": self.health, "sym": self.sym, "prev_global": self.prev_global,
            "was_active": self.was_active, "contact_sum": self.contact_sum,
            "active_days": self.active_days, "peak": self.peak, "peak_day": self.peak_day,
        }  # fmt: skip
        if not self.fused:  # learned agents' policies and optimisers, LLM agents' memories
            out["population"] = self.pop.state_dict()
        if self.drawn:  # the period draws still to come, and the transitions so far
            out["period_rngs"] = [rng.bit_generator.state for rng in self.period_rngs]
            out["transitions"] = list(self.transitions)
        return out

    def load_state(self, saved: dict[str, Any]) -> None:
        """Restore :meth:`state` into a batch built afresh with the same config and seed."""
        self.health, self.sym = jnp.asarray(saved["health"]), jnp.asarray(saved["sym"])
        self.prev_global = jnp.asarray(saved["prev_global"])
        self.was_active = np.asarray(saved["was_active"])
        for name in ("contact_sum", "active_days", "peak", "peak_day"):
            setattr(self, name, np.asarray(saved[name]))
        if "population" in saved:
            self.pop.load_state_dict(saved["population"])
        if self.drawn:
            for rng, st in zip(self.period_rngs, saved["period_rngs"], strict=True):
                rng.bit_generator.state = st
            self.transitions = [tuple(x) for x in saved["transitions"]]

    # -- rule agents only: several days per compiled call ----------------------------------
    def _fuse_setup(self) -> None:
        """The rule cohort's decision inputs, as its ``act`` builds them for every agent
        (they do not change during a run), and the days per call."""
        cohort = self.pop.cohort("rules")
        assert isinstance(cohort, RuleCohort) and self.pop.cohorts.index(cohort) == 0
        sid = cohort.sid[cohort.local(self.gids)]
        present = tuple(
            cohort.names[i] for i in np.flatnonzero(np.bincount(sid, minlength=len(cohort.names)))
        )
        self.rule_inputs = (
            self.gids.astype(np.int32),
            sid,
            {s: {k: np.float32(v) for k, v in cohort.params.get(s, {}).items()} for s in present},
        )
        self.rule_table = tuple((s, cohort._index[s], cohort._fns[s]) for s in present)
        bound = max(1, min(MAX_CHUNK_DAYS, CHUNK_WORK // (self.b * self.n)))
        want = min(bound, self.cfg.steps + 1)  # days 0..steps: one call when they fit
        # Rounded up to a power of two (few compiled lengths across runs), within the bound.
        self.chunk_days = min(1 << (want - 1).bit_length(), bound)

    def _record_days(
        self, t: np.ndarray, metric: str, values: np.ndarray, mask: np.ndarray, **labels
    ) -> None:
        """Rows of several days at once: ``values`` and ``mask`` are (days, replicates)."""
        if mask.any():
            times = np.broadcast_to(t[:, None], mask.shape)
            reps = np.broadcast_to(self.reps[None, :], mask.shape)
            self.ctx.recorder.record(
                times[mask], metric, np.asarray(values)[mask], replicate=reps[mask], **labels
            )

    def chunk(self) -> None:
        """The days from now to the next stop or the chunk's end in one compiled call, then
        :meth:`step`'s bookkeeping over them (same rows, peaks, sums and stop day)."""
        cfg, d0, n = self.cfg, self.day, self.n
        k = min(self.chunk_days, cfg.steps - d0 + 1)
        ids, sid, params = self.rule_inputs
        out = _run_days(
            self.p, self.nb, self.world_keys, self.health, self.sym, self.prev_global,
            self.act_key, d0, k, cfg.steps, ids, sid, params, np.float32(cfg.min_contact),
            fields=self.fields, seen=cfg.prevalence_signal, table=self.rule_table,
            length=self.chunk_days,
        )  # fmt: skip
        self.health, self.sym, self.prev_global = out[:3]
        shares = np.asarray(out[3], np.float64)[:k]
        active = (shares[:, :, E] + shares[:, :, I]) > 0  # (days, replicates)
        days = d0 + np.arange(k)
        stop = (days == cfg.steps) | ~active.any(axis=1)
        end = int(np.argmax(stop)) if stop.any() else None
        seen = k if end is None else end + 1  # days observed; days acted: seen - 1 at a stop
        ran = k if end is None else end
        t = days[:seen].astype(np.float64)
        was = np.concatenate([self.was_active[None], active[: seen - 1]])
        for c, name in enumerate(COMPARTMENTS):
            if name != "exposed" or cfg.model == "SEIR":
                self._record_days(t, name, shares[:seen, :, c], was)
        # The peak: the first day of the highest prevalence above the peak so far.
        prevalence = np.where(was, shares[:seen, :, I], -np.inf)
        first = prevalence.argmax(axis=0)
        top = prevalence[first, np.arange(self.b)]
        higher = top > self.peak
        self.peak = np.where(higher, top, self.peak)
        self.peak_day = np.where(higher, t[first], self.peak_day)
        self.was_active = active[seen - 1]
        if ran:
            counts, w = np.asarray(out[4])[:ran], np.asarray(out[5])[:ran]
            act = active[:ran]
            sums = np.empty((ran,) + self.kind_count.shape, np.float32)
            sums64 = np.empty((ran,) + self.kind_count.shape)
            for j in range(ran):  # per day as step() sums (same float rounding)
                sums[j], sums64[j] = self._kind_sums(w[j].reshape(-1))
            # Added day by day as step() adds them (cumsum adds in order).
            daily = np.concatenate([self.contact_sum[None], sums64 * act[:, :, None]])
            self.contact_sum = np.cumsum(daily, axis=0)[-1]
            self.active_days = self.active_days + act.sum(axis=0)
            self._record_days(t[:ran] + 1, "incidence", counts / n, act)
            mean = sums / np.maximum(self.kind_count, 1)
            has = self.kind_count[:, 0] > 0
            self._record_days(t[:ran], "contact", mean[:, :, 0], act & has, kind="rules")
        if end is None:
            self.sim.at(float(d0 + k), self.chunk, name="epidemic days")
            return
        reason = "days" if active[end].any() else "no one infected"
        if end == 0:
            self.sim.stop(reason)
        else:  # the clock stops on the day step() would have stopped
            self.sim.at(float(d0 + end), self.sim.stop, reason, name="epidemic end")

    def _record(
        self, t: float, metric: str, values: np.ndarray, mask: np.ndarray, **labels
    ) -> None:
        if mask.any():
            self.ctx.recorder.record(
                t, metric, np.asarray(values)[mask], replicate=self.reps[mask], **labels
            )

    async def step(self) -> None:
        cfg, d, b, n = self.cfg, int(self.sim.now), self.b, self.n
        stacked, shares, glob, act_key = _observe_day(
            self.p, self.nb, self.health, self.sym, self.prev_global, self.act_key, d,
            fields=self.fields, seen=cfg.prevalence_signal,
        )  # fmt: skip
        shares = np.asarray(shares, np.float64)
        t = float(d)
        for c, name in enumerate(COMPARTMENTS):
            if name != "exposed" or cfg.model == "SEIR":
                self._record(t, name, shares[:, c], self.was_active)
        prevalence = shares[:, I]
        higher = self.was_active & (prevalence > self.peak)
        self.peak = np.where(higher, prevalence, self.peak)
        self.peak_day = np.where(higher, t, self.peak_day)
        active = (shares[:, E] + shares[:, I]) > 0
        self.was_active = active
        if d == cfg.steps or not active.any():
            self.sim.stop("days" if active.any() else "no one infected")
            return
        self.prev_global = glob
        stacked = np.asarray(stacked)
        obs = {k: stacked[i] for i, k in enumerate(self.fields)}  # views, no copies
        if "day" in self.host_fields:
            obs["day"] = np.full(b * n, d, np.int32)
        if "degree" in self.host_fields:
            obs["degree"] = self.degree
        # Numeric agents act every day (one batch shape, one compile); LLM agents only where
        # the epidemic is still going. Days after it ended count nowhere.
        if self.all_numeric or active.all():
            due, agents = None, self.gids  # everyone: no masking
        else:
            due = np.repeat(active, n) | self.numeric
            agents = self.gids[due]
            obs = {k: v[due] for k, v in obs.items()}
        raw = np.asarray(await self.pop.act(agents, obs, act_key))
        if due is None:
            w = np.clip(raw, cfg.min_contact, 1.0).astype(np.float32, copy=False)
        else:
            w = np.ones(b * n, np.float32)
            w[due] = np.clip(raw, cfg.min_contact, 1.0)
        self.health, self.sym, new, infected, learn_key = _advance(
            self.p, self.nb, self.world_keys, d, self.health, self.sym, w.reshape(b, n),
            self.learn_key,
        )  # fmt: skip
        if self.drawn:
            self._schedule(np.asarray(new), d, latent=cfg.model == "SEIR")
        if self.learns:
            new = np.asarray(new).ravel()
            reward = -cfg.isolation_cost * (1.0 - w) - cfg.infection_cost * new
            reward = (reward if due is None else reward[due]).astype(np.float32)
            self.pop.learn(agents, obs, raw, reward, learn_key)
        sums, sums64 = self._kind_sums(w)
        self.contact_sum += sums64 * active[:, None]
        self.active_days += active
        self._record(t + 1, "incidence", np.asarray(infected) / n, active)
        mean = sums / np.maximum(self.kind_count, 1)
        for i, kind in enumerate(self.kind_names):
            has = self.kind_count[:, i] > 0
            self._record(t, "contact", mean[:, i], active & has, kind=kind)
        if "llm" in self.kind_names:
            calls = self.pop.cohort("llm").last_calls
            self.ctx.recorder.record(t, "llm_calls", float(calls), replicate=-1, kind="llm")
        budget_reached(self.client, self.ctx, self.sim)

    def _kind_sums(self, w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Summed contact level per (replicate, kind): in float32 as the daily ``contact``
        rows always summed it, and in float64 for the run's ``mean_contact``."""
        b, n, k = self.b, self.n, len(self.kind_names)
        wk = w.reshape(b, n)
        if k == 1:
            return wk.sum(axis=1)[:, None], wk.sum(axis=1, dtype=np.float64)[:, None]
        kinds = self.kinds.reshape(b, n)
        sums = np.stack([(wk * (kinds == kind)).sum(axis=1) for kind in self.kind_names], axis=1)
        return sums, np.bincount(self.kind_slot, weights=w, minlength=b * k).reshape(b, k)

    def results(self) -> dict[str, np.ndarray]:
        """Headline values of this batch's replicates (and per kind when mixed)."""
        b, n = self.b, self.n
        ever = (np.asarray(self.health) != S).reshape(b, n)
        days = np.maximum(self.active_days, 1)
        out = {
            "attack_rate": ever.mean(axis=1),
            "peak_prevalence": self.peak,
            "peak_day": self.peak_day,
            "mean_contact": self.contact_sum.sum(axis=1) / (days * n),
        }
        t = float(self.day)
        everyone = np.ones(b, bool)
        for k, v in out.items():
            self._record(t, k, v, everyone)
        if self.cfg.agents == "mixed":
            kinds = self.kinds.reshape(b, n)
            for kind in KINDS:
                m = kinds == kind
                has = m.any(axis=1)
                cnt = np.maximum(m.sum(axis=1), 1)
                attack = np.where(has, (ever * m).sum(axis=1) / cnt, np.nan)
                summed = (
                    self.contact_sum[:, self.kind_names.index(kind)]
                    if kind in self.kind_names
                    else np.zeros(b)
                )
                mean_w = np.where(has, summed / (days * cnt), np.nan)
                out[f"attack_rate.{kind}"], out[f"mean_contact.{kind}"] = attack, mean_w
                self._record(t, "attack_rate", attack, has, kind=kind)
                self._record(t, "mean_contact", mean_w, has, kind=kind)
        return out


def build_graph(
    cfg: EpidemicConfig, ctx: RunContext
) -> tuple[Neighbours | None, np.ndarray, float | None]:
    """(neighbours, degree per agent, mean degree); well mixed: (None, N - 1 each, None)."""
    if cfg.graph == "complete":
        return None, np.full(cfg.population, cfg.population - 1), None
    seed = int(ctx.rng.numpy("graph").integers(2**31))
    try:  # graph parameters are user input: their errors are config errors
        topo = make_topology(
            cfg.graph, cfg.population, degree=cfg.degree, neighbourhood=cfg.neighbourhood,
            periodic=cfg.periodic, rewire=cfg.rewire, seed=seed,
        )  # fmt: skip
        if topo.n != cfg.population:
            raise ValueError(
                f"graph '{cfg.graph}' has {topo.n} nodes but population={cfg.population}"
            )
    except ValueError as exc:  # the topology calls N 'agents': name the parameter here
        msg = str(exc).replace("agents must", "population must")
        raise ConfigError(f"graph={cfg.graph}, population={cfg.population}: {msg}") from None
    degree = np.asarray(topo.degree)
    return topo.neighbours(), degree, float(degree.mean())


def params_of(cfg: EpidemicConfig, mean_degree: float | None) -> Params:
    """The chain's rates; with periods=drawn the step never moves agents out of E or I
    (scheduled events do), while the infection rate is the chain's."""
    p = _chain_params(cfg, mean_degree)
    if cfg.periods == "drawn":
        p = dataclasses.replace(p, p_onset=np.float32(0.0), p_recover=np.float32(0.0))
    return p


def _chain_params(cfg: EpidemicConfig, mean_degree: float | None) -> Params:
    return make_params(
        model=cfg.model,
        r0=cfg.r0,
        recovery_rate=cfg.recovery_rate,
        incubation_rate=cfg.incubation_rate,
        symptomatic=cfg.symptomatic,
        dt=cfg.dt,
        n=cfg.population,
        mean_degree=mean_degree,
    )


class Epidemic(Scenario):
    """SIR/SEIR with behaviour (AgentTorch-style LLM archetypes, rules or learned policies)."""

    name = "epidemic"
    Config = EpidemicConfig
    headline = HEADLINE
    labels = {"kind": str, "cohort": str}
    checkpointing = True  # every path: world, population (policies, LLM memories), queue

    def run(self, cfg: EpidemicConfig, ctx: RunContext) -> Mapping[str, np.ndarray]:
        nb, degree, mean_degree = build_graph(cfg, ctx)
        p = params_of(cfg, mean_degree)
        system = prompts.system_prompt(
            agents=cfg.population,
            r0=cfg.r0,
            recovery_rate=cfg.recovery_rate,
            incubation_rate=cfg.incubation_rate if cfg.model == "SEIR" else None,
            symptomatic=cfg.symptomatic,
            isolation_cost=cfg.isolation_cost,
            infection_cost=cfg.infection_cost,
            min_contact=cfg.min_contact,
        )

        async def batch(reps: np.ndarray, client: LLMClient | None) -> tuple[dict, float]:
            done = ctx.checkpoints.finished(int(reps[0]))  # a batch finished before a resume
            if done is None:
                b = _Batch(cfg, ctx, reps, p, nb, degree, client, system)
                await b.run(int(reps[0]))
                done = (b.results(), float(b.day))
                ctx.checkpoints.finish(int(reps[0]), done)
            return dict(done[0]), float(done[1])

        # Per-agent usage rows stay in the client; totals and per cohort are recorded.
        return drive(cfg, ctx, batch, llm=uses_llm(cfg))

    def plot(self, frame: pd.DataFrame, plots_dir: Path, config: EpidemicConfig) -> list[Path]:
        """One figure: compartments over time, daily incidence, and contact level by kind
        (means over replicates, each replicate faint)."""
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        plots_dir.mkdir(parents=True, exist_ok=True)
        if frame.empty:
            return []
        frame = frame[frame["replicate"] >= 0]
        fig, axes = plt.subplots(1, 3, figsize=(14, 4), dpi=100)
        colours = dict(
            zip(COMPARTMENTS, ("tab:blue", "tab:orange", "tab:red", "tab:green"), strict=True)
        )
        for name in COMPARTMENTS:
            sub = frame[frame["metric"] == name]
            if sub.empty:
                continue
            mean = sub.groupby("time")["value"].mean()
            axes[0].plot(mean.index, mean.values, color=colours[name], label=name)
        axes[0].set(
            xlabel="day", ylabel="share of agents", title=f"{config.model} on {config.graph}"
        )
        axes[0].legend(fontsize=8)
        sub = frame[frame["metric"] == "incidence"]
        for _, rep in sub.groupby("replicate"):
            axes[1].plot(rep["time"], rep["value"], color="tab:red", alpha=0.3, lw=0.8)
        axes[1].set(xlabel="day", ylabel="share newly infected", title="daily incidence")
        sub = frame[frame["metric"] == "contact"]
        for kind, part in sub.groupby("kind"):
            mean = part.groupby("time")["value"].mean()
            axes[2].plot(mean.index, mean.values, label=str(kind))
        axes[2].set(
            xlabel="day", ylabel="mean contact level", title="behaviour by kind", ylim=(-0.05, 1.05)
        )
        axes[2].legend(fontsize=8)
        fig.tight_layout()
        path = plots_dir / "epidemic.png"
        fig.savefig(path)
        plt.close(fig)
        return [path]
