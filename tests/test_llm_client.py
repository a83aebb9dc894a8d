"""The LLM client against the real test server on 127.0.0.1, on both paths.

Every behaviour runs on the aiohttp fast path and through litellm ("openai/<name>" with
api_base=srv.url + "/v1"), so the two stay interchangeable.
"""

from __future__ import annotations

import asyncio
import json
import socket

import pytest
from pydantic import BaseModel, Field

from society.llm import Endpoint, LLMClient, LLMConfig, Request
from society.llm.testserver import FaultPlan, TestServer


class Act(BaseModel):
    move: str
    amount: int = Field(ge=0, le=10)


FALLBACK = Act(move="wait", amount=0)
PATHS = ["fast", "litellm"]


def cfg(srv: TestServer, path: str, **kw) -> LLMConfig:
    base = {
        "model": "openai/test-model",
        "api_base": srv.url + "/v1",
        "fast_path": path == "fast",
        "backoff_base_s": 0.01,
        "timeout_s": 5.0,
    }
    return LLMConfig(**(base | kw))


def msg(text: str) -> list[dict]:
    return [{"role": "user", "content": text}]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


async def test_both_paths_return_the_same_result_for_the_same_request():
    async with TestServer() as srv:
        results, bodies = [], []
        for path in PATHS:
            config = cfg(srv, path, model="openai/gpt-4o-mini", seed=7, temperature=0.7)
            async with LLMClient(config) as client:
                requests = [
                    Request(msg("choose a move"), schema=Act, sample=0, agent=0),
                    Request(msg("choose a move"), schema=Act, sample=1, agent=1),
                    Request(msg("say something"), agent=2),
                ]
                results.append(await client.complete_many(requests))
            bodies.append(list(srv.bodies))
            srv.bodies.clear()
    fast, slow = results
    wire = [sorted(json.dumps(b, sort_keys=True) for b in bs) for bs in bodies]
    assert wire[0] == wire[1]  # the very same requests on the wire (arrival order may differ)
    with_schema = [b for b in bodies[0] if "response_format" in b]
    assert with_schema[0]["response_format"]["json_schema"]["schema"] == Act.model_json_schema()
    for a, b in zip(fast, slow, strict=True):
        assert a.ok and b.ok
        assert (a.text, a.parsed, a.prompt_tokens, a.completion_tokens) == (
            b.text,
            b.parsed,
            b.prompt_tokens,
            b.completion_tokens,
        )
        # The fast path prices from litellm's table; litellm from completion_cost().
        assert a.cost_usd > 0 and a.cost_usd == pytest.approx(b.cost_usd, rel=1e-12)
    assert fast[2].text == "echo: say something"


@pytest.mark.parametrize("path", PATHS)
async def test_calls_of_a_moment_are_all_in_flight_together(path):
    async with TestServer(latency=0.3) as srv:
        async with LLMClient(cfg(srv, path)) as client:
            out = await client.complete_many([Request(msg(f"q{i}")) for i in range(50)])
    assert all(c.ok for c in out)
    assert srv.requests == 50
    assert srv.max_in_flight == 50  # measured by the server: none waited for another


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("limit", ["concurrency", "per_model_concurrency"])
async def test_concurrency_limits_bound_calls_in_flight(path, limit):
    async with TestServer(latency=0.05) as srv:
        async with LLMClient(cfg(srv, path, **{limit: 4})) as client:
            out = await client.complete_many([Request(msg(f"q{i}")) for i in range(20)])
    assert all(c.ok for c in out)
    assert srv.max_in_flight == 4


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("fault", ["429", "500", "timeout", "malformed", "empty"])
async def test_each_retryable_fault_is_retried_then_succeeds(path, fault):
    plan = FaultPlan(script=(fault,), retry_after_s=0.05, hang_s=5.0)
    async with TestServer(faults=plan) as srv:
        async with LLMClient(cfg(srv, path, timeout_s=0.3, max_retries=2)) as client:
            out = await client.complete(msg("hello"), agent=3)
        rows = {r["metric"]: r["value"] for r in client.usage.rows(include_io=True) if len(r) == 2}
    assert out.ok and out.text == "echo: hello"
    assert srv.requests == 2
    assert srv.faults_injected[fault] == 1
    assert rows["llm_retries"] == 1 and rows["llm_network_calls"] == 2
    assert rows["llm_failures"] == 0


