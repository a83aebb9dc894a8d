"""skill-society's LLM agents: a cohort that solves real text tasks (``tasks.py``) with the
artifacts it retrieves from the replicate's ``ArtifactStore`` and, after failures above all,
distils a note (or code, run in the sandbox) that others can retrieve.

Its turn comes after each moment's numeric step (``after``): the replies of an attempt that
has landed count in the world (attempts, successes, estimates; a note fills the author's
playbook slot: true quality 1 when it states a correct training rule of its domain, else
0.05), the next attempt is asked, and at an evaluation checkpoint the numeric agents' best
``publish_top`` playbooks per domain go to the store as notes and every LLM agent is scored
on fixed train, held-out and out-of-distribution tasks. With ``llm_latency`` k >= 1 an
attempt asked after moment t is in flight until moment t + k, while numeric agents step.
Store ids are ``generation * population + seat``, so inheritance and lineage are the store's.
"""

from __future__ import annotations

import asyncio
import dataclasses
from typing import Any

import jax
import numpy as np

from scenarios.skill_society import dynamics as dyn
from scenarios.skill_society.config import SkillSocietyConfig
from scenarios.skill_society.model import checkpoint_due, evaluate
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
from sim_core.experiment import RunContext
from society.artifacts import ArtifactStore
from society.cohorts import LLMCohort
from society.llm import LLMClient, Request
from society.sandbox import SandboxResult, run_function
from society.topology import Topology, topology_of

NOTE_QUALITY = (1.0, 0.05)  # an LLM note's true quality: states a training rule / does not


def policy_of(cfg: SkillSocietyConfig) -> str:
    """The store policy of new artifacts under ``sharing`` (and ``inherit`` without sharing)."""
    if cfg.sharing == "none":
        return "inherited" if cfg.inherit else "private"
    return cfg.sharing


