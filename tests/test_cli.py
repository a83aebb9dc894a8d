"""The `society` command: list, describe, run, and one-line errors with exit status 2."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from sim_core.errors import ConfigError
from society.cli import main, parse_set


def society(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "society.cli", *args], capture_output=True, text=True, cwd=cwd
    )


def test_list_and_describe(capsys):
    assert main(["list"]) == 0
    out = capsys.readouterr().out
    lines = out.strip().splitlines()
    assert any(line.startswith("network-game  ") for line in lines)
    assert len(lines) == len(__import__("scenarios").names())
    assert main(["describe", "network-game"]) == 0
    out = capsys.readouterr().out
    for param in ("graph", "population", "update", "selection", "init_cooperators", "average_from"):
        assert param in out


def test_list_does_not_import_jax():
    code = "import sys; from society.cli import main; main(['list']); print('jax' in sys.modules)"
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert out.strip().splitlines()[-1] == "False"


@pytest.mark.plots
def test_run_writes_run_directory(tmp_path: Path):
    cfg = tmp_path / "params.toml"
    cfg.write_text('population = 64\nsteps = 5\ngraph = "cycle"\n')
    out = tmp_path / "run"
    res = society(
        "run",
        "network-game",
        "--config",
        str(cfg),
        "--set",
        "update=fermi",
        "--set",
        "synchronous=true",
        "--seed",
        "3",
        "--replicates",
        "2",
        "--out",
        str(out),
    )
    assert res.returncode == 0, res.stderr
    assert "cooperator_fraction" in res.stdout and str(out) in res.stdout
    summary = json.loads((out / "summary.json").read_text())
    assert summary["config"]["population"] == 64 and summary["config"]["update"] == "fermi"
    assert summary["config"]["graph"] == "cycle" and summary["seed"] == 3
    assert len(summary["metrics"]["cooperator_fraction"]["values"]) == 2
    assert (out / "plots" / "cooperator_fraction.png").exists()


def test_no_plots_writes_the_run_without_them(tmp_path: Path, monkeypatch):
    monkeypatch.setenv("SOCIETY_PLOTS", "1")  # the option wins over the environment
    args = ["run", "network-game", "--set", "population=10", "--set", "steps=2"]
    assert main([*args, "--no-plots", "--out", str(tmp_path / "off")]) == 0
    assert (tmp_path / "off" / "summary.json").exists()
    assert not (tmp_path / "off" / "plots").exists()


@pytest.mark.parametrize(
    "args,needle",
    [
        (
            ["run", "network-game", "--set", "popluation=10"],
            "unknown parameter 'popluation'; accepted: agents, split, population",
        ),
        (["run", "network-game", "--set", "update=vote"], "invalid value for 'update'"),
        (["run", "network-game", "--set", "population=-5"], "invalid value for 'population'"),
        (["run", "network-game", "--set", "agents"], "--set expects KEY=VALUE"),
        (["run", "network-game", "--seed", "abc"], "'--seed'"),
        (["run", "network-game", "--config", "/nonexistent.toml"], "does not exist"),
        (["run", "chess"], "unknown scenario 'chess'; available: "),
        (["describe", "chess"], "unknown scenario 'chess'"),
        (
            [
                "run",
                "network-game",
                "--set",
                "graph=lattice",
                "--set",
                "population=50",
                "--set",
                "steps=1",
            ],
            "square",
        ),
    ],
)
def test_bad_input_is_one_line_on_stderr_with_status_2(args, needle):
    res = society(*args)
    assert res.returncode == 2
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), res.stderr
    assert needle in lines[0]
    assert "Traceback" not in res.stderr


def test_bad_toml_file(tmp_path: Path):
    bad = tmp_path / "bad.toml"
    bad.write_text("agents = = 3\n")
    res = society("run", "network-game", "--config", str(bad))
    assert res.returncode == 2 and "not valid TOML" in res.stderr


def test_parse_set_reads_toml_literals():
    assert parse_set(
        ["a=3", "b=0.5", "c=true", "d=single", 'e="x y"', "self-interaction=false"]
    ) == {
        "a": 3,
        "b": 0.5,
        "c": True,
        "d": "single",
        "e": "x y",
        "self_interaction": False,
    }
    with pytest.raises(ConfigError):
        parse_set(["=3"])