@pytest.mark.parametrize("path", PATHS)
async def test_retry_after_is_honoured(path):
    # backoff_base_s is tiny, so a gap of >= Retry-After between arrivals can only come from
    # the header; measured on the server, with 20 ms allowed for timer granularity.
    plan = FaultPlan(script=("429", "429"), retry_after_s=0.25)
    async with TestServer(faults=plan) as srv:
        async with LLMClient(cfg(srv, path, max_retries=3)) as client:
            out = await client.complete(msg("hello"))
    assert out.ok
    assert srv.requests == 3
    gaps = [b - a for a, b in zip(srv.arrivals, srv.arrivals[1:], strict=False)]
    assert min(gaps) >= 0.25 - 0.02


@pytest.mark.parametrize("path", PATHS)
async def test_no_retry_on_400_and_the_fallback_stands_in(path):
    async with TestServer(faults=FaultPlan(script=("400",))) as srv:
        async with LLMClient(cfg(srv, path, max_retries=3)) as client:
            out = await client.complete(msg("hello"), schema=Act, fallback=FALLBACK, agent=1)
        totals = {r["metric"]: r["value"] for r in client.usage.rows() if len(r) == 2}
    assert srv.requests == 1
    assert not out.ok and out.used_fallback and out.parsed == FALLBACK
    assert "400" in out.error
    assert totals["llm_failures"] == 1 and totals["llm_fallbacks"] == 1


@pytest.mark.parametrize("path", PATHS)
async def test_a_call_that_keeps_failing_yields_the_fallback_without_raising(path):
    async with TestServer(faults=FaultPlan(rate=1.0, kinds=("500",))) as srv:
        async with LLMClient(cfg(srv, path, max_retries=2)) as client:
            out = await client.complete(
                msg("hi"), schema=Act, fallback={"move": "wait", "amount": 0}
            )
    assert srv.requests == 3  # one try and two retries
    assert out.used_fallback and out.parsed == FALLBACK and out.text == FALLBACK.model_dump_json()
    assert "after 3 attempts" in out.error


@pytest.mark.parametrize("path", PATHS)
async def test_an_unreachable_server_is_a_failure_not_an_exception(path):
    config = LLMConfig(
        model="openai/test-model",
        api_base=f"http://127.0.0.1:{free_port()}/v1",
        fast_path=path == "fast",
        max_retries=1,
        backoff_base_s=0.01,
    )
    async with LLMClient(config) as client:
        out = await client.complete(msg("hi"), fallback={"say": "nothing"})
    assert not out.ok and out.used_fallback and out.text == '{"say": "nothing"}'
    assert "connection" in out.error.lower()


@pytest.mark.parametrize("path", PATHS)
async def test_random_faults_at_a_rate_are_all_recovered(path):
    plan = FaultPlan(
        rate=0.3, kinds=("429", "500", "malformed", "empty"), seed=1, retry_after_s=0.01
    )
    async with TestServer(faults=plan) as srv:
        async with LLMClient(cfg(srv, path, max_retries=8)) as client:
            out = await client.complete_many([Request(msg(f"q{i}")) for i in range(40)])
    assert [c.text for c in out] == [f"echo: q{i}" for i in range(40)]
    injected = sum(srv.faults_injected.values())
    assert injected > 0
    assert srv.requests == 40 + injected  # each fault cost exactly one retry


