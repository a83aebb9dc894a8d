"""Checkpoints and resume: the scheduler's queue as data, the checkpoint file, and runs that
are SIGKILLed or SIGTERMed mid-moment and resumed to the same metrics, row for row."""

from __future__ import annotations

import json
import os
import signal
import subprocess
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import (
    SEED,
    SOCIETY,
    kill_after_checkpoint,
    same_rows,
    same_run,
    start,
    wait_for_checkpoint,
)
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import scenarios
from sim_core.checkpoint import FORMAT, CheckpointError, load_for_resume, read, write
from sim_core.errors import ConfigError
from sim_core.recorder import read_metrics
from sim_core.scheduler import Scheduler, SnapshotError

# 2000 agents, synchronous updating: 20,000 generations (a moment each), a checkpoint every
# 1000 (each a compiled chunk: a kill lands inside one, its recorded rows lost with it).
GAME = {"population": 2000, "steps": 20000, "synchronous": True, "record_every": 10}
EVERY = 1000


def _traced(trace: list) -> Scheduler:
    sim = Scheduler()
    sim.handle("tick", lambda k: trace.append(("tick", sim.now, k)))
    sim.handle("once", lambda x: trace.append(("once", sim.now, x)))
    return sim


def _scheduled(trace: list) -> Scheduler:
    sim = _traced(trace)
    sim.every(1.0, sim.handlers["tick"], 7, name="ticks")
    sim.at(2.5, sim.handlers["once"], "a")
    sim.at(6.5, sim.handlers["once"], (1, 2))
    return sim


def test_scheduler_snapshot_restores_the_rest_of_the_run() -> None:
    full: list = []
    _scheduled(full).run(until=9)
    first: list = []
    sim = _scheduled(first)
    sim.run(until=4)
    snap = json.loads(json.dumps(sim.snapshot()))  # plain data: survives JSON
    rest: list = []
    sim2 = _traced(rest)
    sim2.restore(snap)
    sim2.run(until=9)
    # JSON turns the tuple argument into a list; compare values
    assert [(a, b, list(c) if isinstance(c, tuple | list) else c) for a, b, c in first + rest] == [
        (a, b, list(c) if isinstance(c, tuple) else c) for a, b, c in full
    ]


def test_an_unregistered_handler_cannot_be_saved() -> None:
    sim = Scheduler()
    sim.at(1.0, lambda: None, name="anonymous")
    with pytest.raises(SnapshotError, match="anonymous.*not registered"):
        sim.snapshot()
    restored = Scheduler()
    with pytest.raises(SnapshotError, match="'tick', which is not registered"):
        restored.restore(
            {
                "now": 0,
                "next_seq": 1,
                "dispatched": 0,
                "events": [
                    {
                        "handler": "tick",
                        "args": [],
                        "time": 1.0,
                        "priority": 0,
                        "seq": 0,
                        "agents": None,
                        "name": None,
                    }
                ],
            }
        )


def test_checkpoint_file_round_trip_and_corruption(tmp_path: Path) -> None:
    doc = {
        "format": FORMAT,
        "world": {"s": np.arange(6, dtype=np.int8).reshape(2, 3), "gen": 4},
        "done": {0: (np.array([0.5]), np.array([1.0]))},
        "nan": float("nan"),
    }
    path = tmp_path / "checkpoint.npz"
    write(path, doc)
    back = read(path)
    assert back["world"]["s"].dtype == np.int8 and back["world"]["s"].tolist() == [
        [0, 1, 2],
        [3, 4, 5],
    ]
    assert (
        back["world"]["gen"] == 4 and isinstance(back["done"][0], tuple) and np.isnan(back["nan"])
    )
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])
    with pytest.raises(CheckpointError, match="corrupt") as err:
        read(path)
    assert "\n" not in str(err.value)
    write(path, {**doc, "format": FORMAT - 1})  # written by an older version: refused
    with pytest.raises(
        CheckpointError, match=f"format {FORMAT - 1}; this version reads format {FORMAT}"
    ) as err:
        read(path)
    assert "\n" not in str(err.value)


@pytest.fixture(scope="module")
def reference() -> pd.DataFrame:
    """The uninterrupted run's rows."""
    return scenarios.run("network-game", seed=SEED, write=False, **GAME).metrics


def test_a_run_killed_between_checkpoints_resumes_to_the_same_rows(
    tmp_path: Path, reference: pd.DataFrame
) -> None:
    out = tmp_path / "run"
    proc = start(out, "network-game", GAME, checkpoint_every=EVERY)
    wait_for_checkpoint(proc, out)
    proc.send_signal(signal.SIGKILL)  # the next chunk is being computed: it dies half done
    proc.wait()
    summary = json.loads((out / "summary.json").read_text())
    assert summary["status"] == "running"  # killed: nothing finished it
    assert len(read_metrics(out)) < len(reference)
    result = scenarios.run("network-game", seed=SEED, resume=out, config=GAME)
    assert (
        result.summary["status"] == "completed" and result.summary["resumed"] == "from a checkpoint"
    )
    same_rows(out, reference)
    assert not (out / "checkpoint.npz").exists()  # completed: nothing is left to resume
    with pytest.raises(ConfigError, match="already completed"):
        scenarios.run("network-game", seed=SEED, resume=out, config=GAME)


