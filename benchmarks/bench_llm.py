"""Benchmark of the LLM client: fast path against litellm, side by side, in one run.

    .venv/bin/python benchmarks/bench_llm.py [--quick]

1. Client CPU per call against an instant server (target: fast path <= 0.5 ms and >= 10x
   cheaper than litellm), and calls per second per process.
2. 2,000 calls at concurrency 512 against a server with 200 ms latency (target: fast path
   within 1.5x of the ideal ceil(2000/512) * 0.2 s = 0.8 s; litellm reported).
3. The dedupe saving on a population with repeated prompts, and archetypes on 1e6 agents.
4. Calls sharded over Ray actors (``LLMConfig.shards``, ``--llm-shards``): moments of 1,000
   calls against the 200 ms server, each path with 1 and 2 shards: wall time per moment and
   this process's CPU (``--shards-only`` runs this part alone).

The test server runs in a separate process so that its CPU is not counted as the client's;
client CPU is time.process_time() of this process (all its threads).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import multiprocessing as mp
import time
from typing import Any

import numpy as np

from society.llm import Archetypes, LLMClient, LLMConfig, Request


def _serve(latency: float, conn: Any) -> None:
    """Server process: report the url, answer "stats", stop on "stop"."""
    from society.llm.testserver import TestServer

    async def main() -> None:
        async with TestServer(latency=latency) as srv:
            conn.send(srv.url)
            loop = asyncio.get_running_loop()
            while True:
                command = await loop.run_in_executor(None, conn.recv)
                stats = {"requests": srv.requests, "max_in_flight": srv.max_in_flight}
                conn.send(stats | {"cpu_s": time.process_time()})
                if command == "stop":
                    return

    asyncio.run(main())


class ServerProcess:
    def __init__(self, latency: float) -> None:
        ctx = mp.get_context("spawn")
        self._conn, child = ctx.Pipe()
        self._proc = ctx.Process(target=_serve, args=(latency, child), daemon=True)
        self._proc.start()
        self.url: str = self._conn.recv()

    def stats(self) -> dict[str, float]:
        self._conn.send("stats")
        return self._conn.recv()

    def stop(self) -> None:
        self._conn.send("stop")
        self._conn.recv()
        self._proc.join(timeout=10)


def config(url: str, fast: bool, concurrency: int = 512) -> LLMConfig:
    return LLMConfig(
        model="openai/gpt-4o-mini",  # priced from litellm's table on both paths
        api_base=url + "/v1",
        fast_path=fast,
        concurrency=concurrency,
        max_retries=0,
        timeout_s=60,
    )


def requests(n: int, tag: str) -> list[Request]:
    return [
        Request([{"role": "user", "content": f"{tag} question {i}"}], agent=i) for i in range(n)
    ]


async def cpu_per_call(url: str, fast: bool, n: int, batch: int) -> dict[str, float]:
    """Client CPU and wall time per call against an instant server, in moments of `batch`."""
    async with LLMClient(config(url, fast)) as client:
        # Warm up: litellm's first-call imports and one moment's connections (kept alive).
        await client.complete_many(requests(batch, "warm-up"))
        cpu0, wall0 = time.process_time(), time.perf_counter()
        for start in range(0, n, batch):
            out = await client.complete_many(requests(batch, f"cpu {start}"))
            assert all(c.ok for c in out), out[0].error
        cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
    return {"cpu_ms": 1000 * cpu / n, "calls_per_s": n / wall}


async def raw_aiohttp(url: str, n: int, batch: int, concurrency: int) -> dict[str, float]:
    """The floor: bare aiohttp posts with no client logic (the same semaphore, the same JSON)."""
    import aiohttp

    limit = asyncio.Semaphore(concurrency)
    headers = {"Content-Type": "application/json"}
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as session:

        async def one(i: int) -> str:
            body = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": f"raw {i}"}]}
            async with limit:
                async with session.post(
                    url + "/v1/chat/completions", data=json.dumps(body).encode(), headers=headers
                ) as r:
                    return json.loads(await r.read())["choices"][0]["message"]["content"]

        await asyncio.gather(*(one(i) for i in range(min(batch, concurrency))))  # connections
        cpu0, wall0 = time.process_time(), time.perf_counter()
        for start in range(0, n, batch):
            await asyncio.gather(*(one(start + i) for i in range(min(batch, n - start))))
        cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
    return {"cpu_ms": 1000 * cpu / n, "calls_per_s": n / wall, "wall_s": wall}


async def latency_bound(url: str, fast: bool, n: int, concurrency: int) -> dict[str, float]:
    """n calls of one moment against a slow server: wall time against the ideal."""
    async with LLMClient(config(url, fast, concurrency)) as client:
        await client.complete_many(requests(concurrency, "warm-up"))  # open the connections
        wall0 = time.perf_counter()
        out = await client.complete_many(requests(n, "slow"))
        wall = time.perf_counter() - wall0
    failed = sum(not c.ok for c in out)
    return {"wall_s": wall, "calls_per_s": n / wall, "failed": failed}


async def dedupe(
    url: str, server: ServerProcess, n_agents: int, n_prompts: int
) -> dict[str, float]:
    """A population whose prompts repeat (Zipf-distributed over n_prompts distinct ones)."""
    rng = np.random.default_rng(0)
    which = np.minimum(rng.zipf(1.5, size=n_agents), n_prompts) - 1
    before = server.stats()["requests"]
    async with LLMClient(config(url, True)) as client:
        reqs = [
            Request([{"role": "user", "content": f"situation {int(k)}"}], agent=i)
            for i, k in enumerate(which)
        ]
        await client.complete_many(reqs)
    calls = server.stats()["requests"] - before
    return {"requests": n_agents, "calls": calls, "saving": 1 - calls / n_agents}


async def archetypes(url: str, server: ServerProcess, n_agents: int) -> dict[str, float]:
    rng = np.random.default_rng(1)
    arch = Archetypes.from_profiles(rng.integers(0, 100, size=n_agents), n_samples=4, seed=0)
    before = server.stats()["requests"]
    async with LLMClient(config(url, True)) as client:
        reqs = arch.requests(lambda p: [{"role": "user", "content": f"profile {int(p)}"}])
        out = await client.complete_many(reqs)
    actions = arch.fan_out(out)
    calls = server.stats()["requests"] - before
    return {"agents": len(actions), "groups": arch.n_groups, "calls": calls}


async def sharded(url: str, fast: bool, shards: int, n: int, rounds: int = 3) -> dict[str, float]:
    """Moments of ``n`` distinct calls with the calls made by ``shards`` Ray actors (1: here):
    the best moment's wall time and this process's CPU over the moments."""
    cfg = config(url, fast).model_copy(update={"shards": shards})
    async with LLMClient(cfg) as client:
        await client.complete_many(requests(64, "warm-up"))  # actors, imports, connections
        walls, cpu0 = [], time.process_time()
        for r in range(rounds):
            wall0 = time.perf_counter()
            out = await client.complete_many(requests(n, f"moment {r}"))
            walls.append(time.perf_counter() - wall0)
            assert all(c.ok for c in out), out[0].error
        return {"wall_s": min(walls), "cpu_s": (time.process_time() - cpu0) / rounds}


def shards_part(url: str, n: int) -> None:
    print(f"4. moments of {n} calls, server latency 0.2 s, the calls made here or by Ray actors")
    for fast in (True, False):
        one, two = (asyncio.run(sharded(url, fast, k, n)) for k in (1, 2))
        print(
            f"   {'fast path' if fast else 'litellm  '}: 1 shard {one['wall_s']:.2f} s a moment "
            f"(this process {one['cpu_s']:.2f} s CPU), 2 shards {two['wall_s']:.2f} s "
            f"({two['cpu_s']:.2f} s CPU) = {one['wall_s'] / two['wall_s']:.2f}x faster"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small smoke version")
    parser.add_argument("--shards-only", action="store_true", help="part 4 alone")
    args = parser.parse_args()
    quick = args.quick
    if args.shards_only:
        slow = ServerProcess(latency=0.2)
        try:
            shards_part(slow.url, 200 if quick else 1000)
        finally:
            slow.stop()
        return
    n_fast, n_lite = (1000, 40) if quick else (4000, 400)
    n_slow, conc, lat = (400, 128, 0.2) if quick else (2000, 512, 0.2)
    n_slow_lite = n_slow if not quick else 200

    instant = ServerProcess(latency=0.0)
    slow = ServerProcess(latency=lat)
    try:
        raw_cpu = asyncio.run(raw_aiohttp(instant.url, n_fast, 200, 512))
        fast_cpu = asyncio.run(cpu_per_call(instant.url, True, n_fast, batch=200))
        raw_lat = asyncio.run(raw_aiohttp(slow.url, n_slow, n_slow, conc))
        before = slow.stats()
        fast_lat = asyncio.run(latency_bound(slow.url, True, n_slow, conc))
        after = slow.stats()
        peak = after["max_in_flight"]
        server_ms = (
            1000 * (after["cpu_s"] - before["cpu_s"]) / (after["requests"] - before["requests"])
        )
        dd = asyncio.run(dedupe(instant.url, instant, 2000 if quick else 20000, 500))
        ar = asyncio.run(archetypes(instant.url, instant, 100_000 if quick else 1_000_000))
        # litellm last: importing it changes the process (see transports.import_litellm).
        lite_cpu = asyncio.run(cpu_per_call(instant.url, False, n_lite, batch=min(200, n_lite)))
        lite_lat = asyncio.run(latency_bound(slow.url, False, n_slow_lite, conc))
        fast_cpu_after = asyncio.run(cpu_per_call(instant.url, True, n_fast, batch=200))
        shards_part(slow.url, 200 if quick else 1000)
    finally:
        instant.stop()
        slow.stop()

    ideal = math.ceil(n_slow / conc) * lat
    ideal_lite = math.ceil(n_slow_lite / conc) * lat
    print(f"LLM client benchmark{' (quick)' if quick else ''}")
    print("1. client CPU per call, instant server in another process")
    print(
        f"   raw aiohttp floor : {raw_cpu['cpu_ms']:.3f} ms/call  {raw_cpu['calls_per_s']:6.0f} calls/s"
    )
    print(
        f"   fast path         : {fast_cpu['cpu_ms']:.3f} ms/call  {fast_cpu['calls_per_s']:6.0f} calls/s  "
        f"= {fast_cpu['cpu_ms'] / raw_cpu['cpu_ms']:.2f}x the floor  ({n_fast} calls)"
    )
    print(
        f"   litellm           : {lite_cpu['cpu_ms']:.3f} ms/call  {lite_cpu['calls_per_s']:6.0f} calls/s  ({n_lite} calls)"
    )
    print(f"   fast path, after litellm was imported: {fast_cpu_after['cpu_ms']:.3f} ms/call")
    ratio = lite_cpu["cpu_ms"] / fast_cpu["cpu_ms"]
    ok_cpu = fast_cpu["cpu_ms"] <= 0.5 and ratio >= 10
    print(
        f"   litellm / fast = {ratio:.1f}x  "
        f"[target fast <= 0.5 ms and >= 10x cheaper: {'met' if ok_cpu else 'NOT met'}]"
    )
    print(f"2. {n_slow} calls at concurrency {conc}, server latency {lat} s (ideal {ideal:.2f} s)")
    print(
        f"   raw aiohttp floor : {raw_lat['wall_s']:.2f} s = {raw_lat['wall_s'] / ideal:.2f}x ideal"
    )
    ok_lat = fast_lat["wall_s"] <= 1.5 * ideal
    print(
        f"   fast path         : {fast_lat['wall_s']:.2f} s = {fast_lat['wall_s'] / ideal:.2f}x ideal "
        f"= {fast_lat['wall_s'] / raw_lat['wall_s']:.2f}x the floor  {fast_lat['calls_per_s']:.0f} calls/s  "
        f"failed {fast_lat['failed']}  [target <= 1.5x ideal: {'met' if ok_lat else 'NOT met'}]"
    )
    print(
        f"   litellm           : {lite_lat['wall_s']:.2f} s = {lite_lat['wall_s'] / ideal_lite:.2f}x ideal "
        f"({n_slow_lite} calls)  {lite_lat['calls_per_s']:.0f} calls/s  failed {lite_lat['failed']}"
    )
    print(f"   peak in flight at the server: {peak}; server CPU {server_ms:.3f} ms/request")
    print(
        f"3. dedupe: {dd['requests']} agents' prompts (Zipf over 500) -> {dd['calls']} calls, "
        f"saving {100 * dd['saving']:.1f}%"
    )
    print(
        f"   archetypes: {ar['agents']} agents, {ar['groups']} (profile, sample) groups -> "
        f"{ar['calls']} calls"
    )


if __name__ == "__main__":
    main()
