"""donor-game runs SIGKILLed mid-run and resumed from their checkpoint: the same rows and
headline values as an uninterrupted run, for rule agents, rules with learned agents (whose
policies, selection and REINFORCE steps are part of the checkpoint) and rules with LLM agents."""

from __future__ import annotations

import json
import signal
import subprocess
import time
from pathlib import Path

import pytest
from test_checkpoint import SEED, _same_rows, _start, _wait_for_checkpoint
from test_scenario_donor_game import LLM, half_reply

import scenarios
from sim_core.checkpoint import CheckpointError, read
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


def _wait_for_generation(proc: subprocess.Popen, out: Path, generations: int) -> None:
    """Until a checkpoint taken after ``generations`` generations (selection has run) exists."""
    _wait_for_checkpoint(proc, out)
    while True:
        assert proc.poll() is None, f"the run ended before generation {generations}: {proc.communicate()}"
        try:
            if read(out / "checkpoint.npz")["world"]["generations_done"] >= generations:
                return
        except (CheckpointError, TypeError):  # a checkpoint between batches holds no world
            pass
        time.sleep(0.01)


@pytest.mark.parametrize("case", CASES)
def test_a_killed_donor_game_resumes_to_the_same_rows(tmp_path: Path, case: str) -> None:
    config, seed, replicates = CASES[case]
    reference = scenarios.run("donor-game", seed=seed, replicates=replicates, write=False, **config)
    out = tmp_path / "run"
    # the last --seed wins (a resume with another seed than the run's is refused below)
    proc = _start(out, "donor-game", config, "--replicates", str(replicates), "--seed", str(seed))
    _wait_for_generation(proc, out, 2)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert json.loads((out / "summary.json").read_text())["status"] == "running", "finished before the kill"
    result = scenarios.run("donor-game", seed=seed, replicates=replicates, resume=out, config=config)
    assert result.summary["status"] == "completed" and result.summary["resumed"] == "from a checkpoint"
    for k, v in reference.summary["metrics"].items():
        assert result.summary["metrics"][k]["values"] == v["values"], k
    _same_rows(out, reference.metrics)


# Rules and LLM agents against the test server: the LLM agents' strategies (their personas)
# and the client's accounting continue from the checkpoint.
LLM_MIX = {"agents": "mixed", "split": "rules:1,llm:1", "population": 4, "steps": 4, "generations": 6}


def test_a_killed_donor_game_with_llm_agents_resumes_to_the_same_rows(tmp_path: Path) -> None:
    srv = TestServer(reply=half_reply).start_in_thread()
    llm = {"llm": LLM, "api_base": srv.url + "/v1"}
    try:
        reference = scenarios.run("donor-game", seed=SEED, write=False, **llm, **LLM_MIX)
        out = tmp_path / "run"
        proc = _start(out, "donor-game", LLM_MIX, "--llm", llm["llm"], "--api-base", llm["api_base"])
        _wait_for_generation(proc, out, 2)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        assert json.loads((out / "summary.json").read_text())["status"] == "running", "finished before the kill"
        result = scenarios.run("donor-game", seed=SEED, resume=out, config=LLM_MIX, **llm)
    finally:
        srv.stop()
    assert result.summary["status"] == "completed" and result.summary["resumed"] == "from a checkpoint"
    for k, v in reference.summary["metrics"].items():
        assert result.summary["metrics"][k]["values"] == v["values"], k
    _same_rows(out, reference.metrics)  # llm_* accounting rows included
