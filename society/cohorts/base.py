"""One interface for every kind of agent group (rule, learned, LLM).

A *cohort* is a group of agents that decide the same way. Agents are global integer ids
(indices into the world-state arrays); a cohort keeps its own per-agent state (strategy
ids, stacked policy parameters, LLM memories) in arrays aligned with ``cohort.agents``.
Once per moment the engine hands each cohort the observations of its due agents as a
pytree with a leading agent axis and gets their actions back in one call: a compiled,
vmapped kernel for rule and learned cohorts, concurrent calls for an LLM cohort. Outcomes
come back through :meth:`Cohort.learn`.

Everything a cohort holds is reachable from :meth:`Cohort.state_dict`, so a run can be
checkpointed and a cohort moved to another process.
"""

from __future__ import annotations

from typing import Any

import jax
import numpy as np

Pytree = Any


class Cohort:
    """Base class. Subclasses implement :meth:`act` (or :meth:`aact`) and may implement
    :meth:`learn`, :meth:`state_dict`/:meth:`load_state_dict` and the lifecycle hooks."""

    #: True for cohorts whose decisions are awaited (LLM); the engine gathers them.
    is_async: bool = False

    def __init__(self, name: str, agents: np.ndarray | list[int]):
        agents = np.asarray(agents, dtype=np.int64)
        if agents.ndim != 1:
            raise ValueError(
                f"cohort '{name}': agents must be a 1-D array of ids, got shape {agents.shape}"
            )
        if agents.size and (np.diff(np.sort(agents)) == 0).any():
            raise ValueError(f"cohort '{name}': agent ids must be unique")
        self.name = name
        self.agents = agents

    def __len__(self) -> int:
        return int(self.agents.size)

    def local(self, agents: np.ndarray) -> np.ndarray:
        """Positions of global ``agents`` in this cohort's arrays (error if not members).

        The sort of ``self.agents`` is cached until that array is replaced (lifecycle
        hooks assign a new array), so a lookup costs one binary search per agent.
        """
        agents = np.asarray(agents, dtype=np.int64)
        if agents.size == self.agents.size and np.array_equal(agents, self.agents):
            return np.arange(agents.size)  # the whole cohort in its own order: the common case
        cache = self.__dict__.get("_local_cache")
        if cache is None or cache[0] is not self.agents:
            order = np.argsort(self.agents, kind="stable")
            cache = (self.agents, order, self.agents[order])
            self._local_cache = cache
        _, order, srt = cache
        if srt.size == 0:
            if agents.size:
                raise ValueError(
                    f"cohort '{self.name}': agents {agents[:5].tolist()} are not members"
                )
            return np.zeros(0, dtype=np.int64)
        pos = np.minimum(np.searchsorted(srt, agents), srt.size - 1)
        bad = srt[pos] != agents
        if bad.any():
            raise ValueError(
                f"cohort '{self.name}': agents {agents[bad][:5].tolist()} are not members"
            )
        return order[pos]

    # -- deciding ------------------------------------------------------------------------
    def act(self, agents: np.ndarray, obs: Pytree, key: jax.Array) -> Pytree:
        """Actions of ``agents`` (leading axis aligned with ``agents``) given ``obs``."""
        raise NotImplementedError(f"{type(self).__name__} does not implement act()")

    async def aact(self, agents: np.ndarray, obs: Pytree, key: jax.Array) -> Pytree:
        """Awaitable form used by the engine; numeric cohorts just call :meth:`act`."""
        return self.act(agents, obs, key)

    def learn(
        self, agents: np.ndarray, obs: Pytree, actions: Pytree, rewards: jax.Array, key: jax.Array
    ) -> None:
        """Update from the outcome of the last actions. Default: no learning."""

    # -- lifecycle hooks (used by society.population.Population) ---------------------------
    def clone(
        self,
        src_agents: np.ndarray,
        new_agents: np.ndarray,
        key: jax.Array | None = None,
        mutation: float = 0.0,
    ) -> None:
        """Add ``new_agents`` inheriting the per-agent state of ``src_agents`` (mutated)."""
        raise TypeError(f"cohort '{self.name}' ({type(self).__name__}) cannot clone agents")

    def spawn(self, new_agents: np.ndarray, key: jax.Array | None = None) -> None:
        """Add fresh ``new_agents`` with newly drawn state."""
        raise TypeError(f"cohort '{self.name}' ({type(self).__name__}) cannot spawn fresh agents")

    def merge(
        self,
        first: np.ndarray,
        second: np.ndarray,
        new_agents: np.ndarray,
        key: jax.Array | None = None,
    ) -> None:
        """Add ``new_agents`` combining two parents each; by default they inherit the first
        parent's state (cohorts with numeric state override this)."""
        self.clone(first, new_agents, key=key)

    def remove(self, agents: np.ndarray) -> None:
        """Drop ``agents`` and their state."""
        raise TypeError(f"cohort '{self.name}' ({type(self).__name__}) cannot remove agents")

    # -- state ---------------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        """Everything needed to rebuild this cohort (arrays as numpy)."""
        return {"name": self.name, "agents": np.asarray(self.agents)}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.name = state["name"]
        self.agents = np.asarray(state["agents"], dtype=np.int64)
