"""public-goods runs SIGKILLed mid-run and resumed from their checkpoint: the same rows and
headline values as an uninterrupted run, on both paths: rule agents in fused chunks of
rounds, and one round per moment for rules with learned agents and a sanction stage (both
stages' learned policies are part of the checkpoint) and for rules with LLM agents (the
rounds they are told of are part of it)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import SEED, kill_after_checkpoint, public_goods_reply, same_run

import scenarios
from society.llm.testserver import TestServer

# The fused path: 20 chunks of 100 rounds (conditional cooperators carry the last round).
FUSED = {
    "agents": "rules",
    "population": 16,
    "steps": 2000,
    "strategies": "conditional:2,free-rider:1,cooperator:1",
}
# The per-round path: rules and learned agents, punishment after every round.
SANCTIONS = {
    "agents": "mixed",
    "split": "rules:1,learned:1",
    "population": 8,
    "steps": 60,
    "punishment": True,
    "learning_rate": 0.1,
    "strategies": "conditional:1,punisher:1,free-rider:1",
}
CASES = {"fused rules": (FUSED, 100), "rules+learned, punishment": (SANCTIONS, 10)}


def _after(rounds: int):
    """A checkpoint taken after ``rounds`` rounds."""
    return lambda c: c["world"]["rounds_done"] >= rounds


@pytest.mark.parametrize("case", CASES)
def test_a_killed_public_goods_run_resumes_to_the_same_rows(tmp_path: Path, case: str) -> None:
    config, rounds = CASES[case]
    reference = scenarios.run("public-goods", seed=SEED, replicates=2, write=False, **config)
    out = tmp_path / "run"
    kill_after_checkpoint(out, "public-goods", config, "--replicates", "2", ready=_after(rounds))
    same_run(
        scenarios.run("public-goods", seed=SEED, replicates=2, resume=out, config=config),
        reference,
        out,
    )


def _history_reply(body: dict) -> str:
    """The test server's replies, with contributions that depend on the whole prompt: on
    the past rounds an LLM agent is told (the world's history, part of the checkpoint)."""
    out = json.loads(public_goods_reply(body))
    if "contribution" in out:
        out["contribution"] = len(body["messages"][-1]["content"]) % 21
    return json.dumps(out)


# The per-round path with LLM agents: rules and LLM agents, punishment, two rounds of memory.
LLM_MIX = {
    "agents": "mixed",
    "split": "rules:1,llm:1",
    "population": 8,
    "steps": 30,
    "punishment": True,
    "llm_memory": 2,
}


def test_a_killed_public_goods_run_with_llm_agents_resumes_to_the_same_rows(tmp_path: Path) -> None:
    srv = TestServer(reply=_history_reply).start_in_thread()
    llm = {"llm": "openai/test-model", "api_base": srv.url + "/v1"}
    try:
        reference = scenarios.run("public-goods", seed=SEED, write=False, **llm, **LLM_MIX)
        out = tmp_path / "run"
        kill_after_checkpoint(
            out,
            "public-goods",
            LLM_MIX,
            "--llm",
            llm["llm"],
            "--api-base",
            llm["api_base"],
            ready=_after(5),
        )
        result = scenarios.run("public-goods", seed=SEED, resume=out, config=LLM_MIX, **llm)
    finally:
        srv.stop()
    same_run(result, reference, out)  # llm_* accounting rows included
