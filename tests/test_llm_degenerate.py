"""Degenerate replies (valid JSON that says nothing) are counted by kind beside failures and
fallbacks, reach metric rows and summary.json, and above ``max_fallback_rate`` make the run
``degraded`` with one line quoting an example; replies out of a field's bounds get one
re-ask, then a counted fallback. Every case talks HTTP to the TestServer on 127.0.0.1."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from pydantic import BaseModel, Field

import scenarios
from scenarios.network_game.model import Cooperate
from sim_core.experiment import RunContext
from society.llm import LLMClient, LLMConfig, Request
from society.llm.degenerate import classify, prompt_examples
from society.llm.testserver import TestServer


class Answer(BaseModel):
    answer: str = Field(description="the output for the new input")


class Choice(BaseModel):
    give: float = Field(ge=0, le=1)


def _ask(text: str) -> list[dict[str, str]]:
    return [{"role": "user", "content": text}]


async def _complete(srv: TestServer, requests: list[Request]) -> tuple[list, LLMClient]:
    cfg = LLMConfig(model="openai/test-model", api_base=srv.url + "/v1", max_retries=0)
    async with LLMClient(cfg) as client:
        return await client.complete_many(requests), client


def _run(reply, requests: list[Request]):
    async def go():
        async with TestServer(reply=reply) as srv:
            out, client = await _complete(srv, requests)
            return out, client, srv

    return asyncio.run(go())


def test_placeholder_empty_and_example_copies_are_named():
    schema_only = _ask('Reply with a JSON object whose only field, "answer", holds your output.')
    with_example = _ask('Solve it. Reply as {"answer": "bca"}.')
    cases = [
        ('{ "answer": "..."}', schema_only, "placeholder"),
        ('{"answer": "…"}', schema_only, "placeholder"),
        ('{"answer": "<answer>"}', schema_only, "placeholder"),
        (
            '{"answer": "the output for the new input"}',
            schema_only,
            "placeholder",
        ),  # the description
        ('{"answer": "  "}', schema_only, "empty"),
        ('{"answer": "bca"}', with_example, "example"),
        ('{"answer": "bca"}', schema_only, None),
        ('{"answer": "cab"}', with_example, None),
    ]
    for text, messages, kind in cases:
        parsed = Answer.model_validate_json(text)
        assert classify(parsed, text, messages, Answer) == kind, text
    # Numbers alone are never judged: a copied example number looks like a choice.
    assert classify(Choice(give=1), '{"give": 1}', _ask('Reply as {"give": 1}'), Choice) is None
    # Memory lines quoting the agent's own earlier reply are no example.
    assert prompt_examples(_ask('Last round you chose {"answer": "bca"}.')) == {}


def test_degenerate_replies_are_counted_by_kind_and_kept(tmp_path):
    requests = [Request(_ask(f"task {i}: reply as JSON"), schema=Answer, fallback=Answer(answer=""),
                        agent=i, cohort="llm") for i in range(4)]  # fmt: skip
    out, client, srv = _run('{ "answer": "..."}', requests)
    assert srv.requests == 4  # valid JSON: no repair
    assert all(c.ok and c.degenerate == "placeholder" and c.parsed.answer == "..." for c in out)
    usage = client.usage
    assert usage.total["degenerate"] == 4 and usage.total["failures"] == 0
    assert usage.degenerate_kinds == {"placeholder": 4}
    assert usage.first_degenerate == '{ "answer": "..."}'
    rows = {(r["metric"], r.get("cohort")): r["value"] for r in usage.rows()}
    assert rows[("llm_degenerate", None)] == 4 and rows[("llm_degenerate", "llm")] == 4
    assert rows[("llm_degenerate.placeholder", None)] == 4
    # A checkpoint of the usage keeps them.
    again = type(usage)()
    again.load_state_dict(json.loads(json.dumps(usage.state_dict())))
    assert (
        again.degenerate_kinds == {"placeholder": 4} and again.by_cohort["llm"]["degenerate"] == 4
    )


def test_the_same_reply_to_distinct_prompts_far_beyond_chance_is_repeated():
    requests = [Request(_ask(f"task {i}"), schema=Answer, cohort="llm") for i in range(10)]
    out, client, _ = _run('{"answer": "zzz"}', requests)
    # The first 3 may be chance; from the 4th on it is more than half of the distinct prompts.
    assert [c.degenerate for c in out] == [None] * 3 + ["repeated"] * 7
    assert client.usage.degenerate_kinds == {"repeated": 7}
    # Distinct answers to distinct prompts, or one prompt asked again, are not.
    out, client, _ = _run(
        lambda body: json.dumps({"answer": body["messages"][-1]["content"][::-1]}), requests
    )
    assert client.usage.total["degenerate"] == 0
    same = [Request(_ask("one task"), schema=Answer, cohort="llm", sample=s) for s in range(10)]
    out, client, _ = _run('{"answer": "zzz"}', same)
    assert client.usage.total["degenerate"] == 0


class Turn(BaseModel):
    choice: str = Field(pattern="^(skip|post)$")
    text: str | None = None


def test_a_choice_whose_text_is_null_is_not_repeated_but_the_same_text_is():
    """A turn that needs no text (null) is a choice among few, which repeats by chance; the
    same text written for distinct prompts is still a copy."""
    requests = [Request(_ask(f"turn {i}"), schema=Turn, cohort="llm") for i in range(10)]
    _, client, _ = _run('{"choice": "skip", "text": null}', requests)
    assert client.usage.total["degenerate"] == 0
    _, client, _ = _run('{"choice": "post", "text": "hello all"}', requests)
    assert client.usage.degenerate_kinds == {"repeated": 7}


def test_run_context_counts_degenerate_beside_fallbacks_and_quotes_one():
    ctx = RunContext(seed=0, replicates=1, rng=None, recorder=None, run_dir=None)
    ctx.count_fallbacks("llm", 10, 0)
    assert ctx.degradation() == []
    ctx.count_fallbacks("llm", 0, 0, degenerate={"placeholder": 1}, example='{ "answer": "..."}')
    assert ctx.degradation() == []  # 1 of 10 is not above 0.1
    ctx.count_fallbacks("llm", 0, 1, degenerate={"empty": 1}, example='{"answer": ""}')
    assert ctx.fallbacks["llm"] == {
        "decisions": 10, "fallbacks": 1, "degenerate": 2,
        "degenerate_kinds": {"placeholder": 1, "empty": 1}, "example": '{ "answer": "..."}',
    }  # fmt: skip
    (line,) = ctx.degradation()
    assert line == (
        "cohort 'llm': 1 of 10 decisions were fallbacks and 2 were degenerate replies (empty 1, "
        'placeholder 1), e.g. \'{ "answer": "..."}\' (30% > max_fallback_rate 0.1)'
    )


GAME = {"population": 40, "steps": 3, "agents": "mixed", "split": "rules:2,learned:1,llm:1"}


def test_a_run_of_placeholder_replies_is_degraded_with_an_example(tmp_path: Path) -> None:
    """public-goods asks for a reason and a contribution; a copy machine's reason is '...'."""
    srv = TestServer(reply='{"reason": "...", "contribution": 5}').start_in_thread()
    try:
        res = scenarios.run(
            "public-goods", out=tmp_path / "pg", llm="openai/x", api_base=srv.url + "/v1",
            agents="llm", population=4, steps=2,
        )  # fmt: skip
    finally:
        srv.stop()
    s = res.summary
    assert s["status"] == "degraded"
    (cohort,) = s["fallbacks"]
    counts = s["fallbacks"][cohort]
    assert counts["fallbacks"] == 0 and counts["degenerate"] == counts["decisions"] == 8
    assert counts["degenerate_kinds"] == {"placeholder": 8} and counts["rate"] == 1.0
    assert counts["example"] == '{"reason": "...", "contribution": 5}'
    assert s["degraded"][0].startswith(
        f"cohort '{cohort}': 0 of 8 decisions were fallbacks and 8 were degenerate"
    )
    assert 'e.g. \'{"reason": "...", "contribution": 5}\'' in s["degraded"][0]
    written = json.loads((res.run_dir / "summary.json").read_text())
    assert written["fallbacks"] == s["fallbacks"]
    rows = res.metrics[res.metrics.metric == "llm_degenerate.placeholder"]
    assert rows["value"].tolist() == [8.0]


