"""Persistent cache, offline replay and secrecy of API keys, against the real test server."""

from __future__ import annotations

import json
import sqlite3

import pandas as pd
import pytest
from pydantic import BaseModel, Field

from society.llm import LLMClient, LLMConfig, ReplayMissError, Request, ResponseCache
from society.llm.cache import CacheEntry
from society.llm.testserver import FaultPlan, TestServer

PATHS = ["fast", "litellm"]
SECRET = "sk-test-SECRET-0123456789abcdef"


class Act(BaseModel):
    move: str
    amount: int = Field(ge=0, le=10)


FALLBACK = Act(move="wait", amount=0)


def msg(text: str) -> list[dict]:
    return [{"role": "user", "content": text}]


def moment(t: int) -> list[Request]:
    """A moment of a small society: duplicates, samples, schemas and agents in two cohorts."""
    return [
        Request(
            msg(f"t{t} agent {i % 4} acts"),
            schema=Act,
            fallback=FALLBACK,
            agent=i,
            cohort="traders" if i < 6 else "talkers",
            sample=i % 2,
        )
        for i in range(10)
    ] + [Request(msg(f"t{t} chat"), agent=10, cohort="talkers")]


def reply(body: dict) -> str:
    """Rule-based replies: some invalid (a repair follows), some plain echoes."""
    text = body["messages"][0]["content"]
    if "response_format" not in body:
        return "echo " + text
    if "agent 3" in text and len(body["messages"]) == 1:
        return '{"move": "go", "amount": 42}'  # out of bounds: repaired
    return json.dumps({"move": "go", "amount": len(text) % 10})


async def run_society(config: LLMConfig, moments: int = 3) -> tuple[list, list[dict]]:
    completions = []
    async with LLMClient(config) as client:
        for t in range(moments):
            completions += await client.complete_many(moment(t))
    return completions, client.usage.rows()


def trajectory(completions: list) -> list[tuple]:
    return [(c.text, c.parsed, c.ok, c.used_fallback, c.error) for c in completions]


@pytest.mark.parametrize("path", PATHS)
async def test_replay_from_the_cache_reproduces_the_run_with_the_server_off(path, tmp_path):
    cache = tmp_path / "llm-cache.sqlite"
    # The first request to arrive hits a 400 (a failure, not retried; its fallback stands in),
    # and the replay must reproduce that too.
    async with TestServer(reply=reply, faults=FaultPlan(script=("400",))) as srv:
        config = LLMConfig(
            model="openai/test-model",
            api_base=srv.url + "/v1",
            fast_path=path == "fast",
            cache_path=cache,
            temperature=0.8,
        )
        live, live_rows = await run_society(config)
        calls = srv.requests
    assert calls > 0 and any(c.repaired for c in live) and any(not c.ok for c in live)
    # The server is gone: a replay answers from the cache alone.
    replay_cfg = config.model_copy(update={"replay": True})
    again, again_rows = await run_society(replay_cfg)
    assert trajectory(again) == trajectory(live)
    assert all(c.cached for c in again)
    assert again_rows == live_rows
    pd.DataFrame(live_rows).to_parquet(tmp_path / "live.parquet")
    pd.DataFrame(again_rows).to_parquet(tmp_path / "replay.parquet")
    live_bytes = (tmp_path / "live.parquet").read_bytes()
    assert live_bytes == (tmp_path / "replay.parquet").read_bytes()


async def test_a_replay_miss_is_a_clear_error(tmp_path):
    cache = tmp_path / "c.sqlite"
    async with TestServer() as srv:
        config = LLMConfig(model="openai/m", api_base=srv.url + "/v1", cache_path=cache)
        async with LLMClient(config) as client:
            await client.complete(msg("known"))
    async with LLMClient(config.model_copy(update={"replay": True})) as client:
        assert (await client.complete(msg("known"))).text == "echo: known"
        with pytest.raises(ReplayMissError, match=r"1 of 1 replies are not in the cache"):
            await client.complete(msg("never asked"))


