"""A user's own study runs like a built-in one: `society run path/to/study.py:Class` (the
50-line Boltzmann example), `describe` included, and bad references are one-line errors."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import scenarios
from society.llm.testserver import TestServer

STUDY = str(Path(__file__).parents[1] / "examples" / "boltzmann_study.py") + ":Boltzmann"


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "society.cli", *args], capture_output=True, text=True
    )


def test_a_user_study_runs_from_the_cli_with_every_kind_of_agent(tmp_path):
    def reply(body: dict) -> str:  # keep the last coin
        return json.dumps(
            {"choice": "keep" if "You have 1 coins" in body["messages"][1]["content"] else "give"}
        )

    srv = TestServer(reply=reply).start_in_thread()
    try:
        done = _cli(
            "run", STUDY, "--set", "agents=mixed", "--set", "split=rules:4,learned:2,llm:2",
            "--set", "population=16", "--set", "steps=5", "--seed", "2", "--out", str(tmp_path / "run"),
            "--llm", "openai/test-model", "--api-base", srv.url + "/v1",
        )  # fmt: skip
    finally:
        srv.stop()
    assert done.returncode == 0, done.stderr
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["scenario"] == "boltzmann" and summary["status"] == "completed"
    assert srv.requests > 0  # the LLM agents were asked


def test_wealth_concentrates_from_equality():
    """Everyone starts with one coin (Gini 0); random giving spreads wealth towards the
    exponential Boltzmann-Gibbs law (Gini 1/2 in the limit). After 300 steps of 200 agents
    the Gini is far from 0 whatever the seed (seen 0.45-0.55)."""
    res = scenarios.run(STUDY, seed=1, replicates=2, write=False, population=200, steps=300)
    assert min(res.summary["metrics"]["gini"]["values"]) > 0.3


def test_describe_and_bad_references():
    done = _cli("describe", STUDY)
    assert done.returncode == 0 and "population" in done.stdout
    for ref, said in [
        ("nowhere/study.py:X", "does not exist"),
        (STUDY.replace("Boltzmann", "Missing"), "is not a sim_core.experiment.Scenario subclass"),
        ("json:loads", "is not a sim_core.experiment.Scenario subclass"),
        ("no_such_module_xyz:Study", "failed to import: ModuleNotFoundError"),
        ("no-such-scenario", "unknown scenario"),
    ]:
        done = _cli("run", ref)
        assert done.returncode == 2 and said in done.stderr, (ref, done.stderr)
        assert len(done.stderr.strip().splitlines()) == 1


def test_a_user_study_run_replays_from_its_directory(tmp_path):
    """The run directory names where the study's class lives, so `society replay` (and
    `society resume`) load it again although its name is not a registered one."""
    run = tmp_path / "run"
    assert (
        _cli(
            "run",
            STUDY,
            "--set",
            "population=30",
            "--set",
            "steps=20",
            "--seed",
            "3",
            "--out",
            str(run),
        ).returncode
        == 0
    )
    summary = json.loads((run / "summary.json").read_text())
    assert summary["study"] == f"{Path(STUDY.partition(':')[0]).resolve()}:Boltzmann"
    again = _cli("replay", str(run), "--out", str(tmp_path / "replay"))
    assert again.returncode == 0, again.stderr
    replayed = json.loads((tmp_path / "replay" / "summary.json").read_text())
    assert replayed["metrics"]["gini"]["values"] == summary["metrics"]["gini"]["values"]
