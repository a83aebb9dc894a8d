"""donor-game runs SIGKILLed mid-run and resumed from their checkpoint: the same rows and
headline values as an uninterrupted run, for rule agents, rules with learned agents (whose
policies, selection and REINFORCE steps are part of the checkpoint) and rules with LLM agents."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from conftest import (
    SEED,
    TEST_LLM,
    donor_game_half_reply,
    kill_after_checkpoint,
    same_rows,
    same_run,
)

import scenarios
from society.llm.testserver import TestServer

# Small worlds (compiling the kernels is most of a test's time), killed after generation 2
# of a run that goes on: 8 more generations of rules (two replicates in one batch); 3 of
# rules and learned agents (one replicate, with a seed in which learned agents survive
# selection to the end and their share changes).
RULES = {"agents": "rules", "population": 4, "steps": 4, "generations": 10, "give_fraction": 0.3}
MIXED = {
    "agents": "mixed",
    "split": "rules:1,learned:1",
    "population": 8,
    "steps": 4,
    "generations": 5,
    "learning_rate": 0.1,
}
CASES = {"rules": (RULES, SEED, 2), "rules+learned": (MIXED, 1, 1)}


def _after(generations: int, steps: int = 4):
    """A checkpoint taken after ``generations`` generations (selection has run): the clock
    counts rounds, two games of ``steps`` rounds a generation."""
    return lambda c: c["scheduler"]["now"] >= generations * 2 * steps


@pytest.mark.parametrize("case", CASES)
def test_a_killed_donor_game_resumes_to_the_same_rows(tmp_path: Path, case: str) -> None:
    config, seed, replicates = CASES[case]
    reference = scenarios.run("donor-game", seed=seed, replicates=replicates, write=False, **config)
    out = tmp_path / "run"
    # the last --seed wins (a resume with another seed than the run's is refused below)
    extra = ("--replicates", str(replicates), "--seed", str(seed))
    kill_after_checkpoint(out, "donor-game", config, *extra, ready=_after(2))
    same_run(
        scenarios.run("donor-game", seed=seed, replicates=replicates, resume=out, config=config),
        reference,
        out,
    )


# Rules and LLM agents against the test server: the LLM agents' strategies (their personas)
# and the client's accounting continue from the checkpoint.
LLM_MIX = {
    "agents": "mixed",
    "split": "rules:1,llm:1",
    "population": 4,
    "steps": 4,
    "generations": 6,
}


def test_a_killed_donor_game_with_llm_agents_resumes_to_the_same_rows(tmp_path: Path) -> None:
    srv = TestServer(reply=donor_game_half_reply).start_in_thread()
    llm = {"llm": TEST_LLM, "api_base": srv.url + "/v1"}
    try:
        reference = scenarios.run("donor-game", seed=SEED, write=False, **llm, **LLM_MIX)
        out = tmp_path / "run"
        kill_after_checkpoint(
            out,
            "donor-game",
            LLM_MIX,
            "--llm",
            llm["llm"],
            "--api-base",
            llm["api_base"],
            ready=_after(2),
        )
        result = scenarios.run("donor-game", seed=SEED, resume=out, config=LLM_MIX, **llm)
    finally:
        srv.stop()
    same_run(result, reference, out)  # llm_* accounting rows included


def test_a_run_stopped_by_its_llm_budget_resumes_to_the_same_stop(tmp_path: Path) -> None:
    """The budget spent is part of the checkpoint: resuming a run that its budget stopped
    after the first of two batches starts no new batch and asks the model nothing more."""
    srv = TestServer(reply=donor_game_half_reply).start_in_thread()
    run = dict(seed=SEED, replicates=2, batch_replicates=1, llm=TEST_LLM, api_base=srv.url + "/v1")
    config = {**LLM_MIX, "generations": 2, "llm_budget_tokens": 5000}  # ~4000 a generation
    try:
        first = scenarios.run("donor-game", out=tmp_path / "run", config=config, **run)
        asked = srv.requests
        again = scenarios.run("donor-game", resume=tmp_path / "run", config=config, **run)
    finally:
        srv.stop()
    assert first.summary["status"] == again.summary["status"] == "stopped"
    assert again.summary["stop_reason"] == first.summary["stop_reason"]
    assert again.summary["stop_reason"].startswith("LLM budget reached")
    assert srv.requests == asked  # nothing asked after the resume
    values = again.summary["metrics"]["mean_resources"]["values"]
    assert values[0] == first.summary["metrics"]["mean_resources"]["values"][0] and math.isnan(
        values[1]
    )
    same_rows(tmp_path / "run", first.metrics)
