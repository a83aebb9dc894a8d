"""commons: runs killed after a checkpoint resume to the uninterrupted run's rows and headline
values: rule and rules + learned fishers SIGKILLed over many episodes (lakes that collapse
early wait for the next episode's first month); a kill right after such a collapse, and
LLM fishers who talk (messages.jsonl), stopped in-process after a chosen moment."""

from __future__ import annotations

import json
import re
import zlib
from pathlib import Path

import pytest
from conftest import (
    SEED,
    TEST_LLM,
    commons_schema_props,
    commons_user_text,
    kill_after_checkpoint,
    killed_in_process,
    same_run,
)

import scenarios
from sim_core.checkpoint import read
from society.llm.testserver import TestServer

# Greedy and sustainable rule fishers: every lake collapses in month 3 of 6, every episode.
RULES = {"agents": "rules", "strategies": "greedy:1,sustainable:1", "steps": 6, "episodes": 30}
# With learned fishers some episodes run their 6 months, in others every lake collapses early.
MIXED = {
    **RULES,
    "agents": "mixed",
    "split": "rules:2,learned:3",
    "episodes": 20,
    "learning_rate": 0.5,
}


@pytest.mark.parametrize("config", [RULES, MIXED], ids=["rules", "rules+learned"])
def test_a_killed_commons_run_resumes_to_the_same_rows(tmp_path: Path, config: dict) -> None:
    reference = scenarios.run("commons", seed=SEED, replicates=2, write=False, **config)
    out = tmp_path / "run"
    kill_after_checkpoint(out, "commons", config, "--replicates", "2")
    same_run(
        scenarios.run("commons", seed=SEED, replicates=2, resume=out, config=config), reference, out
    )


def test_killed_after_every_lake_collapsed_the_run_resumes(tmp_path: Path, monkeypatch) -> None:
    config = {**RULES, "episodes": 3}
    reference = scenarios.run("commons", seed=SEED, replicates=2, write=False, **config)
    out = tmp_path / "run"
    killed_in_process(
        monkeypatch, "commons", 3, out, config, replicates=2
    )  # month 3 of episode 1: both lakes collapse
    # Collapsed lakes wait for the episode's end (months 4-6), then fresh lakes are fished.
    sched = read(out / "checkpoint.npz")["scheduler"]
    assert sched["now"] == 2.0 and [e["time"] for e in sched["events"]] == [3.0]
    same_run(
        scenarios.run("commons", seed=SEED, replicates=2, resume=out, config=config), reference, out
    )


def chatty_reply(body: dict) -> str:
    """A stand-in model whose message and catch hang on every character of the prompt (the
    lake's history, the posts of the month): a state not restored shows."""
    h = zlib.crc32(commons_user_text(body).encode())
    if "message" in commons_schema_props(body):
        return json.dumps({"message": f"I plan {h % 97} tons."})
    share = float(re.search(r"catches more than ([0-9.]+) tons", commons_user_text(body)).group(1))
    return json.dumps({"reason": "x", "catch": round(share * (0.5 + (h % 100) / 100), 2)})


def test_talking_llm_fishers_resume_to_the_same_rows_and_messages(
    tmp_path: Path, monkeypatch
) -> None:
    """Rule, learned and LLM fishers who post messages; killed in month 3 of episode 1. The
    transcript lines written after the checkpoint are not written twice."""
    config = {"agents": "mixed", "split": "rules:1,learned:2,llm:2", "steps": 4, "episodes": 2,
              "universalization": True, "message_chars": 60}  # fmt: skip
    srv = TestServer(reply=chatty_reply).start_in_thread()
    try:
        kw = {"llm": TEST_LLM, "api_base": srv.url + "/v1"}
        reference = scenarios.run(
            "commons", seed=SEED, replicates=2, out=tmp_path / "ref", config=config, **kw
        )
        out = tmp_path / "run"
        killed_in_process(monkeypatch, "commons", 3, out, config, **kw, replicates=2)
        same_run(
            scenarios.run("commons", seed=SEED, replicates=2, resume=out, config=config, **kw),
            reference,
            out,
        )
    finally:
        srv.stop()
    want = (tmp_path / "ref" / "messages.jsonl").read_text()
    assert len(want.splitlines()) == 2 * 2 * 4 * 2  # fishers x lakes x months x episodes
    assert (out / "messages.jsonl").read_text() == want