@pytest.mark.parametrize("path", PATHS)
async def test_invalid_reply_gets_one_repair_that_quotes_the_validation_error(path):
    replies = ['{"move": "go", "amount": 99}', '{"move": "go", "amount": 7}']
    async with TestServer(reply=replies) as srv:
        async with LLMClient(cfg(srv, path)) as client:
            out = await client.complete(msg("act"), schema=Act, fallback=FALLBACK)
    assert out.ok and out.repaired and out.parsed == Act(move="go", amount=7)
    assert srv.requests == 2
    repair = srv.bodies[1]["messages"]
    assert repair[-2] == {"role": "assistant", "content": replies[0]}
    assert "amount: Input should be less than or equal to 10" in repair[-1]["content"]
    assert out.completion_tokens == 4 + 4  # the call and its repair are both charged


@pytest.mark.parametrize("path", PATHS)
async def test_a_reply_still_invalid_after_repair_yields_the_fallback(path):
    async with TestServer(reply=["not json at all", "still not json"]) as srv:
        async with LLMClient(cfg(srv, path)) as client:
            out = await client.complete(msg("act"), schema=Act, fallback=FALLBACK)
        totals = {r["metric"]: r["value"] for r in client.usage.rows() if len(r) == 2}
    assert srv.requests == 2  # the call and exactly one repair
    assert not out.ok and out.used_fallback and out.parsed == FALLBACK
    assert out.error.startswith("invalid reply after one repair")
    assert totals["llm_repairs"] == 1 and totals["llm_failures"] == 1


@pytest.mark.parametrize("path", PATHS)
async def test_identical_prompts_of_a_moment_become_one_call(path):
    async with TestServer() as srv:
        async with LLMClient(cfg(srv, path)) as client:
            requests = [Request(msg(f"topic {i % 3}"), agent=i, cohort="c") for i in range(30)]
            out = await client.complete_many(requests)
        rows = client.usage.rows()
    assert srv.requests == 3
    assert [c.text for c in out] == [f"echo: topic {i % 3}" for i in range(30)]
    totals = {r["metric"]: r["value"] for r in rows if len(r) == 2}
    assert totals["llm_dedupe_saved"] == 27 and totals["llm_prompts"] == 3
    # Each call's tokens are shared among the agents it served: the shares add up.
    agent_tokens = sum(
        r["value"] for r in rows if r.get("agent") is not None and r["metric"] == "llm_tokens"
    )
    assert agent_tokens == pytest.approx(totals["llm_tokens"])
    assert totals["llm_tokens"] == 3 * (2 + 3)  # prompt "topic k", reply "echo: topic k"


@pytest.mark.parametrize("path", PATHS)
async def test_samples_of_one_prompt_become_one_call_with_n(path):
    async with TestServer(reply=["a", "b", "c", "d"]) as srv:
        async with LLMClient(cfg(srv, path, temperature=1.0)) as client:
            out = await client.complete_many(
                [Request(msg("same"), sample=s % 4, agent=s) for s in range(8)]
            )
    assert srv.requests == 1 and srv.bodies[0]["n"] == 4
    assert [c.text for c in out] == ["a", "b", "c", "d"] * 2


@pytest.mark.parametrize("path", PATHS)
async def test_a_server_that_ignores_n_is_topped_up(path):
    async with TestServer(reply=["a", "b", "c"], max_n=1) as srv:
        async with LLMClient(cfg(srv, path, temperature=1.0)) as client:
            out = await client.complete_many([Request(msg("same"), sample=s) for s in range(3)])
    assert [c.text for c in out] == ["a", "b", "c"]
    assert [b.get("n", 1) for b in srv.bodies] == [3, 2, 1]


@pytest.mark.parametrize("path", PATHS)
async def test_token_budget_stops_at_the_next_moment_with_a_clear_message(path):
    async with TestServer() as srv:
        async with LLMClient(cfg(srv, path, budget_tokens=10)) as client:
            first = await client.complete_many([Request(msg(f"q {i}"), agent=i) for i in range(3)])
            assert all(c.ok for c in first)
            assert client.budget_exhausted
            assert "budget_tokens=10" in client.budget_message
            second = await client.complete_many(
                [Request(msg("more"), schema=Act, fallback=FALLBACK, agent=0)]
            )
        totals = {r["metric"]: r["value"] for r in client.usage.rows() if len(r) == 2}
    assert srv.requests == 3  # nothing was sent once the budget was spent
    assert second[0].budget_stopped and second[0].used_fallback and second[0].parsed == FALLBACK
    assert totals["llm_budget_stopped"] == 1 and totals["llm_tokens"] == 3 * (2 + 3)


