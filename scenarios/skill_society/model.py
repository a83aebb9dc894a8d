"""skill-society: does a society turn experience into artifacts that make it better at tasks
it never trained on?

One moment: every numeric agent (rules, learned) attempts a task of the domain it chose (or
was allocated) on the vectorised skill model (``dynamics.step``, one compiled call for all
agents of all replicates in a batch); every LLM agent attempts a real text task
(``tasks.py``) with the artifacts it retrieves from the replicate's ``ArtifactStore``, and
after failures (above all) writes a note that others can retrieve. All LLM requests of a
moment are in flight together. Evaluation checkpoints every ``eval_every`` moments score
every agent on train, held-out and out-of-distribution tasks without learning.

Artifacts cross kinds both ways: an LLM agent's note fills its playbook slot in the skill
model (true quality 1 when the note states a correct training rule of its domain, else 0.05;
usefulness then measured by use), and at every checkpoint the ``publish_top`` best playbooks
of numeric agents per domain are published to the store as notes stating their rule. (All
numeric playbooks live in the vectorised state; writing each of 1e5 agents' revisions to
SQLite every moment would cost more than the simulation.) Store ids of agents are
``generation * population + seat``, so inheritance and lineage are the store's own.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pandas as pd

from scenarios.skill_society import dynamics as dyn
from scenarios.skill_society.config import SkillSocietyConfig
from scenarios.skill_society.prompts import (
    NO_ANSWER,
    NO_CODE,
    NO_NOTE,
    Answer,
    Code,
    Note,
    distil_messages,
    solve_messages,
)
from scenarios.skill_society.tasks import (
    DOMAINS,
    SPLITS,
    TRAIN_PARAMS,
    Task,
    describe_rule,
    parse_rule,
    sample_tasks,
    train_task,
    verify,
)
from sim_core.errors import ConfigError
from sim_core.experiment import RunContext, Scenario
from sim_core.graph import Neighbours
from sim_core.scheduler import Scheduler
from society.artifacts import ArtifactStore
from society.cohorts import LearnedCohort
from society.driver import budget_reached, drive
from society.fields import KINDS
from society.llm import LLMClient, Request
from society.llm.local import LOCAL_MODEL
from society.metrics import dol_index, emergent_niches
from society.metrics.improvement import forgetting, plasticity, transfer_ratio
from society.population import kinds_of, uses_llm
from society.sandbox import SandboxResult, run_function
from society.topology import Topology, make_topology

HEADLINE = (
    "heldout_gain",
    "ood_gain",
    "train_gain",
    "plasticity",
    "transfer_ratio",
    "forgetting",
    "artifact_reuse_rate",
    "dol_index",
    "niches",
)
NOTE_QUALITY = (1.0, 0.05)  # an LLM note's true quality: states a training rule / does not
NICHE_ROWS = 2000  # agents of replicate 0 whose final niche is recorded (for the network plot)


def policy_of(cfg: SkillSocietyConfig) -> str:
    """The store policy of new artifacts under ``sharing`` (and ``inherit`` without sharing)."""
    if cfg.sharing == "none":
        return "inherited" if cfg.inherit else "private"
    return cfg.sharing


def topology_of(cfg: SkillSocietyConfig, ctx: RunContext, replicate: int) -> Topology:
    seed = int(ctx.rng.numpy("graph", replicate).integers(2**31))
    try:
        return make_topology(
            cfg.graph, cfg.population, degree=cfg.degree, rewire=cfg.rewire, seed=seed
        )
    except (ValueError, TypeError) as exc:
        raise ConfigError(
            f"invalid value for 'graph' {cfg.graph!r} with population {cfg.population}: {exc}"
        ) from None


def block_neighbours(topos: list[Topology]) -> Neighbours:
    """One block-diagonal adjacency for the replicates of a batch (seat ids offset by n)."""
    n = topos[0].n
    src, dst = [], []
    for i, t in enumerate(topos):  # one block per replicate
        s, d = t.edges[:, 0] + i * n, t.edges[:, 1] + i * n
        src += [s, d]
        dst += [d, s]
    return Neighbours.from_edges(np.concatenate(src), np.concatenate(dst), n * len(topos))


class Seats:
    """The store's view of a replicate's graph: agent ids are ``generation * n + seat``.

    Neighbours are the seats' neighbours of the reader's generation and, when artifacts are
    inherited, of every earlier generation (and the reader's own ancestors), whose
    playbooks live on in their descendants.
    """

    def __init__(self, topology: Topology, inherit: bool):
        self.topology, self.n, self.inherit = topology, topology.n, inherit

    def neighbours_of(self, agent: int) -> np.ndarray:
        g, seat = divmod(int(agent), self.n)
        nbrs = self.topology.neighbours_of(seat)
        if not self.inherit:
            return nbrs + g * self.n
        gens = np.arange(g + 1)[:, None] * self.n
        return np.concatenate([(gens + nbrs).ravel(), np.arange(g) * self.n + seat])

    def lineage(self, seats: np.ndarray, generation: int) -> dict[int, int]:
        """child -> parent store ids of the given seats up to ``generation``."""
        return {
            g * self.n + s: (g - 1) * self.n + s
            for g in range(1, generation + 1)
            for s in seats.tolist()
        }


class _Batch:
    """Everything one batch of replicates needs while it runs (host side)."""

    def __init__(self, cfg: SkillSocietyConfig, ctx: RunContext, reps: np.ndarray, client):
        n = cfg.population
        self.cfg, self.ctx, self.reps, self.client = cfg, ctx, reps, client
        self.kinds = np.concatenate([kinds_of(cfg, ctx.rng.numpy("split", int(r))) for r in reps])
        self.gids = (reps[:, None] * n + np.arange(n)).ravel()
        self.active = self.kinds != "llm"
        self.ids = jnp.asarray(self.gids, jnp.int32)
        self.active_dev = jnp.asarray(self.active)
        self.topos = [topology_of(cfg, ctx, int(r)) for r in reps]
        self.nb = block_neighbours(self.topos)
        self.seats = [Seats(t, cfg.inherit) for t in self.topos]
        self.p = dyn.make_params(cfg)
        self.world = dyn.initial_world(self.p, reps.size, cfg.experts)
        self.generation = 0
        self.learned = None
        learned = np.flatnonzero(self.kinds == "learned")
        self.all_learned = learned.size == self.kinds.size
        if learned.size:
            self.learned_pos = learned
            features = {"estimate": len(DOMAINS)}
            if cfg.allocation == "bidding":
                features["price"] = len(DOMAINS)
            self.learned = LearnedCohort(
                "learned",
                self.gids[learned],
                features=features,
                actions=len(DOMAINS),
                rule="reinforce",
                learning_rate=cfg.learning_rate,
                key=ctx.rng.key("learned"),
            )
        self.llm_pos = np.flatnonzero(self.kinds == "llm")
        self.stores: list[ArtifactStore] = []
        for r in reps.tolist():
            path = ctx.run_dir / f"artifacts-r{r}.sqlite" if ctx.run_dir is not None else ":memory:"
            self.stores.append(ArtifactStore(path))
        self.published: dict[tuple[int, int, int], str] = {}  # (replicate, author, domain) -> id
        self.published_version: dict[tuple[int, int, int], int] = {}
        self.llm_rng = [ctx.rng.numpy("llm-tasks", int(r)) for r in reps]
        self.eval_sets = {
            (i, s): sample_tasks(
                s, cfg.llm_eval_tasks, cfg.difficulty, ctx.rng.numpy(f"eval-{s}", int(r))
            )
            for i, r in enumerate(reps.tolist())
            for s in SPLITS
        }
        self.llm_stats = np.zeros((reps.size, 2))  # attempts, attempts reusing another's artifact
        self.code_stats = np.zeros((reps.size, 2))  # sandboxed runs of code artifacts, failed ones
        self.curves: list[dict] = []  # one entry per checkpoint
        self.counted: np.ndarray | None = None  # attempts at the last checkpoint
        self.in_flight: asyncio.Future | None = None  # llm_latency >= 1: the LLM attempt out

    def close(self) -> None:
        for s in self.stores:
            s.close()

    # -- checkpoints -----------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        """Everything a batch changes, as plain data (a run checkpoint): the world arrays,
        learned policies, each store's database image, RNG streams, the curves so far."""
        return {
            "world": {f.name: getattr(self.world, f.name) for f in dataclasses.fields(self.world)},
            "generation": self.generation,
            "learned": self.learned.state_dict() if self.learned is not None else None,
            "stores": [np.frombuffer(s.to_bytes(), np.uint8) for s in self.stores],
            "published": [[*slot, aid] for slot, aid in self.published.items()],
            "published_version": [[*slot, v] for slot, v in self.published_version.items()],
            "llm_rng": [g.bit_generator.state for g in self.llm_rng],
            "llm_stats": self.llm_stats, "code_stats": self.code_stats, "counted": self.counted,
            "curves": [{**c, "scores": [[*k, v] for k, v in c["scores"].items()]} for c in self.curves],
        }  # fmt: skip

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.world = dyn.World(**{k: jnp.asarray(v) for k, v in state["world"].items()})
        self.generation = int(state["generation"])
        if self.learned is not None:
            self.learned.load_state_dict(state["learned"])
        for store, image in zip(self.stores, state["stores"], strict=True):
            store.load_bytes(np.asarray(image).tobytes())
        self.published = {(int(r), int(a), int(d)): str(aid) for r, a, d, aid in state["published"]}
        self.published_version = {
            (int(r), int(a), int(d)): int(v) for r, a, d, v in state["published_version"]
        }
        for g, saved in zip(self.llm_rng, state["llm_rng"], strict=True):
            g.bit_generator.state = saved
        self.llm_stats = np.array(state["llm_stats"], float)
        self.code_stats = np.array(state["code_stats"], float)
        self.counted = None if state["counted"] is None else np.array(state["counted"])
        self.curves = [
            {**c, "scores": {(kind, split): np.asarray(v) for kind, split, v in c["scores"]}}
            for c in state["curves"]
        ]

    def attempt_data(self, attempt: dict[str, Any]) -> dict[str, Any]:
        """An LLM attempt whose replies are in, as plain data (artifacts by id)."""
        return {
            "domains": attempt["domains"], "won": attempt["won"], "notes": [list(x) for x in attempt["notes"]],
            "tasks": [dataclasses.asdict(t) for t in attempt["tasks"]],
            "retrieved": [[a.id for a in arts] for arts in attempt["retrieved"]],
        }  # fmt: skip

    def attempt_of(self, data: dict[str, Any]) -> dict[str, Any]:
        """The attempt saved by :meth:`attempt_data` (its artifacts read back from the store)."""
        n = self.cfg.population
        stores = [self.stores[pos // n] for pos in self.llm_pos.tolist()]
        return {
            "domains": np.asarray(data["domains"]), "won": np.asarray(data["won"]),
            "notes": [(int(j), str(text)) for j, text in data["notes"]],
            "tasks": [Task(**{**t, "examples": tuple(tuple(e) for e in t["examples"])}) for t in data["tasks"]],
            "retrieved": [st.get_many(ids) for st, ids in zip(stores, data["retrieved"], strict=True)],
        }  # fmt: skip

    # -- numeric agents ---------------------------------------------------------------------
    def choices(self, key: jax.Array) -> jax.Array:
        k_rule, k_learned = jax.random.split(key)
        if self.learned is None:
            return dyn.rule_choice(k_rule, self.world, self.p, self.ids)
        obs = dyn.observe(self.world, self.p)
        obs = {k: obs[k] for k in self.learned.features}
        if self.all_learned:  # no gathers and scatters of identity indices
            self.learned_obs = obs
            return jnp.asarray(self.learned.act(self.gids, obs, k_learned), jnp.int32)
        pos = self.learned_pos
        self.learned_obs = {k: v[pos] for k, v in obs.items()}
        acts = self.learned.act(self.gids[pos], self.learned_obs, k_learned)
        choice = dyn.rule_choice(k_rule, self.world, self.p, self.ids)
        return choice.at[pos].set(jnp.asarray(acts, jnp.int32))

    def learn(self, choice: jax.Array, out: dyn.Outcome, key: jax.Array) -> None:
        if self.learned is None or self.cfg.allocation not in ("self-select", "bidding"):
            return  # only a choice that was the agent's own can be learned from
        if self.all_learned:
            self.learned.learn(self.gids, self.learned_obs, choice, out.reward, key)
            return
        pos = self.learned_pos
        self.learned.learn(self.gids[pos], self.learned_obs, choice[pos], out.reward[pos], key)

    # -- the store ---------------------------------------------------------------------------
    def store_id(self, seat: int | np.ndarray) -> int | np.ndarray:
        return self.generation * self.cfg.population + seat

    def retrieve(self, i: int, seat: int, query: str, domain: str) -> list:
        store, seats = self.stores[i], self.seats[i]
        lineage = seats.lineage(np.array([seat]), self.generation) if self.cfg.inherit else None
        perf = self.performance(i) if self.cfg.sharing == "strong-to-weak" else None
        arts = store.retrieve(
            int(self.store_id(seat)),
            query,
            self.cfg.retrieve,
            topology=seats,
            lineage=lineage,
            performance=perf,
        )
        return [a for a in arts if a.niche in (None, domain)]

    def performance(self, i: int) -> dict[str, np.ndarray]:
        """Per-niche scores by store id for strong-to-weak (NaN outside the niche); agents of
        earlier generations keep no score, so their artifacts reach nobody this way."""
        n = self.cfg.population
        rows = slice(i * n, (i + 1) * n)
        est = np.asarray(self.world.est[rows])
        niche = np.asarray(dyn.niche_of(self.world)[rows])
        out = {}
        for d, name in enumerate(DOMAINS):  # a handful of domains
            score = np.full((self.generation + 1) * n, np.nan)
            score[self.generation * n :] = np.where(niche == d, est[:, d], np.nan)
            out[name] = score
        return out

    def publish_numeric(self, time: float) -> None:
        """The best ``publish_top`` numeric playbooks per replicate and domain, as notes."""
        k = self.cfg.publish_top
        if not k or not self.active.any():
            return
        n = self.cfg.population
        q = np.asarray(self.world.art_q)
        m = np.asarray(dyn.measured(self.world))
        rule = np.asarray(self.world.art_rule)
        version = np.asarray(self.world.art_version)
        score = np.where(self.active[:, None] & (q > 0), m + 1e-3 * q, -1.0)
        policy = policy_of(self.cfg)
        for i, r in enumerate(self.reps.tolist()):  # replicates x domains, not agents
            items = []
            for d, name in enumerate(DOMAINS):
                col = score[i * n : (i + 1) * n, d]
                top = np.argsort(-col, kind="stable")[:k]
                for seat in top[col[top] > 0].tolist():
                    row = i * n + seat
                    author = int(self.store_id(seat))
                    slot = (r, author, d)
                    if self.published_version.get(slot) == version[row, d]:
                        continue
                    text = (
                        f"{describe_rule(name, TRAIN_PARAMS[name][rule[row, d]])} "
                        f"(playbook of a {self.kinds[row]} agent, version {version[row, d]})"
                    )
                    parents = [self.published[slot]] if slot in self.published else []
                    items.append(
                        dict(kind="playbook", content=text, author=author, created_at=time,
                             parents=parents, niche=name, policy=policy)
                    )  # fmt: skip
                    self.published_version[slot] = int(version[row, d])
            ids = self.stores[i].publish_many(items)
            for item, aid in zip(items, ids, strict=True):
                self.published[(r, item["author"], DOMAINS.index(item["niche"]))] = aid

    # -- LLM agents -----------------------------------------------------------------------
    def llm_domains(self) -> np.ndarray:
        """Each LLM agent's domain under ``allocation`` (its own estimates, host side)."""
        est = np.asarray(self.world.est)[self.llm_pos]
        out = np.empty(self.llm_pos.size, np.int64)
        for j, pos in enumerate(self.llm_pos.tolist()):  # a few LLM agents
            rng = self.llm_rng[pos // self.cfg.population]
            if self.cfg.allocation == "random" or rng.random() < self.cfg.explore:
                out[j] = rng.integers(len(DOMAINS))
            else:
                out[j] = int(np.argmax(est[j] + 1e-6 * rng.random(len(DOMAINS))))
        return out

    async def llm_moment(self, time: float) -> None:
        """Every LLM agent attempts a task and its result counts in this moment."""
        await self.llm_apply(await self.llm_attempt(self.llm_prepare()), time)

    def llm_prepare(self) -> dict[str, Any]:
        """Draw each LLM agent's task and retrieve its artifacts from the store as it is now."""
        cfg, n = self.cfg, self.cfg.population
        domains = self.llm_domains()
        tasks, retrieved = [], []
        for j, pos in enumerate(self.llm_pos.tolist()):
            i, seat = divmod(pos, n)
            task = train_task(DOMAINS[domains[j]], cfg.difficulty, self.llm_rng[i])
            tasks.append(task)
            retrieved.append(self.retrieve(i, seat, task.prompt(), task.domain))
        return {"domains": domains, "tasks": tasks, "retrieved": retrieved}

    async def llm_attempt(self, prepared: dict[str, Any]) -> dict[str, Any]:
        """Ask for a solution of each prepared task and, by chance, a distilled note (as
        text); nothing changes the world yet."""
        cfg, n = self.cfg, self.cfg.population
        tasks, retrieved = prepared["tasks"], prepared["retrieved"]
        requests = await self.solve_requests(tasks, retrieved, self.llm_pos.tolist())
        replies = await self.client.complete_many(requests)
        answers = [(c.parsed or NO_ANSWER).answer for c in replies]
        won = np.array([verify(t, a) for t, a in zip(tasks, answers, strict=True)])
        distil, notes_for = [], []
        for j, pos in enumerate(self.llm_pos.tolist()):
            i = pos // n
            p = cfg.distil_on_success if won[j] else cfg.distil_on_failure
            if self.llm_rng[i].random() < p:
                code = cfg.artifact_kind == "code"
                distil.append(
                    Request(distil_messages(tasks[j], answers[j], bool(won[j]), cfg.artifact_kind),
                            schema=Code if code else Note, fallback=NO_CODE if code else NO_NOTE,
                            agent=int(self.gids[pos]), cohort="llm")
                )  # fmt: skip
                notes_for.append(j)
        notes = await self.client.complete_many(distil) if distil else []
        texts = [
            (
                c.parsed.code if isinstance(c.parsed, Code) else c.parsed.note if c.parsed else ""
            ).strip()
            for c in notes
        ]
        return {**prepared, "won": won, "notes": list(zip(notes_for, texts, strict=True))}

    async def llm_apply(self, attempt: dict[str, Any], time: float) -> None:
        """The attempt's effects at ``time``: artifact use, stats, the shared world, notes."""
        n = self.cfg.population
        domains, tasks, retrieved, won = (
            attempt[k] for k in ("domains", "tasks", "retrieved", "won")
        )
        for j, pos in enumerate(self.llm_pos.tolist()):
            i, seat = divmod(pos, n)
            ids = [a.id for a in retrieved[j]]
            if ids:
                self.stores[i].record_use(ids, np.full(len(ids), won[j]))
            self.llm_stats[i] += (1, any(a.author != self.store_id(seat) for a in retrieved[j]))
        # the LLM agents' attempts count in the shared world (estimates, niches, DOL)
        pos, d = jnp.asarray(self.llm_pos), jnp.asarray(domains)
        w = self.world
        s = jnp.asarray(won, jnp.float32)
        self.world = w.replace(
            attempts=w.attempts.at[pos, d].add(1.0),
            successes=w.successes.at[pos, d].add(s),
            est=w.est.at[pos, d].add(dyn.EST_RATE * (s - w.est[pos, d])),
        )
        for j, text in attempt["notes"]:
            if text:
                await self.publish_note(j, tasks[j], text, retrieved[j], time)

    async def publish_note(self, j: int, task, text: str, parents: list, time: float) -> None:
        pos = int(self.llm_pos[j])
        i, seat = divmod(pos, self.cfg.population)
        kind = self.cfg.artifact_kind
        if kind == "code":  # a header that retrieval by domain can match
            text = f"# {task.domain}: solve(x) for this domain\n{text}"
        self.stores[i].publish(
            kind, text, int(self.store_id(seat)), created_at=time, niche=task.domain,
            parents=[a.id for a in parents], policy=policy_of(self.cfg),
        )  # fmt: skip
        d = DOMAINS.index(task.domain)
        if kind == "code":  # true quality: does it compute this task's rule?
            res = await self.run_code(i, text, task)
            want = [y for _, y in task.examples] + [task.answer]
            works = res.ok and all(str(o) == y for o, y in zip(res.outputs, want, strict=True))
            stated = [task.p] if works else []
        else:
            stated = [
                p for dom, p in parse_rule(text) if dom == task.domain and p in TRAIN_PARAMS[dom]
            ]
        quality = NOTE_QUALITY[0] if stated else NOTE_QUALITY[1]
        w = self.world
        if quality > float(w.art_q[pos, d]):
            rule = TRAIN_PARAMS[task.domain].index(stated[0]) if stated else 0
            self.world = w.replace(
                art_q=w.art_q.at[pos, d].set(quality),
                art_a=w.art_a.at[pos, d].set(1.0),
                art_b=w.art_b.at[pos, d].set(1.0),
                art_rule=w.art_rule.at[pos, d].set(rule),
                art_version=w.art_version.at[pos, d].add(1),
            )

    async def run_code(self, i: int, source: str, task) -> SandboxResult:
        """Run a code artifact on a task's example inputs and its query in the sandbox (a
        subprocess with CPU, memory, wall-clock, file and network limits); counted."""
        inputs = [x for x, _ in task.examples] + [task.query]
        res = await asyncio.to_thread(run_function, source, "solve", inputs)
        self.code_stats[i] += (1, not res.ok)
        return res

    async def solve_requests(
        self, tasks: list, retrieved: list, positions: list[int]
    ) -> list[Request]:
        """The solve request of each (task, retrieved artifacts, agent); code artifacts are
        run first, in the sandbox, and what they gave is shown beside them."""
        n = self.cfg.population
        jobs = [
            (k, a) for k, arts in enumerate(retrieved) for a in arts if a.kind == "code"
        ]  # fmt: skip
        results = await asyncio.gather(
            *(self.run_code(positions[k] // n, a.content, tasks[k]) for k, a in jobs)
        )
        runs: list[dict[str, str]] = [{} for _ in tasks]
        for (k, a), res in zip(jobs, results, strict=True):
            t = tasks[k]
            if res.outputs[-1] is None:
                runs[k][a.id] = f"the program failed ({res.errors[-1]})"
                continue
            right = sum(str(o) == y for o, (_, y) in zip(res.outputs, t.examples, strict=False))
            runs[k][a.id] = (
                f"{right} of {len(t.examples)} examples reproduced; its output for the new "
                f"input is {str(res.outputs[-1])[:200]!r}"
            )
        return [
            Request(solve_messages(t, arts, runs[k]), schema=Answer, fallback=NO_ANSWER,
                    agent=int(self.gids[positions[k]]), cohort="llm")
            for k, (t, arts) in enumerate(zip(tasks, retrieved, strict=True))
        ]  # fmt: skip

    async def llm_scores(self) -> np.ndarray:
        """(LLM agents, splits, tasks) correctness on the fixed evaluation sets, no learning."""
        n = self.cfg.population
        shape = (self.llm_pos.size, len(SPLITS), self.cfg.llm_eval_tasks)
        tasks, retrieved, who = [], [], []
        for pos in self.llm_pos.tolist():
            i, seat = divmod(pos, n)
            for s in SPLITS:
                for task in self.eval_sets[(i, s)]:
                    tasks.append(task)
                    retrieved.append(self.retrieve(i, seat, task.prompt(), task.domain))
                    who.append(pos)
        requests = await self.solve_requests(tasks, retrieved, who)
        replies = await self.client.complete_many(requests)
        ok = [
            verify(t, (c.parsed or NO_ANSWER).answer) for t, c in zip(tasks, replies, strict=True)
        ]
        return np.asarray(ok, np.float64).reshape(shape)


class SkillSociety(Scenario):
    """Collective self-improvement through artifacts, measured on held-out tasks."""

    name = "skill-society"
    Config = SkillSocietyConfig
    headline = HEADLINE
    labels = {"split": str, "kind": str, "domain": str, "agent": int, "cohort": str}
    # world, learned policies, artifact stores (database images), RNG streams, an LLM
    # attempt in flight (its replies awaited, then saved), LLM usage
    checkpointing = True

    def run(self, cfg: SkillSocietyConfig, ctx: RunContext) -> Mapping[str, np.ndarray]:
        async def batch(reps: np.ndarray, client: LLMClient | None) -> tuple[dict, float]:
            return await self._run_batch(cfg, ctx, reps, client)

        out = drive(cfg, ctx, batch, llm=uses_llm(cfg))
        notes = achievements(cfg, ctx, out)
        if notes:
            ctx.report["notes"] = notes
        return out

    async def _run_batch(
        self, cfg, ctx: RunContext, reps: np.ndarray, client
    ) -> tuple[dict, float]:
        batch = int(reps[0])
        done = ctx.checkpoints.finished(batch)  # a batch finished before a resume
        if done is not None:
            return {k: np.asarray(v) for k, v in done[0].items()}, float(done[1])
        b = _Batch(cfg, ctx, reps, client)
        total = cfg.steps * cfg.generations
        moment_key, learn_key = ctx.rng.key("moments"), ctx.rng.key("learn")
        sim = Scheduler()
        try:

            async def checkpoint() -> None:
                t = sim.now
                if t > 0 and t % cfg.steps == 0 and t < total:
                    await self._checkpoint(b, t)
                    b.world = dyn.turnover(b.world, b.p, jnp.asarray(cfg.inherit))
                    b.generation += 1
                elif t % cfg.eval_every == 0 or t == total:
                    await self._checkpoint(b, t)
                if t >= total:
                    sim.stop("steps")

            def ask(t: int) -> None:
                """Start an LLM attempt now; its reply arrives as an event llm_latency later."""
                if t + cfg.llm_latency < total:
                    b.in_flight = asyncio.ensure_future(b.llm_attempt(b.llm_prepare()))
                    sim.at(
                        float(t + cfg.llm_latency),
                        reply,
                        priority=1,
                        name="skill-society llm reply",
                    )

            async def reply() -> None:
                attempt, b.in_flight = await b.in_flight, None
                await b.llm_apply(attempt, sim.now)
                if not budget_reached(client, ctx, sim):
                    ask(int(sim.now))

            async def moment() -> None:
                t = int(sim.now)
                key = jax.random.fold_in(moment_key, t)
                choice = b.choices(jax.random.fold_in(key, 1))
                b.world, out = dyn.step(
                    jax.random.fold_in(key, 2), b.world, choice, b.p, b.nb, b.active_dev, b.ids
                )
                b.learn(choice, out, jax.random.fold_in(learn_key, t))
                if b.llm_pos.size and not cfg.llm_latency:
                    await b.llm_moment(float(t))
                    budget_reached(client, ctx, sim)
                elif b.llm_pos.size and b.in_flight is None:
                    ask(t)
                if (t + 1) % cfg.record_every == 0:
                    self._record_moment(b, t + 1, out)

            def saved() -> Any:
                """The checkpoint's state; with a request in flight, once its replies are in."""
                if b.in_flight is None:
                    return {**b.state_dict(), "in_flight": None}

                async def with_reply() -> dict:
                    attempt = await b.in_flight
                    return {**b.state_dict(), "in_flight": b.attempt_data(attempt)}

                return with_reply()

            for name, fn in (("checkpoint", checkpoint), ("moment", moment), ("reply", reply)):
                sim.handle(name, fn)
            state = ctx.checkpoints.resume(batch, sim)
            if state is not None:
                b.load_state_dict(state)
                if state["in_flight"] is not None:  # its replies were in: they arrive as saved
                    b.in_flight = asyncio.get_running_loop().create_future()
                    b.in_flight.set_result(b.attempt_of(state["in_flight"]))
            else:  # every moment time: a checkpoint (and turnover) first, then the moment
                sim.every(1.0, checkpoint, priority=-1, name="skill-society checkpoint")
                sim.every(1.0, moment, name="skill-society moment")
            ctx.checkpoints.attach(batch, sim, saved)
            await sim.arun()
            if ctx.stop_reason and (not b.curves or b.curves[-1]["time"] < sim.now):
                await self._checkpoint(b, sim.now)  # a budget stop still ends on a checkpoint
            done = self._finish(b), float(sim.now)
            ctx.checkpoints.finish(batch, done)
            return done
        finally:
            if b.in_flight is not None and not b.in_flight.done():  # a stop with a request out
                b.in_flight.cancel()
                await asyncio.gather(b.in_flight, return_exceptions=True)
            b.close()

    # -- recording ---------------------------------------------------------------------------
    def _record_moment(self, b: _Batch, t: int, out: dyn.Outcome) -> None:
        n, rec = b.cfg.population, b.ctx.recorder
        succ = np.asarray(out.success).reshape(-1, n)
        for kind in ("rules", "learned"):  # kinds, not agents
            mask = (b.kinds == kind).reshape(-1, n)
            if mask.any():
                rate = (succ * mask).sum(1) / np.maximum(mask.sum(1), 1)
                rec.record(float(t), "success_rate", rate, replicate=b.reps, kind=kind)
        reach = dyn.reach(b.world, b.cfg.reach_quality, b.active, n)
        rec.record(float(t), "reach", reach, replicate=b.reps)
        if b.cfg.allocation == "bidding":
            price = np.asarray(b.world.price)
            rec.record(
                float(t), "price", price.ravel(),
                replicate=np.repeat(b.reps, len(DOMAINS)), domain=np.tile(DOMAINS, b.reps.size),
            )  # fmt: skip

    async def _checkpoint(self, b: _Batch, t: float) -> None:
        n, rec = b.cfg.population, b.ctx.recorder
        t = float(t)
        b.publish_numeric(t)
        point: dict = {"time": t, "scores": {}}
        if b.active.any():
            ev = {k: np.asarray(v) for k, v in dyn.evaluate(b.world, b.p, b.nb).items()}
            for kind in ("rules", "learned"):
                mask = (b.kinds == kind).reshape(-1, n)
                if not mask.any():
                    continue
                for s in SPLITS:
                    v = (ev[s].reshape(-1, n) * mask).sum(1) / mask.sum(1)
                    point["scores"][(kind, s)] = v
                    rec.record(t, "score", v, replicate=b.reps, split=s, kind=kind)
            numeric = b.active.reshape(-1, n)
            per_dom = ev["heldout_domain"].reshape(-1, n, len(DOMAINS))
            point["domain"] = (per_dom * numeric[:, :, None]).sum(1) / numeric.sum(1)[:, None]
            point["attempts"] = np.asarray(b.world.total)
            point["reused"] = np.asarray(b.world.reused)
        if b.llm_pos.size:
            ok = await b.llm_scores()  # (llm agents, splits, tasks)
            rep_of = b.llm_pos // n
            for k, s in enumerate(SPLITS):
                v = np.array(
                    [
                        ok[rep_of == i, k].mean() if (rep_of == i).any() else np.nan
                        for i in range(b.reps.size)
                    ]
                )
                point["scores"][("llm", s)] = v
                rec.record(t, "score", v, replicate=b.reps, split=s, kind="llm")
            point["llm_tasks"] = np.stack([ok[rep_of == i, 1].mean(0) for i in range(b.reps.size)])
            point["llm_attempts"] = b.llm_stats[:, 0].copy()
            point["llm_reused"] = b.llm_stats[:, 1].copy()
            point["tokens"] = float(b.client.usage.total["tokens"])
        # division of labour over the attempts since the last checkpoint (this generation)
        attempts = np.asarray(b.world.attempts)
        since = b.counted if b.counted is not None and b.counted.sum() <= attempts.sum() else 0.0
        counts = (attempts - since).reshape(-1, n, len(DOMAINS))
        b.counted = attempts
        dol = np.array([_dol(c) for c in counts])
        niches = np.array([emergent_niches(c)["n_niches"] if c.sum() else 0 for c in counts])
        point["dol"], point["niches"] = dol, niches
        rec.record(t, "dol_index", dol, replicate=b.reps)
        rec.record(t, "niches", niches.astype(float), replicate=b.reps)
        rec.record(t, "artifacts", np.array([float(len(s)) for s in b.stores]), replicate=b.reps)
        if b.cfg.artifact_kind == "code" and b.llm_pos.size:
            rec.record(t, "code_runs", b.code_stats[:, 0].copy(), replicate=b.reps)
            rec.record(t, "code_failures", b.code_stats[:, 1].copy(), replicate=b.reps)
        b.curves.append(point)

    def _finish(self, b: _Batch) -> dict[str, np.ndarray]:
        """Headline metrics per replicate of the batch from the checkpoint curves."""
        n, curves = b.cfg.population, b.curves
        kinds = [k for k in KINDS if (b.kinds == k).any()]
        primary = [k for k in kinds if k != "llm"] or ["llm"]
        out: dict[str, np.ndarray] = {}

        def curve(kind: str, split: str) -> np.ndarray:  # (checkpoints, replicates)
            return np.stack([c["scores"][(kind, split)] for c in curves])

        def mean_curve(split: str) -> np.ndarray:  # primary kinds weighted by their agents
            w = np.array([(b.kinds == k).reshape(-1, n).sum(1) for k in primary], float)
            return sum(curve(k, split) * w[i] for i, k in enumerate(primary)) / w.sum(0)

        train, held, ood = (mean_curve(s) for s in SPLITS)
        out["heldout_gain"], out["ood_gain"], out["train_gain"] = (
            c[-1] - c[0] for c in (held, ood, train)
        )
        with np.errstate(divide="ignore", invalid="ignore"):
            out["transfer_ratio"] = np.asarray(transfer_ratio(train, held), float)
            if primary[0] != "llm":
                attempts = np.stack([c["attempts"] for c in curves]) / 1000.0
                domain = np.stack([c["domain"] for c in curves])  # (T, R, D)
                out["artifact_reuse_rate"] = curves[-1]["reused"] / np.maximum(
                    curves[-1]["attempts"], 1
                )
            else:
                attempts = np.stack([c["llm_attempts"] for c in curves]) / 1000.0
                domain = np.stack([c["llm_tasks"] for c in curves])
                out["artifact_reuse_rate"] = curves[-1]["llm_reused"] / np.maximum(
                    curves[-1]["llm_attempts"], 1
                )
            out["plasticity"] = np.asarray(
                plasticity(held, attempts, unit="interactions")["value"], float
            )
        out["forgetting"] = np.array(
            [
                forgetting(domain[:, i])["mean"] if len(curves) > 1 else np.nan
                for i in range(b.reps.size)
            ]
        )
        out["dol_index"], out["niches"] = curves[-1]["dol"], curves[-1]["niches"].astype(float)
        if len(kinds) > 1 or "llm" in kinds:  # per kind, so LLM agents meet their baselines
            for k in kinds:
                for s, name in zip(SPLITS, ("train_gain", "heldout_gain", "ood_gain"), strict=True):
                    c = curve(k, s)
                    out[f"{name}.{k}"] = c[-1] - c[0]
                # share of the evaluation tasks (all splits) solved at the last checkpoint
                out[f"solved.{k}"] = np.mean([curve(k, s)[-1] for s in SPLITS], axis=0)
        if "llm" in kinds:
            tokens = np.array([c["tokens"] for c in curves]) / 1e6
            held_llm = curve("llm", "heldout")
            with np.errstate(divide="ignore", invalid="ignore"):
                out["plasticity_tokens.llm"] = np.asarray(
                    plasticity(held_llm, tokens[:, None] * np.ones_like(held_llm), unit="tokens")[
                        "value"
                    ],
                    float,
                )
        self._record_niches(b)
        return out

    def _record_niches(self, b: _Batch) -> None:
        """Each agent's main niche in replicate 0's first seats (for the network plot)."""
        if b.reps[0] != 0:
            return
        n = min(b.cfg.population, NICHE_ROWS)
        niche = np.asarray(dyn.niche_of(b.world))[:n]
        if b.ctx.run_dir is not None:
            e = b.topos[0].edges
            np.save(b.ctx.run_dir / "graph-r0.npy", e[(e < n).all(1)])
        b.ctx.recorder.record(
            b.curves[-1]["time"], "niche", niche.astype(float), replicate=0,
            agent=np.arange(n), cohort=b.kinds[:n].astype(str),
        )  # fmt: skip

    # -- plots -------------------------------------------------------------------------------
    def plot(self, frame: pd.DataFrame, plots_dir: Path, config: SkillSocietyConfig) -> list[Path]:
        from scenarios.skill_society.plots import plot_all

        return plot_all(frame, plots_dir, config, plots_dir.parent)


def achievements(
    cfg: SkillSocietyConfig, ctx: RunContext, out: Mapping[str, np.ndarray]
) -> list[str]:
    """One line per kind of agent: evaluation tasks solved and held-out gain; and, when the
    LLM agents solved none, why and how to rerun with a capable model (a weak model that
    replies validly is a finding, not a failure of the run)."""
    lines = []
    for kind in KINDS:
        if f"solved.{kind}" not in out:
            continue
        solved, gain = np.nanmean(out[f"solved.{kind}"]), np.nanmean(out[f"heldout_gain.{kind}"])
        lines.append(
            f"{kind} agents: solved {solved:.0%} of evaluation tasks at the end, held-out gain {gain:+.3f}"
        )
    if "solved.llm" in out and np.nanmax(out["solved.llm"], initial=0.0) == 0:
        model = ctx.options.get("llm") or "local"
        sets = " ".join(
            f"--set {k}={v}" for k, v in cfg.model_dump(mode="json").items()
            if v != SkillSocietyConfig.model_fields[k].default and v is not None
        )  # fmt: skip
        command = f"society run skill-society --seed {ctx.seed} {sets} --llm <litellm model> [--api-base URL]"
        if model in ("local", LOCAL_MODEL):
            why = f"the embedded model ({LOCAL_MODEL}) is a small base model, there to exercise the plumbing"
        else:
            why = f"model {model} did not solve these puzzles"
        lines.append(
            f"LLM agents solved no evaluation task: {why}; rerun with a capable model: {command}"
        )
    return lines


def _dol(counts: np.ndarray) -> float:
    return dol_index(counts)["dol_indiv_to_task"] if counts.sum() else float("nan")
