"""An LLM cohort sharded over Ray actors: each actor holds a shard of the agents as its own
:class:`LLMCohort` (prompts, memories) with its own :class:`LLMClient`, so a large LLM
population's calls, parsing and bookkeeping spread over processes, or over the machines of
a Ray cluster (``address``). The population sees one cohort: ``aact`` sends each shard its
agents' observations and gathers the actions in the agents' order.

    cohort = ShardedLLMCohort("llm", ids, LLMConfig(model=..., api_base=...), shards=4,
                              schema=Give, fallback=Give(give=False), template="...")
    pop = Population([rules, cohort])      # acts like any cohort
    usage = await cohort.usage()           # every shard's client accounting, summed
    cohort.close()

Many endpoints: give the config ``replicas`` (litellm's Router spreads the calls) or point
shards at different servers with a list of configs, one per shard, as ``config``.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Sequence
from typing import Any

import jax
import numpy as np

from society.cohorts.base import Cohort, Pytree
from society.llm.config import LLMConfig


class _Shard:
    """The actor: a shard's LLMCohort and the client it calls, made in the actor's loop."""

    def __init__(
        self, name: str, agents: np.ndarray, config: dict[str, Any], kwargs: dict[str, Any]
    ):
        self.name, self.agents, self.config, self.kwargs = name, agents, config, kwargs
        self.client: Any = None
        self.cohort: Any = None

    async def _ready(self) -> Any:
        if self.cohort is None:
            from society.cohorts.llm import LLMCohort
            from society.llm.client import LLMClient

            self.client = await LLMClient(LLMConfig(**self.config)).__aenter__()
            self.cohort = LLMCohort(self.name, self.agents, self.client, **self.kwargs)
        return self.cohort

    async def aact(self, agents: np.ndarray, obs: dict[str, np.ndarray]) -> np.ndarray:
        return await (await self._ready()).aact(agents, obs, None)

    async def learn(self, agents: np.ndarray, rewards: np.ndarray) -> None:
        (await self._ready()).learn(agents, {}, None, rewards, None)

    async def usage(self) -> dict[str, float]:
        await self._ready()
        return {k: float(v) for k, v in self.client.usage.total.items()}

    def pid(self) -> int:
        return os.getpid()

    async def close(self) -> None:
        if self.client is not None:
            await self.client.aclose()


class ShardedLLMCohort(Cohort):
    """LLM agents in ``shards`` Ray actors (see the module docstring). ``cohort_kwargs`` are
    :class:`LLMCohort`'s (schema, fallback, template, ...); they travel to the actors, so
    callables in them must be picklable by cloudpickle (lambdas are)."""

    is_async = True

    def __init__(
        self,
        name: str,
        agents: np.ndarray | Sequence[int],
        config: LLMConfig | Sequence[LLMConfig],
        *,
        shards: int = 2,
        address: str | None = None,
        **cohort_kwargs: Any,
    ):
        super().__init__(name, agents)
        configs = [config] * shards if isinstance(config, LLMConfig) else list(config)
        if shards < 1 or len(configs) != shards:
            raise ValueError(
                f"cohort '{name}': shards must be >= 1 with one config each (got {shards}, {len(configs)})"
            )
        from sim_core.ray_runtime import check_reachable, start_ray

        if address:
            check_reachable(address)
        ray, self._started_ray = start_ray(shards, address)
        actor = ray.remote(num_cpus=0)(_Shard)  # waits on the network, not on a core
        parts = np.array_split(np.arange(len(self.agents)), shards)
        self.owner = np.repeat(np.arange(shards), [len(p) for p in parts])  # shard of each position
        self.shards = [
            actor.remote(name, self.agents[p], c.model_dump(mode="json"), cohort_kwargs)
            for p, c in zip(parts, configs, strict=True)
        ]

    def _split(self, agents: np.ndarray) -> list[tuple[int, np.ndarray]]:
        """(shard, mask over ``agents``) for every shard holding some of them."""
        which = self.owner[self.local(agents)]
        return [(int(s), which == s) for s in np.unique(which)]  # a loop over shards

    async def aact(self, agents: np.ndarray, obs: Pytree, key: jax.Array) -> np.ndarray:
        agents = np.asarray(agents, dtype=np.int64)
        host = {k: np.asarray(v) for k, v in dict(obs).items()}
        parts = self._split(agents)
        calls = [
            self.shards[s].aact.remote(
                agents[m], {k: v[m] if v.ndim else v for k, v in host.items()}
            )
            for s, m in parts
        ]
        actions = np.empty(len(agents), dtype=np.float64)
        for (_, m), out in zip(parts, await asyncio.gather(*calls), strict=True):
            actions[m] = out
        return actions

    def act(self, agents: np.ndarray, obs: Pytree, key: jax.Array) -> np.ndarray:
        raise TypeError(f"cohort '{self.name}' is asynchronous: await aact() (the population does)")

    def learn(
        self, agents: np.ndarray, obs: Pytree, actions: Any, rewards: Any, key: jax.Array
    ) -> None:
        """Outcomes enter each agent's memory, in its shard (as LLMCohort.learn)."""
        import ray

        agents, rewards = np.asarray(agents, dtype=np.int64), np.asarray(rewards)
        ray.get(
            [self.shards[s].learn.remote(agents[m], rewards[m]) for s, m in self._split(agents)]
        )

    async def usage(self) -> dict[str, float]:
        """Every shard's client accounting (requests, tokens, cost, failures...), summed."""
        totals: dict[str, float] = {}
        for u in await asyncio.gather(*(s.usage.remote() for s in self.shards)):
            for k, v in u.items():
                totals[k] = totals.get(k, 0.0) + v
        return totals

    def pids(self) -> list[int]:
        """The process of each shard."""
        import ray

        return ray.get([s.pid.remote() for s in self.shards])

    def close(self) -> None:
        """Close the shards' clients and end the actors (and Ray, if this cohort started it)."""
        import ray

        ray.get([s.close.remote() for s in self.shards])
        for s in self.shards:
            ray.kill(s)
        if self._started_ray:
            ray.shutdown()
