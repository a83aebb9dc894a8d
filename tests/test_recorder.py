"""Recorder and run directory: tidy rows, chunked Parquet that survives a kill, summary."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pandas as pd
import pydantic
import pytest

from sim_core.errors import ConfigError
from sim_core.experiment import RunContext, Scenario, run_scenario
from sim_core.recorder import Recorder, read_metrics


def test_rows_are_tidy_and_vectorised(tmp_path: Path):
    rec = Recorder(tmp_path / "metrics.parquet", labels={"agent": int, "cohort": str}, chunk_rows=4)
    rec.record(0.0, "welfare", 1.5)
    rec.record(1.0, "payoff", np.array([1.0, 2.0, 3.0]), agent=np.arange(3), cohort="rules")
    rec.record(2.0, "cooperation", np.array([0.1, 0.2]), replicate=np.array([0, 1]))
    rec.close()
    df = read_metrics(tmp_path)
    assert list(df.columns) == ["replicate", "time", "metric", "value", "agent", "cohort"]
    assert len(df) == 6 and len(list((tmp_path / "metrics.parquet").glob("part-*.parquet"))) == 2
    payoff = df[df.metric == "payoff"]
    assert payoff["agent"].tolist() == [0, 1, 2] and set(payoff["cohort"]) == {"rules"}
    assert df[df.metric == "welfare"]["agent"].isna().all()
    assert df[df.metric == "cooperation"]["replicate"].tolist() == [0, 1]
    # pandas reads the directory as one table, too
    assert len(pd.read_parquet(tmp_path / "metrics.parquet")) == 6


def test_rows_in_memory_are_the_rows_on_disk(tmp_path: Path):
    """Without a path, small flushes keep their columns and the table is built when a frame is
    asked for (a fast run's fixed cost); a flush of chunk_rows rows is a table at once (its
    label columns as objects would take several times the memory). Both read as on disk."""

    def fill(rec: Recorder) -> Recorder:
        rec.record(0.0, "welfare", 1.5)
        rec.record(1.0, "payoff", np.array([1.0, 2.0, 3.0]), agent=np.arange(3), cohort="rules")
        rec.flush()
        rec.record(2.0, "cooperation", np.array([0.1, 0.2]), replicate=np.array([0, 1]))
        rec.record(3.0, "payoff", np.arange(5.0), agent=np.arange(5))  # 5 >= chunk_rows: a table
        rec.close()
        return rec

    labels = {"agent": int, "cohort": str}
    on_disk = fill(Recorder(tmp_path / "metrics.parquet", labels=labels, chunk_rows=4))
    in_memory = fill(Recorder(None, labels=labels, chunk_rows=4))
    assert any(not isinstance(m, list) for m in in_memory._memory)  # the large flush: a table
    assert in_memory.rows_written == on_disk.rows_written == 11
    pd.testing.assert_frame_equal(in_memory.frame(), read_metrics(tmp_path))
    pd.testing.assert_frame_equal(in_memory.frame(), read_metrics(tmp_path))  # asked again
    assert Recorder(None, labels=labels).frame().columns.tolist() == list(in_memory.frame())


def test_undeclared_label_and_bad_shapes_are_clear_errors():
    rec = Recorder(None, labels={"agent": int})
    with pytest.raises(ValueError, match="label 'task' was not declared"):
        rec.record(0.0, "x", 1.0, task="a")
    with pytest.raises(ValueError, match="scalar or 1-D"):
        rec.record(0.0, "x", np.zeros((2, 2)))
    with pytest.raises(ValueError, match="clashes"):
        Recorder(None, labels={"time": float})


KILLED_SCRIPT = textwrap.dedent(
    """
    import sys, time
    import numpy as np
    from pydantic import BaseModel
    from sim_core.experiment import Scenario, run_scenario

    class Cfg(BaseModel):
        rows_per_chunk: int = 100

    class Forever(Scenario):
        name = "forever"
        Config = Cfg
        headline = ("x",)
        def run(self, cfg, ctx):
            t = 0
            while True:
                ctx.recorder.record(float(t), "x", np.arange(cfg.rows_per_chunk, dtype=float))
                ctx.recorder.flush()
                print("flushed", t, flush=True)
                t += 1
                time.sleep(0.01)

    run_scenario(Forever, out=sys.argv[1])
    """
)


def test_killed_run_keeps_every_flushed_chunk(tmp_path: Path):
    script = tmp_path / "forever.py"
    script.write_text(KILLED_SCRIPT)
    out = tmp_path / "run"
    proc = subprocess.Popen(
        [sys.executable, str(script), str(out)], stdout=subprocess.PIPE, text=True
    )
    flushed = -1
    try:
        for line in proc.stdout:  # wait until several chunks are on disk
            flushed = int(line.split()[1])
            if flushed >= 5:
                break
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    assert proc.returncode == -signal.SIGKILL
    df = read_metrics(out)
    # Every chunk reported flushed before the kill is there, complete (100 rows each).
    times = sorted(df["time"].unique())
    assert times[: flushed + 1] == [float(t) for t in range(flushed + 1)]
    assert (df.groupby("time").size() == 100).all()


class _Cfg(pydantic.BaseModel):
    model_config = {"extra": "forbid"}
    level: float = 1.0


class Constant(Scenario):
    """A user's own scenario: records a constant per replicate."""

    name = "constant"
    Config = _Cfg
    headline = ("level",)

    def run(self, cfg: _Cfg, ctx: RunContext):
        noise = np.array([ctx.rng.numpy("noise", r).normal() for r in range(ctx.replicates)])
        for t in range(3):
            ctx.recorder.record(
                float(t), "level", cfg.level + noise, replicate=np.arange(ctx.replicates)
            )
        return {"level": cfg.level + noise}