def test_a_run_of_real_replies_has_no_degenerate_decisions(tmp_path: Path) -> None:
    def reply(body: dict) -> str:
        text = body["messages"][-1]["content"]
        return json.dumps(
            {"reason": f"round text has {len(text)} characters", "contribution": len(text) % 7}
        )

    srv = TestServer(reply=reply).start_in_thread()
    try:
        res = scenarios.run(
            "public-goods", out=tmp_path / "pg", llm="openai/x", api_base=srv.url + "/v1",
            agents="llm", population=4, steps=2,
        )  # fmt: skip
    finally:
        srv.stop()
    s = res.summary
    assert s["status"] == "completed"
    assert all("degenerate" not in c for c in s["fallbacks"].values())


def test_out_of_range_number_is_re_asked_once_naming_the_bound():
    """llama.cpp's grammar ignores number bounds: 5 for a level in [0, 1] gets one re-ask."""
    req = [Request(_ask("How much do you cooperate?"), schema=Cooperate, fallback=Cooperate(cooperate=0.0),
                   agent=0, cohort="llm")]  # fmt: skip
    out, client, srv = _run(['{"cooperate": 5}', '{"cooperate": 0.6}'], req)
    (c,) = out
    assert c.ok and c.repaired and c.parsed == Cooperate(cooperate=0.6) and srv.requests == 2
    repair = srv.bodies[1]["messages"][-1]["content"]
    assert "cooperate: Input should be less than or equal to 1 (got 5)" in repair
    assert client.usage.total["repairs"] == 1 and client.usage.total["failures"] == 0