def test_sigterm_stops_at_a_checkpoint_and_society_resume_continues(
    tmp_path: Path, reference: pd.DataFrame
) -> None:
    out = tmp_path / "run"
    proc = start(out, "network-game", GAME, checkpoint_every=EVERY)
    wait_for_checkpoint(proc, out)
    proc.send_signal(signal.SIGTERM)
    stdout, stderr = proc.communicate()
    assert proc.returncode == 130, stderr
    summary = json.loads((out / "summary.json").read_text())
    assert summary["status"] == "stopped" and summary["interrupted"] is True
    assert "SIGTERM" in summary["stop_reason"] and "society resume" in summary["stop_reason"]
    with pytest.raises(ConfigError, match="belongs to another run.*seed"):
        scenarios.run("network-game", seed=SEED + 1, resume=out, config=GAME)
    done = subprocess.run(
        [SOCIETY, "resume", str(out)], capture_output=True, text=True, env={**os.environ, "CI": "1"}
    )
    assert done.returncode == 0, done.stderr
    assert "status: completed" in done.stdout
    same_rows(out, reference)


# division-of-labour's rule engine: 2 replicates in one batch, 10 chunks of 1000 steps.
COLONY = {"population": 1000, "steps": 10000, "average_from": 5000, "record_every": 100}
# indirect-reciprocity's rule agents (random players and errors: the world's coming draws are
# part of the world): 2 replicates in one batch, 15 chunks of 100 rounds.
DONORS = {
    "population": 500,
    "steps": 1500,
    "strategies": "disc:8,random:1,alld:1",
    "execution_error": 0.02,
    "q": 0.8,
    "record_every": 50,
}


@pytest.mark.parametrize(
    "name, config, every",
    [("division-of-labour", COLONY, 1000), ("indirect-reciprocity", DONORS, 100)],
)
def test_a_killed_run_of_rule_agents_resumes_to_the_same_rows(
    tmp_path: Path, name: str, config: dict, every: int
) -> None:
    reference = scenarios.run(name, seed=SEED, replicates=2, write=False, **config)
    out = tmp_path / "run"
    kill_after_checkpoint(out, name, config, "--replicates", "2", checkpoint_every=every)
    same_run(
        scenarios.run(name, seed=SEED, replicates=2, resume=out, config=config), reference, out
    )


# indirect-reciprocity with rule and learned agents: the learned cohort's policies and
# optimiser state are part of the checkpoint (the population's state_dict).
COUNCIL = {
    "agents": "mixed",
    "split": "rules:1,learned:1",
    "population": 60,
    "steps": 400,
    "learning": "reinforce",
}


def test_a_killed_run_with_learning_agents_resumes_to_the_same_rows(tmp_path: Path) -> None:
    reference = scenarios.run("indirect-reciprocity", seed=SEED, write=False, **COUNCIL)
    out = tmp_path / "run"
    # some moments after the first checkpoint: the learned agents have moved from their start
    kill_after_checkpoint(out, "indirect-reciprocity", COUNCIL, wait=0.5)
    same_run(
        scenarios.run("indirect-reciprocity", seed=SEED, resume=out, config=COUNCIL), reference, out
    )


def test_resume_refuses_what_is_not_a_stopped_run(tmp_path: Path) -> None:
    done = subprocess.run([SOCIETY, "resume", str(tmp_path)], capture_output=True, text=True)
    assert (
        done.returncode == 2
        and "no summary.json" in done.stderr
        and len(done.stderr.strip().splitlines()) == 1
    )


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(data=st.binary(max_size=400), keep=st.integers(0, 2000))
def test_a_corrupt_checkpoint_is_one_line_and_leaves_the_run_alone(
    tmp_path: Path, data: bytes, keep: int
) -> None:
    """Random bytes, and truncations of a real checkpoint, give a one-line CheckpointError
    before resume touches the run directory's metrics."""
    run = tmp_path / "run"
    (run / "metrics.parquet").mkdir(parents=True, exist_ok=True)
    part = run / "metrics.parquet" / "part-00009.parquet"
    part.write_bytes(b"rows")
    good = tmp_path / "good.npz"
    write(good, {"format": FORMAT, "recorder": {"parts": 0, "rows": 0}, "world": np.zeros(50)})
    for blob in (data, good.read_bytes()[: min(keep, good.stat().st_size - 1)]):
        (run / "checkpoint.npz").write_bytes(blob)
        with pytest.raises(CheckpointError) as err:
            load_for_resume(run)
        assert "\n" not in str(err.value)
        assert part.read_bytes() == b"rows"
