"""An LLM client's calls sharded over Ray actors (``LLMConfig.shards``, ``--llm-shards``): the
calls come from other processes, and a run records what an unsharded one does."""

import asyncio
import hashlib
import json
import os

import pytest

import scenarios
from scenarios.network_game.model import Cooperate
from sim_core.ray_runtime import start_ray
from society.llm.client import LLMClient, Request
from society.llm.config import LLMConfig
from society.llm.shards import ShardPool
from society.llm.testserver import FaultPlan, TestServer


@pytest.fixture(scope="module", autouse=True)
def one_ray():
    """One Ray for the module (a client that did not start Ray leaves it running)."""
    ray, started = start_ray(2, None)
    yield
    if started:
        ray.shutdown()


def _level(body: dict) -> str:
    """A level of cooperation that depends on the whole prompt (memories included)."""
    h = int(hashlib.sha256(body["messages"][-1]["content"].encode()).hexdigest(), 16)
    return json.dumps({"cooperate": h % 101 / 100})


def test_a_study_run_with_sharded_calls_has_the_unsharded_rows_and_accounting(tmp_path) -> None:
    """Same prompts, same replies: which actor made a call changes nothing a run records;
    the run keeps its shards for `society resume`."""
    srv = TestServer(reply=_level).start_in_thread()
    kw = {"llm": "openai/test-model", "api_base": srv.url + "/v1", "write": False}
    cfg = {"population": 30, "steps": 3, "agents": "mixed", "split": "rules:2,llm:1"}
    try:
        one = scenarios.run("network-game", seed=4, **cfg, **kw)
        two = scenarios.run(
            "network-game", seed=4, llm_shards=2, **cfg, **{**kw, "write": True, "out": tmp_path}
        )
    finally:
        srv.stop()
    assert two.summary["status"] == "completed" and two.summary["options"]["llm_shards"] == 2
    a, b = (
        r.metrics.sort_values(list(r.metrics.columns)).reset_index(drop=True) for r in (one, two)
    )
    assert len(a) > 0 and a.equals(b)
    assert (
        one.summary["llm"] == two.summary["llm"]
        and one.summary["metrics"] == two.summary["metrics"]
    )


def _ask(text: str) -> Request:
    return Request([{"role": "user", "content": text}], schema=Cooperate,
                   fallback=Cooperate(cooperate=0.0), cohort="llm")  # fmt: skip


def _sharded(srv: TestServer, texts: list[str]) -> tuple:
    async def go() -> tuple:
        cfg = LLMConfig(model="openai/test-model", api_base=srv.url + "/v1", shards=2,
                        max_retries=1, backoff_base_s=0.0)  # fmt: skip
        async with LLMClient(cfg) as client:
            done = await client.complete_many([_ask(t) for t in texts])
            return client._pool.pids(), done, client.usage

    try:
        return asyncio.run(go())
    finally:
        srv.stop()


def _invalid_first(body: dict) -> str:
    """Asked "fix me": an invalid reply, then, re-asked with the error, a valid one."""
    if body["messages"][-1]["content"] == "fix me":
        return '{"cooperate": "lots"}'
    return json.dumps({"cooperate": 0.5 if len(body["messages"]) > 1 else 0.25})


def test_sharded_calls_come_from_other_processes_and_a_reply_is_still_repaired_once() -> None:
    pids, done, usage = _sharded(
        TestServer(reply=_invalid_first).start_in_thread(), ["fix me", "ok"]
    )
    assert len(set(pids)) == 2 and os.getpid() not in pids
    assert [c.parsed.cooperate for c in done] == [0.5, 0.25] and [c.repaired for c in done] == [
        True,
        False,
    ]
    assert usage.total["network_calls"] == 3 and usage.total["repairs"] == 1


def test_sharded_calls_that_fail_are_retried_and_counted_by_kind() -> None:
    """Every call answered 500: each request is tried twice (max_retries=1) in an actor, and
    the client counts the retries and the failures by kind as an unsharded one does."""
    srv = TestServer(faults=FaultPlan(rate=1.0, kinds=("500",))).start_in_thread()
    _, done, usage = _sharded(srv, ["a", "b", "c"])
    assert [c.used_fallback for c in done] == [True] * 3
    assert usage.total["network_calls"] == 6 and usage.total["retries"] == 3
    assert usage.failure_kinds == {"http_500": 3}


def test_a_replay_with_shards_starts_no_actor(tmp_path) -> None:
    cache = tmp_path / "llm-cache.sqlite"
    cache.touch()
    cfg = LLMConfig(model="openai/test-model", cache_path=cache, replay=True, shards=4)
    client = LLMClient(cfg)
    assert client._pool is None
    asyncio.run(client.aclose())


def test_a_shard_that_dies_ends_the_run_with_one_line() -> None:
    """A killed actor's calls would otherwise all fall back, unseen: the run stops, saying so."""
    import ray

    from sim_core.errors import RunError

    async def go(srv: TestServer) -> None:
        cfg = LLMConfig(model="openai/test-model", api_base=srv.url + "/v1", shards=2)
        async with LLMClient(cfg) as client:
            await client.complete_many([_ask("one"), _ask("two")])
            ray.kill(client._pool.actors[1])
            await client.complete_many([_ask("three"), _ask("four")])

    srv = TestServer(reply='{"cooperate": 0.5}').start_in_thread()
    try:
        with pytest.raises(RunError, match="an LLM shard \\(Ray actor\\) failed") as err:
            asyncio.run(go(srv))
    finally:
        srv.stop()
    assert "\n" not in str(err.value)


def test_an_unreachable_ray_address_is_one_line_before_any_call(monkeypatch) -> None:
    """RAY_ADDRESS naming a port nobody listens on: ray.init would retry for minutes."""
    import socket

    from sim_core.errors import ConfigError

    with socket.socket() as s:  # a free port, closed again: nothing listens there
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    monkeypatch.setenv("RAY_ADDRESS", f"127.0.0.1:{port}")
    pool = ShardPool(
        LLMConfig(model="openai/test-model", api_base="http://127.0.0.1:1/v1", shards=2)
    )
    with pytest.raises(ConfigError, match=f"cannot reach Ray at '127.0.0.1:{port}'") as err:
        pool.pids()
    assert "\n" not in str(err.value)