def test_out_of_range_twice_is_a_counted_fallback():
    req = [Request(_ask("How much do you cooperate?"), schema=Cooperate, fallback=Cooperate(cooperate=0.0),
                   agent=0, cohort="llm")]  # fmt: skip
    out, client, srv = _run(['{"cooperate": -2}', '{"cooperate": 3}'], req)
    (c,) = out
    assert not c.ok and c.parsed == Cooperate(cooperate=0.0) and srv.requests == 2
    assert (
        c.error
        == "invalid reply after one repair: cooperate: Input should be less than or equal to 1 (got 3)"
    )
    assert client.usage.failure_kinds == {"invalid": 1} and client.usage.total["fallbacks"] == 1


def test_network_game_out_of_range_then_in_range_completes(tmp_path: Path) -> None:
    """Every first answer is out of range, every re-ask in range: no fallback, completed."""

    def reply(body: dict) -> str:
        repairing = any(m["role"] == "assistant" for m in body["messages"])
        return '{"cooperate": 0.7}' if repairing else '{"cooperate": 7}'

    srv = TestServer(reply=reply).start_in_thread()
    try:
        res = scenarios.run(
            "network-game", out=tmp_path / "ng", llm="openai/x", api_base=srv.url + "/v1", **GAME
        )
    finally:
        srv.stop()
    s = res.summary
    assert s["status"] == "completed"
    assert s["fallbacks"] == {"llm": {"decisions": 30, "fallbacks": 0, "rate": 0.0}}
    repairs = res.metrics[(res.metrics.metric == "llm_repairs") & res.metrics.cohort.isna()]
    (n,) = repairs["value"].tolist()
    assert n > 0 and srv.requests == 2 * n  # every distinct prompt re-asked exactly once
