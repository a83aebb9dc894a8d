"""society sweep: grid points, the combined table, resuming, bad input, and the Ray path."""

from __future__ import annotations

import json
import os
import textwrap

import pandas as pd
import pytest

import scenarios
from sim_core.errors import ConfigError
from sim_core.sweep import grid_points, point_name
from society.cli import main, parse_grid

TOY = textwrap.dedent(
    '''
    import numpy as np
    import pydantic
    from sim_core.experiment import Scenario

    class ToyConfig(pydantic.BaseModel):
        """A toy study: a level grows by b per step."""
        model_config = pydantic.ConfigDict(extra="forbid")
        population: int = pydantic.Field(10, ge=1)
        steps: int = pydantic.Field(5, ge=1)
        b: float = 1.0
        mode: str = "a"
        fail: bool = False

    class Toy(Scenario):
        name = "toy"
        Config = ToyConfig
        def run(self, config, ctx):
            if config.fail:
                raise RuntimeError("asked to fail")
            x = np.zeros((ctx.replicates, config.population))
            noise = np.stack([ctx.rng.numpy("noise", r).normal(size=config.population) for r in range(ctx.replicates)])
            for t in range(config.steps):
                x = x + config.b
                ctx.recorder.record(t, "level", float(x.mean()), replicate=0)
            return {"score": x.mean(axis=1) + noise.mean(axis=1), "size": np.full(ctx.replicates, config.population)}
    '''
)


@pytest.fixture()
def toy(tmp_path):
    path = tmp_path / "toy.py"
    path.write_text(TOY)
    return f"{path}:Toy"


def test_parse_grid_reads_values_like_set():
    grid = parse_grid(["b=1,2.5,true,fermi", 'strategies=["a:1,b:2", "c"]', "learning-rate=0.1"])
    assert grid == {
        "b": [1, 2.5, True, "fermi"],
        "strategies": ["a:1,b:2", "c"],
        "learning_rate": [0.1],
    }
    for bad in (["b"], ["b=1,,2"], ["b=1", "b=2"], ["b=1,1"]):
        with pytest.raises(ConfigError):
            parse_grid(bad)


def test_grid_points_full_and_random():
    grid = {"a": [1, 2, 3], "b": ["x", "y"]}
    points = grid_points(grid)
    assert (
        points[:3] == [{"a": 1, "b": "x"}, {"a": 1, "b": "y"}, {"a": 2, "b": "x"}]
        and len(points) == 6
    )
    sample = grid_points(grid, random=4, seed=7)
    assert len(sample) == 4 and sample == grid_points(grid, random=4, seed=7)
    assert all(p in points for p in sample) and len({point_name(p) for p in sample}) == 4
    assert (
        point_name({"a": 1, "b": "x"})
        == point_name({"a": 1, "b": "x"})
        != point_name({"a": 1, "b": "y"})
    )
    with pytest.raises(ConfigError, match="--random"):
        grid_points(grid, random=7)


