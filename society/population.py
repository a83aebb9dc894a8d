"""A population: cohorts acting in one world, and its lifecycle across generations.

Agents live in *slots*: integer ids that index the world-state arrays (the leading agent
axis). A slot is reused when its occupant dies, so every birth also gets a *serial*, a
lifetime identity that lineage records use: ``(child, parents, slot, generation, op,
time)``. Per-agent state (strategies, policy parameters, memories) lives in the cohorts;
the population routes slots to cohorts and applies lifecycle operators through the cohort
hooks ``clone`` (inherit, optionally mutated), ``remove`` and, for fresh agents, ``spawn``.

Acting once per moment: :meth:`Population.act` splits the due agents by cohort with array
masks (no loop over agents), calls each numeric cohort once (one compiled call) and awaits
all async (LLM) cohorts together.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import jax
import numpy as np
import pandas as pd

from sim_core.rng import fold
from society.cohorts.base import Cohort, Pytree
from society.fields import KINDS

LINEAGE_COLUMNS = ("child", "parent", "second_parent", "slot", "generation", "op", "time")


def kinds_of(cfg: Any, rng: np.random.Generator | int, n: int | None = None) -> np.ndarray:
    """The kind of each of ``n`` agents (default ``cfg.population``) as an object array:
    all ``cfg.agents``, or with ``agents=mixed`` the ``cfg.split`` counted by largest
    remainder and shuffled with ``rng`` (scenarios draw one per replicate)."""
    from society.cohorts.rules import parse_mix  # jax-heavy module: imported when used

    n = cfg.population if n is None else n
    if cfg.agents != "mixed":
        return np.full(n, cfg.agents, dtype=object)
    return parse_mix(cfg.split, n, rng).astype(object)


def uses_llm(cfg: Any, n: int | None = None) -> bool:
    """Whether any agent is an LLM agent (a split's counts, without drawing the kinds)."""
    from society.cohorts.rules import mix_counts

    if cfg.agents != "mixed":
        return cfg.agents == "llm"
    return mix_counts(cfg.split, cfg.population if n is None else n).get("llm", 0) > 0


def build_population(
    kinds: np.ndarray,
    ids: np.ndarray,
    make: Mapping[str, Callable[[np.ndarray], Cohort]],
    *,
    capacity: int | None = None,
) -> Population:
    """One cohort per kind present, in :data:`KINDS` order: ``make[kind](ids of that kind)``.
    The one population builder of every scenario; ``make`` holds its cohort factories."""
    kinds, ids = np.asarray(kinds).ravel(), np.asarray(ids).ravel()
    missing = sorted(set(kinds.tolist()) - set(make))
    if missing:
        raise ValueError(
            f"no cohort factory for kind(s) {', '.join(missing)}; this scenario has {', '.join(make)}"
        )
    return Population(
        [make[k](ids[kinds == k]) for k in KINDS if (kinds == k).any()], capacity=capacity
    )


class Population:
    """Cohorts over ``capacity`` slots (default: one past the largest member id)."""

    def __init__(self, cohorts: Sequence[Cohort], capacity: int | None = None):
        names = [c.name for c in cohorts]
        if len(set(names)) != len(names):
            raise ValueError(f"cohort names must be unique, got {names}")
        members = np.concatenate([c.agents for c in cohorts]) if cohorts else np.zeros(0, np.int64)
        if np.unique(members).size != members.size:
            raise ValueError("an agent belongs to two cohorts; cohorts must be disjoint")
        cap = int(members.max(initial=-1)) + 1 if capacity is None else int(capacity)
        if members.size and members.max() >= cap:
            raise ValueError(f"agent id {int(members.max())} does not fit capacity={cap}")
        self.cohorts = list(cohorts)
        self.cohort_of = np.full(cap, -1, dtype=np.int32)
        for i, c in enumerate(self.cohorts):
            self.cohort_of[c.agents] = i
        self.serial = np.full(cap, -1, dtype=np.int64)
        alive = self.cohort_of >= 0
        self.serial[alive] = np.arange(int(alive.sum()))
        self.next_serial = int(alive.sum())
        self.generation = np.zeros(cap, dtype=np.int64)
        self._lineage: list[dict[str, np.ndarray]] = []
        self._replacements: list[dict[str, np.ndarray]] = []

    # -- structure ---------------------------------------------------------------------
    @property
    def capacity(self) -> int:
        return int(self.cohort_of.size)

    @property
    def alive(self) -> np.ndarray:
        return self.cohort_of >= 0

    def __len__(self) -> int:
        return int(self.alive.sum())

    def cohort(self, name: str) -> Cohort:
        for c in self.cohorts:
            if c.name == name:
                return c
        raise KeyError(f"no cohort '{name}'; cohorts: {', '.join(c.name for c in self.cohorts)}")

    def _check_alive(self, slots: np.ndarray, what: str) -> np.ndarray:
        slots = np.atleast_1d(np.asarray(slots, dtype=np.int64))
        if slots.size and (slots.min() < 0 or slots.max() >= self.capacity):
            raise ValueError(f"{what}: slots must lie in [0, {self.capacity})")
        if slots.size and not self.alive[slots].all():
            raise ValueError(f"{what}: slots {slots[~self.alive[slots]][:5].tolist()} are empty")
        return slots

    # -- acting ------------------------------------------------------------------------
    def _split(self, agents: np.ndarray) -> list[tuple[Cohort, np.ndarray | slice]]:
        """Each cohort with the mask of its agents; ``slice(None)`` when one cohort has them all
        (then observations pass through uncopied)."""
        which = self.cohort_of[agents]
        if (which < 0).any():
            raise ValueError(f"agents {agents[which < 0][:5].tolist()} are not alive")
        parts = [(c, which == i) for i, c in enumerate(self.cohorts) if (which == i).any()]
        if len(parts) == 1:
            return [(parts[0][0], slice(None))]
        return parts

    @staticmethod
    def _rows(tree: Pytree, mask: np.ndarray | slice) -> Pytree:
        if isinstance(mask, slice):
            return tree
        return jax.tree_util.tree_map(lambda x: x[mask], tree)

    async def act(self, agents: np.ndarray, obs: Pytree, key: jax.Array) -> np.ndarray:
        """Actions of ``agents`` (aligned with them). Each cohort is called once; async
        cohorts are awaited together. Cohort actions must share shape and dtype."""
        agents = np.asarray(agents, dtype=np.int64)
        parts = self._split(agents)
        calls = []
        for c, mask in parts:
            calls.append(
                c.aact(
                    agents[mask],
                    self._rows(obs, mask),
                    fold(key, self.cohorts.index(c)),
                )
            )
        results = [np.asarray(r) for r in await asyncio.gather(*calls)]
        if not results:
            return np.zeros(0)
        if isinstance(parts[0][1], slice):
            return np.array(results[0])  # a writable copy, as with several cohorts
        # One dtype for all: integer rule actions next to fractional LLM actions stay exact.
        out = np.zeros((agents.size,) + results[0].shape[1:], dtype=np.result_type(*results))
        for (_, mask), res in zip(parts, results, strict=True):
            out[mask] = res
        return out

    def learn(
        self, agents: np.ndarray, obs: Pytree, actions: Any, rewards: Any, key: jax.Array
    ) -> None:
        """Hand each cohort the outcomes of its agents' last actions."""
        agents = np.asarray(agents, dtype=np.int64)
        actions, rewards = np.asarray(actions), np.asarray(rewards)
        for c, mask in self._split(agents):
            sub = self._rows(obs, mask)
            c.learn(
                agents[mask],
                sub,
                actions[mask],
                rewards[mask],
                fold(key, self.cohorts.index(c)),
            )

    # -- lifecycle ---------------------------------------------------------------------
    def _record(self, child, parent, second, slot, gen, op: str, time: float) -> None:
        n = len(child)
        self._lineage.append(
            {
                "child": np.asarray(child, np.int64),
                "parent": np.asarray(parent, np.int64),
                "second_parent": np.broadcast_to(np.asarray(second, np.int64), (n,)),
                "slot": np.asarray(slot, np.int64),
                "generation": np.asarray(gen, np.int64),
                "op": np.full(n, op, dtype=object),
                "time": np.full(n, float(time)),
            }
        )

    def _births(
        self, slots: np.ndarray, cohort_idx: np.ndarray, generation: np.ndarray
    ) -> np.ndarray:
        serials = self.next_serial + np.arange(slots.size)
        self.next_serial += slots.size
        self.cohort_of[slots] = cohort_idx
        self.serial[slots] = serials
        self.generation[slots] = generation
        return serials

    def remove(self, slots: np.ndarray) -> np.ndarray:
        """Agents in ``slots`` die: their cohorts drop their state; the slots become free."""
        slots = self._check_alive(slots, "remove")
        for i, c in enumerate(self.cohorts):
            mine = slots[self.cohort_of[slots] == i]
            if mine.size:
                c.remove(mine)
        self.cohort_of[slots] = -1
        self.serial[slots] = -1
        return slots

    def prune(self, fitness: np.ndarray, count: int) -> np.ndarray:
        """Remove the ``count`` living agents with the lowest fitness (ties: lowest slot)."""
        fitness = np.asarray(fitness, dtype=float)
        if fitness.shape != (self.capacity,):
            raise ValueError(
                f"fitness must have one value per slot ({self.capacity}), got {fitness.shape}"
            )
        if not 0 <= count <= len(self):
            raise ValueError(f"count must lie in [0, {len(self)}], got {count}")
        live = np.flatnonzero(self.alive)
        worst = live[np.argsort(fitness[live], kind="stable")[:count]]
        return self.remove(worst)

    def fork(
        self,
        parents: np.ndarray,
        slots: np.ndarray,
        *,
        key: jax.Array,
        mutation: float = 0.0,
        time: float = 0.0,
    ) -> np.ndarray:
        """Children of ``parents`` (clones, mutated at rate ``mutation``) born into the free
        ``slots``, in their parents' cohorts. Returns the children's serials."""
        parents = self._check_alive(parents, "fork")
        slots = np.atleast_1d(np.asarray(slots, dtype=np.int64))
        if slots.size != parents.size:
            raise ValueError(f"fork: {parents.size} parents but {slots.size} slots")
        if self.alive[slots].any() or np.unique(slots).size != slots.size:
            raise ValueError("fork: target slots must be distinct and free (remove or prune first)")
        which = self.cohort_of[parents]
        for i, c in enumerate(self.cohorts):
            m = which == i
            if m.any():
                c.clone(parents[m], slots[m], key=fold(key, i), mutation=mutation)
        parent_serials = self.serial[parents]
        children = self._births(slots, which, self.generation[parents] + 1)
        self._record(children, parent_serials, -1, slots, self.generation[slots], "fork", time)
        return children

    def seed(
        self,
        cohort: str,
        slots: np.ndarray,
        *,
        key: jax.Array,
        time: float = 0.0,
        generation: int = 0,
    ) -> np.ndarray:
        """Fresh agents (no parents) of ``cohort`` in the free ``slots``."""
        slots = np.atleast_1d(np.asarray(slots, dtype=np.int64))
        if self.alive[slots].any():
            raise ValueError("seed: target slots must be free")
        idx = self.cohorts.index(self.cohort(cohort))
        self.cohorts[idx].spawn(slots, key=key)
        children = self._births(slots, np.full(slots.size, idx), np.full(slots.size, generation))
        self._record(
            children, np.full(slots.size, -1), -1, slots, self.generation[slots], "seed", time
        )
        return children

    def replace_worst(
        self,
        fitness: np.ndarray,
        fraction: float,
        *,
        key: jax.Array,
        mutation: float = 0.0,
        time: float = 0.0,
    ) -> tuple[np.ndarray, np.ndarray]:
        """One generation of truncation selection: the worst ``fraction`` die and the best
        as many fork into their slots (best first). Returns (slots replaced, parents)."""
        if not 0.0 <= fraction <= 0.5:
            raise ValueError(f"fraction must lie in [0, 0.5], got {fraction}")
        fitness = np.asarray(fitness, dtype=float)
        count = int(round(fraction * len(self)))
        live = np.flatnonzero(self.alive)
        order = live[np.argsort(-fitness[live], kind="stable")]
        parents = order[:count]
        dead = self.prune(fitness, count)
        self.fork(parents, dead, key=key, mutation=mutation, time=time)
        return dead, parents

    def merge(
        self,
        first: np.ndarray,
        second: np.ndarray,
        slots: np.ndarray,
        *,
        key: jax.Array,
        time: float = 0.0,
    ) -> np.ndarray:
        """Children of two parents each, born into the free ``slots`` in the first parent's
        cohort (which must also hold the second): the cohort's ``merge`` hook combines them
        (learned: mean of the parameters; rule and LLM cohorts: the first parent's state)."""
        first = self._check_alive(first, "merge")
        second = self._check_alive(second, "merge")
        slots = np.atleast_1d(np.asarray(slots, dtype=np.int64))
        if not first.size == second.size == slots.size:
            raise ValueError("merge: first, second and slots must have the same length")
        if self.alive[slots].any() or np.unique(slots).size != slots.size:
            raise ValueError("merge: target slots must be distinct and free")
        which = self.cohort_of[first]
        if (self.cohort_of[second] != which).any():
            raise ValueError("merge: both parents must belong to the same cohort")
        for i, c in enumerate(self.cohorts):
            m = which == i
            if m.any():
                c.merge(first[m], second[m], slots[m], key=fold(key, i))
        gen = np.maximum(self.generation[first], self.generation[second]) + 1
        ps, ss = self.serial[first], self.serial[second]
        children = self._births(slots, which, gen)
        self._record(children, ps, ss, slots, gen, "merge", time)
        return children

    def free_agency(
        self, fitness: np.ndarray, newcomers: np.ndarray, *, time: float = 0.0
    ) -> tuple[np.ndarray, np.ndarray]:
        """Resolve the probation of ``newcomers`` (agents already placed, e.g. by ``seed`` or
        ``fork`` into spare slots, who have played at least one evaluation period): each is
        matched, best newcomer first, with the worst-performing incumbent not on probation.
        A newcomer that beats its incumbent (strictly higher ``fitness``, typically a
        cumulative score so that only persistent under-performers lose) replaces it; one
        that does not is removed. Returns (incumbents replaced, newcomers rejected)."""
        fitness = np.asarray(fitness, dtype=float)
        newcomers = self._check_alive(newcomers, "free_agency")
        incumbents = np.setdiff1d(np.flatnonzero(self.alive), newcomers)
        order_n = newcomers[np.argsort(-fitness[newcomers], kind="stable")]
        order_i = incumbents[np.argsort(fitness[incumbents], kind="stable")][: order_n.size]
        order_n = order_n[: order_i.size]
        wins = fitness[order_n] > fitness[order_i]
        replaced, rejected = order_i[wins], np.setdiff1d(newcomers, order_n[wins])
        self._replacements.append(
            {
                "newcomer": self.serial[order_n[wins]],
                "replaced": self.serial[replaced],
                "time": np.full(int(wins.sum()), float(time)),
            }
        )
        self.remove(np.concatenate([replaced, rejected]))
        return replaced, rejected

    def replacements(self) -> pd.DataFrame:
        """Free-agency outcomes: newcomer serial, serial of the incumbent it replaced, time."""
        if not self._replacements:
            return pd.DataFrame({"newcomer": [], "replaced": [], "time": []})
        return pd.DataFrame(
            {
                k: np.concatenate([r[k] for r in self._replacements])
                for k in ("newcomer", "replaced", "time")
            }
        )

    def parent_map(self) -> dict[int, tuple[int, ...]]:
        """child serial -> parent serials, e.g. for the artifact store's ``inherited`` policy
        (artifacts authored under serials, which unlike slots are never reused)."""
        df = self.lineage()
        return {
            int(c): tuple(int(p) for p in (p1, p2) if p >= 0)
            for c, p1, p2 in zip(df["child"], df["parent"], df["second_parent"], strict=True)
        }

    def lineage(self) -> pd.DataFrame:
        """Every birth: child and parent serials (-1: none), slot, generation, op, time."""
        if not self._lineage:
            return pd.DataFrame(
                {c: pd.Series(dtype=object if c == "op" else float) for c in LINEAGE_COLUMNS}
            )
        cols = {k: np.concatenate([r[k] for r in self._lineage]) for k in LINEAGE_COLUMNS}
        return pd.DataFrame(cols)

    def ancestors(self, serial: int) -> list[int]:
        """Serials of all ancestors of ``serial`` (nearest first)."""
        df = self.lineage()
        parent = dict(zip(df["child"], df["parent"], strict=True))
        out, cur = [], parent.get(serial, -1)
        while cur != -1:
            out.append(int(cur))
            cur = parent.get(cur, -1)
        return out

    def state_dict(self) -> dict[str, Any]:
        """Everything needed to rebuild the population (numpy arrays and plain values)."""
        return {
            "cohorts": [c.state_dict() for c in self.cohorts],
            "cohort_of": self.cohort_of.copy(),
            "serial": self.serial.copy(),
            "generation": self.generation.copy(),
            "next_serial": self.next_serial,
            "lineage": self.lineage().to_dict(orient="list"),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore from :meth:`state_dict` into a population built with the same cohorts
        (names and order), e.g. when a run resumes from a checkpoint."""
        names = [c["name"] for c in state["cohorts"]]
        if names != [c.name for c in self.cohorts]:
            raise ValueError(
                f"state has cohorts {names}, this population {[c.name for c in self.cohorts]}"
            )
        for cohort, s in zip(self.cohorts, state["cohorts"], strict=True):
            cohort.load_state_dict(s)
        self.cohort_of = np.asarray(state["cohort_of"], np.int32).copy()
        self.serial = np.asarray(state["serial"], np.int64).copy()
        self.generation = np.asarray(state["generation"], np.int64).copy()
        self.next_serial = int(state["next_serial"])
        lineage = state["lineage"]
        rows = {
            k: np.asarray(lineage[k], dtype=object if k == "op" else np.int64)
            for k in LINEAGE_COLUMNS
            if k != "time"
        }
        rows["time"] = np.asarray(lineage["time"], np.float64)
        self._lineage = [rows] if len(rows["child"]) else []
