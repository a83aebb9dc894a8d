"""The scriptable OpenAI-compatible test server, driven with a plain HTTP client."""

from __future__ import annotations

import json
import urllib.request

import aiohttp
import pytest

from society.llm.testserver import FaultPlan, TestServer, example_from_schema


async def post(srv: TestServer, body: dict, timeout: float = 5.0) -> tuple[int, dict, str]:
    async with aiohttp.ClientSession() as s:
        async with s.post(
            srv.url + "/v1/chat/completions",
            json=body,
            timeout=aiohttp.ClientTimeout(total=timeout),
        ) as r:
            return r.status, dict(r.headers), await r.text()


BODY = {"model": "m", "messages": [{"role": "user", "content": "two words"}]}


async def test_replies_follow_the_script_then_repeat_the_last():
    async with TestServer(reply=["one", "two three"]) as srv:
        texts = []
        for _ in range(3):
            status, _, raw = await post(srv, BODY)
            assert status == 200
            data = json.loads(raw)
            texts.append(data["choices"][0]["message"]["content"])
        assert data["usage"] == {"prompt_tokens": 2, "completion_tokens": 2, "total_tokens": 4}
    assert texts == ["one", "two three", "two three"]
    assert srv.requests == 3 and srv.bodies[0] == BODY


async def test_a_callable_reply_sees_the_request_and_n_gives_choices():
    async with TestServer(reply=lambda body: body["model"].upper()) as srv:
        _, _, raw = await post(srv, {**BODY, "n": 3})
    choices = json.loads(raw)["choices"]
    assert [c["message"]["content"] for c in choices] == ["M", "M", "M"]


async def test_the_default_reply_satisfies_the_requested_schema():
    schema = {
        "type": "object",
        "properties": {
            "kind": {"enum": ["buy", "sell"]},
            "n": {"type": "integer", "minimum": 3, "maximum": 9},
            "tags": {"type": "array", "items": {"type": "string"}, "minItems": 2},
        },
    }
    body = {**BODY, "response_format": {"type": "json_object", "schema": schema}}
    async with TestServer() as srv:
        _, _, raw = await post(srv, body)
    content = json.loads(raw)["choices"][0]["message"]["content"]
    assert json.loads(content) == {"kind": "buy", "n": 3, "tags": ["x", "x"]}
    assert example_from_schema({"type": "number", "exclusiveMinimum": 0.5}) == 1.5


@pytest.mark.parametrize(
    ("kind", "status"), [("429", 429), ("500", 500), ("400", 400), ("malformed", 200)]
)
async def test_each_fault_kind_answers_as_specified(kind, status):
    async with TestServer(faults=FaultPlan(script=(kind, None), retry_after_s=1.5)) as srv:
        got, headers, raw = await post(srv, BODY)
        ok, _, _ = await post(srv, BODY)
    assert got == status and ok == 200
    if kind == "429":
        assert headers["Retry-After"] == "1.5"
    if kind == "malformed":
        with pytest.raises(json.JSONDecodeError):
            json.loads(raw)
    assert srv.faults_injected[kind] == 1


async def test_empty_and_timeout_faults():
    plan = FaultPlan(script=("empty", "timeout"), hang_s=5.0)
    async with TestServer(faults=plan) as srv:
        _, _, raw = await post(srv, BODY)
        assert json.loads(raw)["choices"][0]["message"]["content"] == ""
        with pytest.raises(TimeoutError):
            await post(srv, BODY, timeout=0.2)


async def test_faults_at_a_rate_are_seeded():
    plan = FaultPlan(rate=0.5, kinds=("500",), seed=3)
    counts = []
    for _ in range(2):
        async with TestServer(faults=plan) as srv:
            statuses = [(await post(srv, BODY))[0] for _ in range(30)]
        counts.append(statuses)
    assert counts[0] == counts[1]
    # 30 draws at rate 0.5: 5..25 failures holds with probability > 0.9999 (binomial).
    assert 5 <= counts[0].count(500) <= 25


def test_models_endpoint_and_background_thread_for_sync_code():
    srv = TestServer(model_name="tiny").start_in_thread()
    try:
        with urllib.request.urlopen(srv.url + "/v1/models", timeout=5) as r:
            data = json.loads(r.read())
        req = urllib.request.Request(
            srv.url + "/v1/chat/completions",
            data=json.dumps(BODY).encode(),
            headers={"Content-Type": "application/json"},
        )
        with urllib.request.urlopen(req, timeout=5) as r:
            reply = json.loads(r.read())
    finally:
        srv.stop()
    assert data["data"][0]["id"] == "tiny"
    assert reply["choices"][0]["message"]["content"] == "echo: two words"
    assert srv.requests == 1


def test_bad_settings_raise_clear_errors():
    with pytest.raises(ValueError, match="unknown fault kind 'boom'"):
        FaultPlan(script=("boom",))
    with pytest.raises(ValueError, match=r"rate must be in \[0, 1\]"):
        FaultPlan(rate=2.0)
    with pytest.raises(ValueError, match="latency must be >= 0"):
        TestServer(latency=-1)
    with pytest.raises(TypeError, match="reply must be"):
        TestServer(reply=[])