@pytest.mark.parametrize("path", PATHS)
async def test_usd_budget_uses_the_price_of_the_model(path):
    async with TestServer() as srv:
        config = cfg(srv, path, model="openai/gpt-4o-mini", budget_usd=1e-6)
        async with LLMClient(config) as client:
            await client.complete(msg("hello there"))
            assert client.budget_exhausted and "budget_usd=1e-06" in client.budget_message
            out = await client.complete(msg("again"))
    assert out.budget_stopped and not out.ok and srv.requests == 1


async def test_replicas_share_the_load_round_robin():
    async with TestServer() as a, TestServer() as b:
        config = LLMConfig(model="openai/m", api_base=a.url + "/v1", replicas=[b.url + "/v1"])
        async with LLMClient(config) as client:
            out = await client.complete_many([Request(msg(f"q{i}")) for i in range(10)])
    assert all(c.ok for c in out)
    assert (a.requests, b.requests) == (5, 5)


async def test_litellm_router_falls_back_to_another_endpoint():
    async with TestServer() as srv:
        config = LLMConfig(
            model="openai/primary",
            api_base=f"http://127.0.0.1:{free_port()}/v1",  # nothing listens there
            fallbacks=[Endpoint(model="openai/backup", api_base=srv.url + "/v1")],
            max_retries=0,
        )
        assert not config.uses_fast_path
        async with LLMClient(config) as client:
            out = await client.complete(msg("hello"))
    assert out.ok and out.text == "echo: hello"
    assert [b["model"] for b in srv.bodies] == ["backup"]


async def test_structured_output_modes_send_what_the_server_accepts():
    # json_object carries the schema the way llama.cpp's server wants it; "prompt" puts it in
    # a system message for servers without constrained decoding.
    async with TestServer() as srv, TestServer(reply='{"move": "x", "amount": 0}') as plain:
        for server, mode in ((srv, "json_object"), (plain, "prompt")):
            async with LLMClient(cfg(server, "fast", structured_output=mode)) as client:
                out = await client.complete(msg("act"), schema=Act)
            assert out.ok and out.parsed == Act(move="x", amount=0)
    as_object, as_prompt = srv.bodies[0], plain.bodies[0]
    assert as_object["response_format"] == {
        "type": "json_object",
        "schema": Act.model_json_schema(),
    }
    assert "response_format" not in as_prompt
    assert '"amount"' in as_prompt["messages"][-1]["content"]


async def test_bad_requests_raise_clear_errors():
    async with TestServer() as srv:
        async with LLMClient(cfg(srv, "fast")) as client:
            with pytest.raises(TypeError, match=r"requests\[0\] must be a Request"):
                await client.complete_many([{"messages": msg("x")}])
            with pytest.raises(ValueError, match=r"messages must be a non-empty list"):
                await client.complete([])
            with pytest.raises(ValueError, match=r"fallback does not match schema Act"):
                await client.complete(msg("x"), schema=Act, fallback={"move": "x", "amount": 99})
            with pytest.raises(ValueError, match=r"sample must be an int >= 0"):
                await client.complete(msg("x"), sample=-1)
    assert srv.requests == 0


async def test_clients_of_several_models_can_share_one_global_limit():
    shared = asyncio.Semaphore(3)
    async with TestServer(latency=0.05) as srv:
        a = LLMClient(cfg(srv, "fast", model="openai/a"), global_limit=shared)
        b = LLMClient(cfg(srv, "fast", model="openai/b"), global_limit=shared)
        async with a, b:
            outs = await asyncio.gather(
                a.complete_many([Request(msg(f"a{i}")) for i in range(10)]),
                b.complete_many([Request(msg(f"b{i}")) for i in range(10)]),
            )
    assert all(c.ok for out in outs for c in out)
    assert srv.requests == 20 and srv.max_in_flight == 3