@pytest.mark.parametrize("path", PATHS)
async def test_a_warm_cache_makes_no_calls(path, tmp_path):
    async with TestServer() as srv:
        config = LLMConfig(
            model="openai/m",
            api_base=srv.url + "/v1",
            cache_path=tmp_path / "c.sqlite",
            fast_path=path == "fast",
        )
        first, _ = await run_society(config, moments=1)
        made = srv.requests
        second, _ = await run_society(config, moments=1)
    assert srv.requests == made
    assert trajectory(first) == trajectory(second) and all(c.cached for c in second)


async def test_stored_failures_are_retried_outside_replay(tmp_path):
    cache = tmp_path / "c.sqlite"
    async with TestServer(faults=FaultPlan(script=("400",))) as srv:
        config = LLMConfig(model="openai/m", api_base=srv.url + "/v1", cache_path=cache)
        async with LLMClient(config) as client:
            assert not (await client.complete(msg("hi"))).ok
        async with LLMClient(config) as client:
            assert (await client.complete(msg("hi"))).ok  # tried again, and now it works
    assert srv.requests == 2


@pytest.mark.parametrize("path", PATHS)
async def test_the_api_key_is_sent_but_never_written(path, tmp_path, monkeypatch):
    monkeypatch.setenv("SOCIETY_TEST_KEY", SECRET)
    cache = tmp_path / "c.sqlite"
    # "400-key" quotes the refused key back in its error message, which the client then stores
    # (a 401 stops the run instead: transports.AuthError).
    async with TestServer(reply=reply, faults=FaultPlan(script=("500", "400-key"))) as srv:
        config = LLMConfig(
            model="openai/test-model",
            api_base=srv.url + "/v1",
            api_key_env="SOCIETY_TEST_KEY",
            fast_path=path == "fast",
            cache_path=cache,
            max_retries=1,
            backoff_base_s=0.01,
        )
        completions, rows = await run_society(config, moments=1)
        async with LLMClient(config) as client:
            shown = repr(client)
    assert set(srv.authorizations) == {f"Bearer {SECRET}"}  # the server got the key
    failed = [c for c in completions if not c.ok]
    assert failed and all("400" in c.error and "[api key]" in c.error for c in failed)
    on_disk = b"".join(p.read_bytes() for p in tmp_path.iterdir() if p.is_file())
    assert len(on_disk) > 0 and SECRET.encode() not in on_disk
    for text in (shown, repr(config), config.model_dump_json(), repr(rows), repr(completions)):
        assert SECRET not in text


def test_the_cache_table_holds_only_replies(tmp_path):
    cache = ResponseCache(tmp_path / "c.sqlite")
    entry = CacheEntry("hello", 3, 1, 0.5, True)
    cache.put_many([("k1", 0, "openai/m", entry), ("k1", 1, "openai/m", entry)])
    assert cache.get_many([("k1", 0), ("k1", 2), ("k2", 0)]) == {("k1", 0): entry}
    assert len(cache) == 2
    cache.close()
    columns = [
        r[1] for r in sqlite3.connect(tmp_path / "c.sqlite").execute("PRAGMA table_info(responses)")
    ]
    assert "api_key" not in columns and "api_base" not in columns


async def test_only_the_samples_missing_from_the_cache_are_requested(tmp_path):
    async with TestServer(reply=["a", "b", "c", "d"]) as srv:
        config = LLMConfig(
            model="openai/m", api_base=srv.url + "/v1", cache_path=tmp_path / "c.sqlite"
        )
        async with LLMClient(config) as client:
            first = await client.complete_many([Request(msg("same"), sample=s) for s in (0, 1)])
            both = await client.complete_many([Request(msg("same"), sample=s) for s in range(4)])
    assert [c.text for c in first] == ["a", "b"]
    assert [c.text for c in both] == ["a", "b", "c", "d"]
    assert [c.cached for c in both] == [True, True, False, False]
    assert [b["n"] for b in srv.bodies] == [2, 2]  # the second call asked for samples 2 and 3