class Seats:
    """The store's view of the graph: agent ids are ``generation * n + seat``.

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


class SkillAgents(LLMCohort):
    """One replicate's LLM agents (module docstring)."""

    def __init__(
        self,
        agents: np.ndarray,
        client: LLMClient,
        cfg: SkillSocietyConfig,
        ctx: RunContext,
        r: int,
    ):
        super().__init__("llm", agents, client, schema=Answer, fallback=NO_ANSWER, template="")
        self.cfg, self.r = cfg, r
        self.total = cfg.steps * cfg.generations
        path = ctx.run_dir / f"artifacts-r{r}.sqlite" if ctx.run_dir is not None else ":memory:"
        self.store = ArtifactStore(path)
        self.seats = Seats(topology_of(cfg), cfg.inherit)
        self.rng = ctx.rng.numpy("llm-tasks", r)
        self.eval_sets = {
            s: sample_tasks(s, cfg.llm_eval_tasks, cfg.difficulty, ctx.rng.numpy(f"eval-{s}", r))
            for s in SPLITS
        }
        self.published: dict[tuple[int, int], str] = {}  # (author, domain) -> artifact id
        self.version: dict[tuple[int, int], int] = {}  # (author, domain) -> version published
        self.stats = np.zeros(4)  # attempts, attempts reusing another's artifact, code runs, failed
        self.in_flight: asyncio.Future | None = None  # llm_latency >= 1: the attempt out
        self.asked_at = 0  # the moment the attempt in flight was asked after
        self.generation = 0

    async def aact(self, agents: np.ndarray, obs: Any, key: Any, **kw: Any) -> np.ndarray:
        """The agents' domains as the world sees them (their attempts are made in ``after``)."""
        return np.zeros(len(agents), np.int32)

    # -- the turn after each moment ---------------------------------------------------------
    async def after(self, world: dict, t: int) -> dict:
        """After ``t`` moments: the landed attempt counts, the next is asked, and at a
        checkpoint numeric playbooks are published and the agents evaluated."""
        cfg, s = self.cfg, world["skill"]
        self.generation = max(t - 1, 0) // cfg.steps
        kind = world["kind"]
        if t > 0 and self.in_flight is not None and t - 1 == self.asked_at + cfg.llm_latency:
            attempt, self.in_flight = await self.in_flight, None
            s = await self.apply(s, attempt, float(t - 1))
        if t > 0 and self.in_flight is None and t - 1 + cfg.llm_latency < self.total:
            self.asked_at = t - 1
            self.in_flight = asyncio.ensure_future(self.attempt(self.prepare(s, kind)))
            if not cfg.llm_latency:
                attempt, self.in_flight = await self.in_flight, None
                s = await self.apply(s, attempt, float(t - 1))
        patch = {"skill": s}
        if checkpoint_due(t, cfg):  # the numeric agents' scores, then the LLM agents'
            patch = jax.tree_util.tree_map(np.asarray, evaluate(world | patch, cfg, t == 0))
            patch |= await self.checkpoint(world, s, kind, t)
        return patch

    async def settle(self) -> None:
        """An attempt in flight has its replies in (a checkpoint saves them)."""
        if self.in_flight is not None and not self.in_flight.done():
            await asyncio.wait([self.in_flight])

    def close(self) -> None:
        if self.in_flight is not None and not self.in_flight.done():
            self.in_flight.cancel()
        self.store.close()

    async def checkpoint(self, world: dict, s: dyn.World, kind: np.ndarray, t: int) -> dict:
        self.publish_numeric(s, kind, float(t))
        ok = await self.scores(s, kind)  # (agents, splits, tasks)
        means = ok.mean((0, 2))
        tasks = ok[:, 1].mean(0)  # each held-out task
        out = {
            "llm_last": means, "llm_tasks": tasks,
            "llm_best": np.maximum(world["llm_best"], world["llm_tasks"]),
            "llm_stats": self.stats.copy(), "artifacts": np.float32(len(self.store)),
            "tokens": np.float32(self.client.usage.total["tokens"] / 1e6),
        }  # fmt: skip
        if t == 0:
            out |= {"llm_first": means, "tokens_first": out["tokens"]}
        return out

    # -- the store --------------------------------------------------------------------------
    def store_id(self, seat: int) -> int:
        return self.generation * self.cfg.population + seat

    def retrieve(self, seat: int, query: str, domain: str, s: dyn.World, kind: np.ndarray) -> list:
        cfg = self.cfg
        lineage = self.seats.lineage(np.array([seat]), self.generation) if cfg.inherit else None
        perf = self.performance(s) if cfg.sharing == "strong-to-weak" else None
        arts = self.store.retrieve(
            self.store_id(seat), query, cfg.retrieve, topology=self.seats, lineage=lineage,
            performance=perf,
        )  # fmt: skip
        return [a for a in arts if a.niche in (None, domain)]

    def performance(self, s: dyn.World) -> dict[str, np.ndarray]:
        """Per-niche scores by store id for strong-to-weak (NaN outside the niche); agents of
        earlier generations keep no score, so their artifacts reach nobody this way."""
        n, g = self.cfg.population, self.generation
        niche = np.asarray(dyn.niche_of(s))
        out = {}
        for d, name in enumerate(DOMAINS):  # a handful of domains
            score = np.full((g + 1) * n, np.nan)
            score[g * n :] = np.where(niche == d, s.est[:, d], np.nan)
            out[name] = score
        return out

    def publish_numeric(self, s: dyn.World, kind: np.ndarray, time: float) -> None:
        """The best ``publish_top`` numeric playbooks per domain, as notes."""
        k, numeric = self.cfg.publish_top, kind != 2
        if not k or not numeric.any():
            return
        q, rule, version = s.art_q, s.art_rule, s.art_version
        m = np.asarray(dyn.measured(s))
        score = np.where(numeric[:, None] & (q > 0), m + 1e-3 * q, -1.0)
        items = []
        for d, name in enumerate(DOMAINS):  # domains, not agents
            top = np.argsort(-score[:, d], kind="stable")[:k]
            for seat in top[score[top, d] > 0].tolist():
                slot = (self.store_id(seat), d)
                if self.version.get(slot) == version[seat, d]:
                    continue
                text = (
                    f"{describe_rule(name, TRAIN_PARAMS[name][rule[seat, d]])} (playbook of a "
                    f"{('rules', 'learned')[kind[seat]]} agent, version {version[seat, d]})"
                )
                parents = [self.published[slot]] if slot in self.published else []
                items.append(
                    dict(kind="playbook", content=text, author=slot[0], created_at=time,
                         parents=parents, niche=name, policy=policy_of(self.cfg))
                )  # fmt: skip
                self.version[slot] = int(version[seat, d])
        for item, aid in zip(items, self.store.publish_many(items), strict=True):
            self.published[(item["author"], DOMAINS.index(item["niche"]))] = aid

    # -- an attempt: prepare (draws and lookups now), ask (in flight), apply (when it lands) --
    def domains(self, s: dyn.World) -> np.ndarray:
        """Each agent's domain under ``allocation`` (its own estimates)."""
        est = s.est[self.agents]
        out = np.empty(self.agents.size, np.int64)
        for j in range(self.agents.size):  # a few LLM agents
            if self.cfg.allocation == "random" or self.rng.random() < self.cfg.explore:
                out[j] = self.rng.integers(len(DOMAINS))
            else:
                out[j] = int(np.argmax(est[j] + 1e-6 * self.rng.random(len(DOMAINS))))
        return out

    def prepare(self, s: dyn.World, kind: np.ndarray) -> dict[str, Any]:
        """Draw each agent's task and retrieve its artifacts from the store as it is now."""
        domains = self.domains(s)
        tasks, retrieved = [], []
        for seat, d in zip(self.agents.tolist(), domains.tolist(), strict=True):
            task = train_task(DOMAINS[d], self.cfg.difficulty, self.rng)
            tasks.append(task)
            retrieved.append(self.retrieve(seat, task.prompt(), task.domain, s, kind))
        return {"domains": domains, "tasks": tasks, "retrieved": retrieved}

    async def attempt(self, prepared: dict[str, Any]) -> dict[str, Any]:
        """Ask for a solution of each prepared task and, by chance, a distilled note (as
        text); nothing changes the world yet."""
        cfg, seats = self.cfg, self.agents.tolist()
        tasks, retrieved = prepared["tasks"], prepared["retrieved"]
        replies = await self.client.complete_many(
            await self.solve_requests(tasks, retrieved, seats)
        )
        answers = [(c.parsed or NO_ANSWER).answer for c in replies]
        won = np.array([verify(t, a) for t, a in zip(tasks, answers, strict=True)])
        distil, notes_for = [], []
        code = cfg.artifact_kind == "code"
        for j, seat in enumerate(seats):
            if self.rng.random() < (cfg.distil_on_success if won[j] else cfg.distil_on_failure):
                distil.append(
                    Request(distil_messages(tasks[j], answers[j], bool(won[j]), cfg.artifact_kind),
                            schema=Code if code else Note, fallback=NO_CODE if code else NO_NOTE,
                            sample=self.r, agent=seat, cohort="llm")
                )  # fmt: skip
                notes_for.append(j)
        notes = await self.client.complete_many(distil) if distil else []
        texts = [
            (c.parsed.code if isinstance(c.parsed, Code) else c.parsed.note if c.parsed else "").strip()
            for c in notes
        ]  # fmt: skip
        return {**prepared, "won": won, "notes": list(zip(notes_for, texts, strict=True))}

    async def apply(self, s: dyn.World, attempt: dict[str, Any], time: float) -> dyn.World:
        """The attempt's effects at ``time``: artifact use, counts, the world, notes."""
        won, retrieved = attempt["won"], attempt["retrieved"]
        for j, seat in enumerate(self.agents.tolist()):
            ids = [a.id for a in retrieved[j]]
            if ids:
                self.store.record_use(ids, np.full(len(ids), won[j]))
            self.stats[:2] += (1, any(a.author != self.store_id(seat) for a in retrieved[j]))
        pos, d, w = self.agents, attempt["domains"], won.astype(np.float32)
        s = dataclasses.replace(
            s, **{k: getattr(s, k).copy() for k in ("attempts", "successes", "est")}
        )
        s.attempts[pos, d] += 1.0
        s.successes[pos, d] += w
        s.est[pos, d] += dyn.EST_RATE * (w - s.est[pos, d])
        for j, text in attempt["notes"]:
            if text:
                s = await self.publish_note(s, j, attempt["tasks"][j], text, retrieved[j], time)
        return s

    async def publish_note(self, s: dyn.World, j: int, task: Task, text: str, parents: list,
                           time: float) -> dyn.World:  # fmt: skip
        seat, kind = int(self.agents[j]), self.cfg.artifact_kind
        if kind == "code":  # a header that retrieval by domain can match
            text = f"# {task.domain}: solve(x) for this domain\n{text}"
        self.store.publish(
            kind, text, self.store_id(seat), created_at=time, niche=task.domain,
            parents=[a.id for a in parents], policy=policy_of(self.cfg),
        )  # fmt: skip
        d = DOMAINS.index(task.domain)
        if kind == "code":  # true quality: does it compute this task's rule?
            res = await self.run_code(text, task)
            want = [y for _, y in task.examples] + [task.answer]
            works = res.ok and all(str(o) == y for o, y in zip(res.outputs, want, strict=True))
            stated = [task.p] if works else []
        else:
            stated = [
                p for dom, p in parse_rule(text) if dom == task.domain and p in TRAIN_PARAMS[dom]
            ]
        quality = NOTE_QUALITY[0] if stated else NOTE_QUALITY[1]
        if quality <= s.art_q[seat, d]:
            return s
        slots = ("art_q", "art_a", "art_b", "art_rule", "art_version")
        s = dataclasses.replace(s, **{k: getattr(s, k).copy() for k in slots})
        s.art_q[seat, d], s.art_a[seat, d], s.art_b[seat, d] = quality, 1.0, 1.0
        s.art_rule[seat, d] = TRAIN_PARAMS[task.domain].index(stated[0]) if stated else 0
        s.art_version[seat, d] += 1
        return s

    async def run_code(self, source: str, task: Task) -> SandboxResult:
        """Run a code artifact on a task's example inputs and its query in the sandbox (a
        subprocess with CPU, memory, wall-clock, file and network limits); counted."""
        inputs = [x for x, _ in task.examples] + [task.query]
        res = await asyncio.to_thread(run_function, source, "solve", inputs)
        self.stats[2:] += (1, not res.ok)
        return res

    async def solve_requests(self, tasks: list, retrieved: list, seats: list[int]) -> list[Request]:
        """The solve request of each (task, retrieved artifacts, agent); code artifacts are
        run first, in the sandbox, and what they gave is shown beside them."""
        jobs = [(k, a) for k, arts in enumerate(retrieved) for a in arts if a.kind == "code"]
        results = await asyncio.gather(*(self.run_code(a.content, tasks[k]) for k, a in jobs))
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
                    sample=self.r, agent=seats[k], cohort="llm")
            for k, (t, arts) in enumerate(zip(tasks, retrieved, strict=True))
        ]  # fmt: skip

    async def scores(self, s: dyn.World, kind: np.ndarray) -> np.ndarray:
        """(agents, splits, tasks) correctness on the fixed evaluation sets, no learning."""
        tasks, retrieved, who = [], [], []
        for seat in self.agents.tolist():
            for split in SPLITS:
                for task in self.eval_sets[split]:
                    tasks.append(task)
                    retrieved.append(self.retrieve(seat, task.prompt(), task.domain, s, kind))
                    who.append(seat)
        replies = await self.client.complete_many(await self.solve_requests(tasks, retrieved, who))
        ok = [
            verify(t, (c.parsed or NO_ANSWER).answer) for t, c in zip(tasks, replies, strict=True)
        ]
        return np.asarray(ok, np.float64).reshape(self.agents.size, len(SPLITS), -1)

    # -- checkpoints -----------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        """Everything the cohort changes, as data: the store's database image, the task
        draws, what was published, the counts, an attempt in flight (its replies in)."""
        attempt = self.in_flight.result() if self.in_flight is not None else None
        return {
            **super().state_dict(),
            "store": np.frombuffer(self.store.to_bytes(), np.uint8),
            "rng": self.rng.bit_generator.state, "stats": self.stats.copy(),
            "published": [[*slot, aid] for slot, aid in self.published.items()],
            "version": [[*slot, v] for slot, v in self.version.items()],
            "asked_at": self.asked_at, "in_flight": None if attempt is None else {
                "domains": attempt["domains"], "won": attempt["won"],
                "notes": [list(x) for x in attempt["notes"]],
                "tasks": [dataclasses.asdict(t) for t in attempt["tasks"]],
                "retrieved": [[a.id for a in arts] for arts in attempt["retrieved"]],
            },
        }  # fmt: skip

    def load_state_dict(self, state: dict[str, Any]) -> None:
        super().load_state_dict(state)
        self.store.load_bytes(np.asarray(state["store"], np.uint8).tobytes())
        self.rng.bit_generator.state = state["rng"]
        self.stats = np.array(state["stats"], float)
        self.published = {(int(a), int(d)): str(aid) for a, d, aid in state["published"]}
        self.version = {(int(a), int(d)): int(v) for a, d, v in state["version"]}
        self.asked_at, data = int(state["asked_at"]), state["in_flight"]
        self.in_flight = None
        if data is not None:  # its replies were in: they land as saved
            self.in_flight = asyncio.get_running_loop().create_future()
            self.in_flight.set_result({
                "domains": np.asarray(data["domains"]), "won": np.asarray(data["won"]),
                "notes": [(int(j), str(text)) for j, text in data["notes"]],
                "tasks": [Task(**{**t, "examples": tuple(tuple(e) for e in t["examples"])}) for t in data["tasks"]],
                "retrieved": [self.store.get_many(ids) for ids in data["retrieved"]],
            })  # fmt: skip