def test_plots_are_written_unless_turned_off(tmp_path: Path, monkeypatch):
    """``plots=False`` (and, by default, ``SOCIETY_PLOTS=0``) writes the run without plots/;
    the argument wins over the environment."""
    monkeypatch.setenv("SOCIETY_PLOTS", "0")
    run_scenario(Constant, replicates=2, out=tmp_path / "env", level=1.0)
    run_scenario(Constant, replicates=2, out=tmp_path / "off", level=1.0, plots=False)
    run_scenario(Constant, replicates=2, out=tmp_path / "on", level=1.0, plots=True)
    assert (tmp_path / "env" / "summary.json").exists() and (
        tmp_path / "off" / "summary.json"
    ).exists()
    assert not (tmp_path / "env" / "plots").exists() and not (tmp_path / "off" / "plots").exists()
    assert (tmp_path / "on" / "plots" / "level.png").stat().st_size > 1000
    monkeypatch.setenv("SOCIETY_PLOTS", "1")
    run_scenario(Constant, replicates=2, out=tmp_path / "default", level=1.0)
    assert (tmp_path / "default" / "plots" / "level.png").exists()


@pytest.mark.plots
def test_user_scenario_writes_run_directory(tmp_path: Path):
    res = run_scenario(Constant, seed=4, replicates=5, out=tmp_path / "r", level=2.0)
    summary = json.loads((tmp_path / "r" / "summary.json").read_text())
    assert summary["scenario"] == "constant" and summary["seed"] == 4 and summary["replicates"] == 5
    assert summary["config"] == {"level": 2.0}
    assert {"python", "jax", "numpy", "litellm", "society-sim"} <= set(summary["versions"])
    m = summary["metrics"]["level"]
    assert len(m["values"]) == 5 and m["ci95"][0] < m["mean"] < m["ci95"][1]
    assert np.isclose(m["mean"], np.mean(m["values"]))
    assert (tmp_path / "r" / "plots" / "level.png").stat().st_size > 1000
    assert res.metrics.equals(read_metrics(tmp_path / "r"))
    assert res.headline()["metric"].tolist() == ["level"]


def test_summary_is_strict_json_when_a_metric_is_undefined(tmp_path: Path):
    class Undefined(Constant):
        def run(self, cfg, ctx):
            return {"level": np.array([np.nan, 1.0, np.inf])}

    res = run_scenario(Undefined, replicates=3, out=tmp_path / "u")
    text = (tmp_path / "u" / "summary.json").read_text()
    assert "NaN" not in text and "Infinity" not in text
    summary = json.loads(text, parse_constant=lambda c: pytest.fail(f"non-standard JSON {c}"))
    assert summary["metrics"]["level"]["values"] == [None, 1.0, None]
    assert summary["metrics"]["level"]["mean"] == 1.0
    assert np.isnan(res.summary["metrics"]["level"]["values"][0])  # in memory: still a float


def test_bad_parameters_are_one_line_config_errors(tmp_path: Path):
    with pytest.raises(ConfigError, match="unknown parameter 'levle'; accepted: level"):
        run_scenario(Constant, write=False, levle=1)
    with pytest.raises(ConfigError, match="invalid value for 'level'"):
        run_scenario(Constant, write=False, level="high")
    with pytest.raises(ConfigError, match="replicates"):
        run_scenario(Constant, write=False, replicates=0)
    (tmp_path / "x").mkdir()
    (tmp_path / "x" / "f").write_text("")
    with pytest.raises(ConfigError, match="not empty"):
        run_scenario(Constant, out=tmp_path / "x")


def test_failed_run_keeps_rows_and_says_so(tmp_path: Path):
    class Crash(Constant):
        def run(self, cfg, ctx):
            ctx.recorder.record(0.0, "level", 1.0)
            raise RuntimeError("agent 3 exploded")

    with pytest.raises(RuntimeError):
        run_scenario(Crash, out=tmp_path / "c")
    summary = json.loads((tmp_path / "c" / "summary.json").read_text())
    assert summary["status"] == "failed" and "agent 3 exploded" in summary["error"]
    assert len(read_metrics(tmp_path / "c")) == 1


def test_same_seed_same_rows_and_streams_are_order_free():
    a = run_scenario(Constant, seed=9, replicates=3, write=False).metrics
    b = run_scenario(Constant, seed=9, replicates=3, write=False).metrics
    c = run_scenario(Constant, seed=10, replicates=3, write=False).metrics
    pd.testing.assert_frame_equal(a, b)
    assert not a["value"].equals(c["value"])
