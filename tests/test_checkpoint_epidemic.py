"""epidemic checkpoints: a run SIGKILLed after its first checkpoint resumes to the rows and
headline values of an uninterrupted run, on each path: rule agents in fused chunks of days,
rule and learned agents one day per moment, and periods=drawn (transitions queued as events
with their agents)."""

from __future__ import annotations

import json
import signal
from pathlib import Path

import numpy as np
import pytest
from test_checkpoint import SEED, _same_rows, _start, _wait_for_checkpoint

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
    proc = _start(out, "epidemic", lower, "--replicates", "2", *upper)
    _wait_for_checkpoint(proc, out)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert json.loads((out / "summary.json").read_text())["status"] == "running", "finished before the kill"
    assert read(out / "checkpoint.npz")["world"] is not None  # killed inside the batch
    reference = scenarios.run("epidemic", seed=SEED, replicates=2, write=False, **config)
    assert len(read_metrics(out)) < len(reference.metrics)
    result = scenarios.run("epidemic", seed=SEED, replicates=2, resume=out, config=config)
    assert result.summary["status"] == "completed" and result.summary["resumed"] == "from a checkpoint"
    for k, v in reference.summary["metrics"].items():
        np.testing.assert_array_equal(result.summary["metrics"][k]["values"], v["values"], err_msg=k)
    _same_rows(out, reference.metrics)
