"""epidemic checkpoints: a run SIGKILLed after its first checkpoint resumes to the rows and
headline values of an uninterrupted run, on each path: rule agents in fused chunks of days,
rule and learned agents one day per moment, and periods=drawn (transitions queued as events
with their agents)."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import SEED, kill_after_checkpoint, same_run

import scenarios
from sim_core.checkpoint import read
from sim_core.recorder import read_metrics

CASES = {
    # rules only, periods=chain: 2 x 20000 agents make chunks of 50 days (several moments)
    "fused": {"population": 20000, "steps": 400, "r0": 1.5, "initial_infected": 20},
    # rules and learned agents: one day per moment, the population's state in the checkpoint
    "learned": {
        "agents": "mixed",
        "split": "rules:1,learned:1",
        "population": 200,
        "steps": 60,
        "r0": 1.5,
        "recovery_rate": 0.05,
        "learning_rate": 0.1,
    },
    # SEIR with drawn periods: onsets and recoveries queued with their agents, period draws
    "drawn": {
        "periods": "drawn",
        "model": "SEIR",
        "population": 2000,
        "steps": 120,
        "r0": 1.5,
        "initial_infected": 10,
    },
}


@pytest.mark.parametrize("path", list(CASES))
def test_a_killed_epidemic_run_resumes_to_the_same_rows(tmp_path: Path, path: str) -> None:
    config = CASES[path]
    out = tmp_path / "run"
    # _start lower-cases values: pass the upper-case ones (model=SEIR) as they are
    lower = {k: v for k, v in config.items() if str(v).lower() == str(v)}
    upper = [a for k, v in config.items() if k not in lower for a in ("--set", f"{k}={v}")]
    kill_after_checkpoint(out, "epidemic", lower, "--replicates", "2", *upper)
    assert read(out / "checkpoint.npz")["world"] is not None  # killed inside the batch
    reference = scenarios.run("epidemic", seed=SEED, replicates=2, write=False, **config)
    assert len(read_metrics(out)) < len(reference.metrics)
    same_run(
        scenarios.run("epidemic", seed=SEED, replicates=2, resume=out, config=config),
        reference,
        out,
    )
