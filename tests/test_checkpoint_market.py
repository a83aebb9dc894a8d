"""market: runs killed after a checkpoint resume to the uninterrupted run's rows and headline
values: rule firms and rules + learned firms SIGKILLed; consumers arriving at k moments a
period and LLM firms stopped in-process right after the checkpoint of a chosen period. The
market is a Study: no checkpoint code of its own."""

from __future__ import annotations

import json
import re
import zlib
from pathlib import Path

import pytest
from conftest import (
    SEED,
    TEST_LLM,
    kill_after_checkpoint,
    killed_in_process,
    market_cost_in,
    market_user_text,
    same_run,
)

import scenarios
from sim_core.checkpoint import read
from society.llm.testserver import TestServer

# One shape for every case (4 firms, 3 Sybil listings, 20 consumers): compilations are shared.
BASE = {"population": 4, "consumers": 20, "capacity": 8, "sybil": 1}
CASES = {
    "rules": {**BASE, "agents": "rules", "steps": 50},
    # the learned firms' policies and optimiser state are in the checkpoint (population)
    "rules+learned": {**BASE, "agents": "mixed", "split": "rules:1,learned:1", "steps": 50},
}
# 3 arrival moments a period, drawn inside the period's step.
ARRIVALS = {**BASE, "agents": "mixed", "split": "rules:1,learned:1", "arrivals": 3, "steps": 4}


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_killed_market_run_resumes_to_the_same_rows(tmp_path: Path, case: str) -> None:
    config = CASES[case]
    reference = scenarios.run("market", seed=SEED, replicates=2, write=False, **config)
    out = tmp_path / "run"
    kill_after_checkpoint(out, "market", config, "--replicates", "2")
    same_run(
        scenarios.run("market", seed=SEED, replicates=2, resume=out, config=config), reference, out
    )


@pytest.mark.parametrize("moment", [1, 3])
def test_arrivals_resume_from_any_period(tmp_path: Path, monkeypatch, moment: int) -> None:
    """Killed after period 1 or 3 of 4 with consumers arriving at 3 moments a period: the
    arrivals and their ratings live in the world the step returns, so the checkpoint (the
    world and the next period queued) carries them on as they would."""
    reference = scenarios.run("market", seed=SEED, replicates=2, write=False, **ARRIVALS)
    out = tmp_path / "run"
    killed_in_process(monkeypatch, "market", moment, out, ARRIVALS, replicates=2)
    queued = {e["name"] for e in read(out / "checkpoint.npz")["scheduler"]["events"]}
    assert queued == {"act"}
    same_run(
        scenarios.run("market", seed=SEED, replicates=2, resume=out, config=ARRIVALS),
        reference,
        out,
    )


def prompt_reply(body: dict) -> str:
    """A stand-in model whose price hangs on every character of the prompt (the firm's own
    history, its rivals' prices, ratings and listings): a state not restored shows."""
    prompt = market_user_text(body)
    period = re.search(r"This is period (\d+) of", prompt).group(1)
    price = market_cost_in(body) + 0.25 + (zlib.crc32(prompt.encode()) % 100) / 100
    return json.dumps(
        {
            "reason": "x",
            "price": price,
            "listing": f"Goods {zlib.crc32(prompt.encode()) % 7} p{period}",
        }
    )


def test_llm_firms_resume_to_the_same_rows(tmp_path: Path, monkeypatch) -> None:
    """Rules, learned and two LLM firms per market (a scripted stand-in server that reads
    the rival LLM firm's listing), killed in period 3."""
    config = {**BASE, "agents": "mixed", "split": "rules:1,learned:1,llm:2", "steps": 6}
    srv = TestServer(reply=prompt_reply).start_in_thread()
    try:
        kw = {"llm": TEST_LLM, "api_base": srv.url + "/v1"}
        reference = scenarios.run("market", seed=SEED, replicates=2, write=False, **kw, **config)
        out = tmp_path / "run"
        killed_in_process(monkeypatch, "market", 3, out, config, **kw, replicates=2)
        same_run(
            scenarios.run("market", seed=SEED, replicates=2, resume=out, config=config, **kw),
            reference,
            out,
        )
    finally:
        srv.stop()