def test_sweep_table_and_resume(toy, tmp_path, capsys):
    out = tmp_path / "sweep"
    args = ["sweep", toy, "--grid", "b=1,2.5", "--grid", "mode=a,b", "--set", "population=4",
            "--replicates", "3", "--seed", "5", "--out", str(out)]  # fmt: skip
    assert main(args) == 0
    table = pd.read_parquet(out / "sweep.parquet")
    assert list(table.columns) == [
        "b",
        "mode",
        "point",
        "metric",
        "mean",
        "ci95_low",
        "ci95_high",
        "replicates",
        "status",
    ]
    assert len(table) == 4 * 2 and set(table["metric"]) == {"score", "size"}
    assert (table["status"] == "completed").all() and (table["replicates"] == 3).all()
    size = table[table["metric"] == "size"]
    assert (size["mean"] == 4).all()
    score = table[table["metric"] == "score"].set_index(["b", "mode"])["mean"]
    assert score[2.5, "a"] == pytest.approx(score[1.0, "a"] + 1.5 * 5)  # same seed at each point
    assert (table["ci95_low"] <= table["mean"]).all() and (
        table["mean"] <= table["ci95_high"]
    ).all()
    dirs = sorted((out / "points").iterdir())
    assert len(dirs) == 4 and all((d / "summary.json").exists() for d in dirs)
    summary = json.loads((dirs[0] / "summary.json").read_text())
    assert summary["config"]["population"] == 4 and summary["seed"] == 5

    # resume: finished points are kept as they are; a deleted and a half-written point are redone
    mtimes = {d.name: os.stat(d / "summary.json").st_mtime_ns for d in dirs}
    import shutil

    shutil.rmtree(dirs[1])
    (dirs[2] / "summary.json").unlink()
    capsys.readouterr()
    assert main(args) == 0
    printed = capsys.readouterr().out
    assert "2 of 4 point(s) already finished" in printed and "2 run" in printed
    for d in (dirs[0], dirs[3]):
        assert os.stat(d / "summary.json").st_mtime_ns == mtimes[d.name]
    assert (dirs[1] / "summary.json").exists() and (dirs[2] / "summary.json").exists()
    again = pd.read_parquet(out / "sweep.parquet")
    pd.testing.assert_frame_equal(again, table)

    # other arguments into the same directory: refused, nothing touched
    with pytest.raises(SystemExit) as exc:
        main([*args[:-2], "--seed", "6", "--out", str(out)])
    assert exc.value.code == 2


def test_failed_point_is_recorded_and_retried(toy, tmp_path):
    out = tmp_path / "sweep"
    result = scenarios.sweep(toy, {"fail": [False, True]}, out=out)
    assert len(result.failed) == 1 and len(result.ran) == 2
    table = result.table.set_index("fail")
    assert table.loc[True, "status"] == "failed" and pd.isna(table.loc[True, "metric"])
    again = scenarios.sweep(toy, {"fail": [False, True]}, out=out)
    assert again.ran == result.failed and len(again.skipped) == 1


def test_bad_input_is_one_line_before_anything_runs(toy, tmp_path, capsys):
    cases = [
        (["--grid", "bogus=1,2"], "unknown parameter 'bogus'"),
        (["--grid", "b=1,oops"], "invalid value for 'b'"),
        (["--grid", "b=1,2", "--set", "b=3"], "both by --grid and by --set"),
        (["--grid", "b=1,2", "--random", "3"], "--random"),
        (["--set", "b=1"], "at least one --grid"),
        (["--grid", "b=1,2", "--ray", "127.0.0.1:1"], "cannot reach Ray at '127.0.0.1:1'"),
    ]
    for extra, message in cases:
        out = tmp_path / "never"
        with pytest.raises(SystemExit) as exc:
            main(["sweep", toy, *extra, "--out", str(out)])
        err = capsys.readouterr().err
        assert exc.value.code == 2 and message in err and err.count("\n") == 1, err
        assert not out.exists()
    with pytest.raises(SystemExit) as exc:  # a built-in scenario's config is checked too
        main(
            [
                "sweep",
                "network-game",
                "--grid",
                "population=100,nope",
                "--out",
                str(tmp_path / "ng"),
            ]
        )
    assert exc.value.code == 2 and "invalid value for 'population'" in capsys.readouterr().err


def test_ray_path_with_two_workers(toy, tmp_path):
    ray = pytest.importorskip("ray")
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        result = scenarios.sweep(
            toy, {"b": [1, 2, 3]}, out=tmp_path / "ray", replicates=2, seed=3, workers=2
        )
    finally:
        ray.shutdown()
    assert len(result.ran) == 3 and not result.failed
    local = scenarios.sweep(toy, {"b": [1, 2, 3]}, out=tmp_path / "local", replicates=2, seed=3)
    pd.testing.assert_frame_equal(result.table, local.table)  # same numbers wherever a point ran


def test_local_workers_get_cores_of_their_own():
    """Each local worker is pinned to a distinct core it may run on; with more workers than
    cores nobody is pinned (the OS shares them out)."""
    from sim_core.sweep import _cores

    mine = sorted(os.sched_getaffinity(0))
    cores = _cores(len(mine))
    assert sorted(cores) == mine and len(set(cores)) == len(mine)
    assert _cores(len(mine) + 1) == [None] * (len(mine) + 1)
