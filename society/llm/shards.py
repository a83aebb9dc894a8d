"""An LLM client's network calls spread over Ray actors (``LLMConfig.shards``).

What costs a process CPU per LLM call is mostly the HTTP exchange (about 0.3 ms on the fast
path, 6-10 ms through litellm); with thousands of LLM agents a moment, that is the one
core's work. With ``shards = k`` the client keeps everything that decides what a run means
(prompts, the response cache, replay, parsing and the one repair, fallbacks, degenerate
replies, usage, budgets) and sends the calls a moment needs to ``k`` actors, each with its
own HTTP transport, in one message per actor. A reply does not depend on which actor
fetched it, so a sharded run's rows equal an unsharded one's.

Each actor limits its calls in flight to ``concurrency``, so ``k`` of them allow ``k``
times as many. Ray is started on first use (or reached at the ``RAY_ADDRESS`` Ray itself
reads) and shut down with the client if the client started it.
"""

from __future__ import annotations

import asyncio
import os
from typing import Any

import numpy as np

from sim_core.errors import RunError
from society.llm.cache import CacheEntry
from society.llm.config import LLMConfig
from society.llm.transports import RawReply, TransportError

IO = ("network_calls", "retries", "network_cost_usd")  # what an actor's calls add to usage


class _Fetcher:
    """The actor: a transport-only client (no cache, no accounting beyond its I/O)."""

    def __init__(self, config: dict[str, Any]) -> None:
        self.config, self.client = config, None

    def _ready(self) -> Any:
        if self.client is None:
            from society.llm.client import LLMClient

            self.client = LLMClient(LLMConfig(**self.config))
        return self.client

    async def fetch_many(
        self, items: list[tuple[dict[str, Any], list[int]]]
    ) -> tuple[list[dict[int, CacheEntry]], dict[str, float]]:
        """Each (params, samples) fetched as the client's ``_fetch`` does, all in flight."""
        client = self._ready()
        before = {k: client.usage.total[k] for k in IO}
        out = await asyncio.gather(*(client._fetch(p, s) for p, s in items))
        return list(out), {k: client.usage.total[k] - before[k] for k in IO}

    async def call(self, params: dict[str, Any]) -> tuple[RawReply | tuple, dict[str, float]]:
        """One logical call with retries; a failure comes back as data to raise again."""
        client = self._ready()
        before = {k: client.usage.total[k] for k in IO}
        try:
            out: RawReply | tuple = await client._call(params)
        except TransportError as e:
            out = (str(e), e.retryable, e.retry_after, e.status)
        return out, {k: client.usage.total[k] - before[k] for k in IO}

    def pid(self) -> int:
        return os.getpid()

    async def close(self) -> None:
        if self.client is not None:
            await self.client.aclose()


class ShardPool:
    """``config.shards`` Ray actors that make a client's network calls (module docstring)."""

    def __init__(self, config: LLMConfig) -> None:
        self.shards = config.shards
        self.config = config.model_copy(update={"shards": 1, "cache_path": None})
        self.actors: list[Any] = []
        self._started_ray = False

    def _ready(self) -> list[Any]:
        if not self.actors:
            from sim_core.ray_runtime import check_reachable, start_ray

            address = os.environ.get("RAY_ADDRESS")
            if address:  # one line now, not minutes of ray.init's retries
                check_reachable(address)
            ray, self._started_ray = start_ray(self.shards, address)
            actor = ray.remote(num_cpus=0)(_Fetcher)  # it waits on the network, not a core
            dumped = self.config.model_dump(mode="json")
            self.actors = [actor.remote(dumped) for _ in range(self.shards)]
        return self.actors

    async def fetch_many(
        self, items: list[tuple[dict[str, Any], list[int]]], usage: Any
    ) -> list[dict[int, CacheEntry]]:
        """Every item fetched, a contiguous part of them by each actor; the actors' I/O
        counts are added to ``usage``."""
        actors = self._ready()
        parts = [p for p in np.array_split(np.arange(len(items)), len(actors)) if p.size]
        done = await _answered(
            actors[i].fetch_many.remote([items[j] for j in p]) for i, p in enumerate(parts)
        )
        out: list[dict[int, CacheEntry]] = []
        for got, io in done:
            out += got
            for k, v in io.items():
                usage.total[k] += v
        return out

    async def call(self, params: dict[str, Any], usage: Any) -> RawReply:
        """One call (a repair) by the first actor, raised again as the TransportError it was."""
        [(out, io)] = await _answered([self._ready()[0].call.remote(params)])
        for k, v in io.items():
            usage.total[k] += v
        if isinstance(out, tuple):
            message, retryable, retry_after, status = out
            raise TransportError(
                message, retryable=retryable, retry_after=retry_after, status=status
            )
        return out

    def pids(self) -> list[int]:
        """The process of each actor (started if it was not)."""
        import ray

        return ray.get([a.pid.remote() for a in self._ready()])

    async def aclose(self) -> None:
        if not self.actors:
            return
        import ray

        await asyncio.gather(*(a.close.remote() for a in self.actors), return_exceptions=True)
        for a in self.actors:
            ray.kill(a)
        self.actors = []
        if self._started_ray:
            ray.shutdown()


async def _answered(calls: Any) -> list[Any]:
    """The actors' answers; an actor that died (or whose Ray did) ends the run with one line
    (its calls cannot be told apart from failed ones, so falling back would hide it)."""
    import ray

    try:
        return await asyncio.gather(*calls)
    except ray.exceptions.RayError as exc:
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0].rstrip(".")
        raise RunError(
            f"an LLM shard (Ray actor) failed: {first}; rerun, or resume the run"
        ) from None
