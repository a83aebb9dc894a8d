"""Every script in examples/ runs, at a small size, and does real work; every CLI command's
help shows an example.

Scripts read ``SOCIETY_EXAMPLE_SMALL=1`` and shrink their populations, steps and
replicates; scenario modules (``path.py:Class``) run through ``society run`` into a
temporary directory. Each runs in a subprocess with this interpreter, two at a time (jax
start-up and compilation dominate, so the pair overlaps well on two cores). Nothing here
touches the network: examples with LLM agents use the scriptable TestServer on 127.0.0.1.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import pytest
import typer
import typer.testing

from society.cli import app
from society.llm.testserver import TestServer

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
CLI = [sys.executable, "-m", "society.cli"]

# name -> (argv after the interpreter, with {tmp} and {api_base} filled in; text in stdout)
CASES: dict[str, tuple[list[str], str]] = {
    "commons.py": ([str(EXAMPLES / "commons.py")], "sustainability"),
    "division_of_labour.py": ([str(EXAMPLES / "division_of_labour.py")], "DOL index"),
    "donor_game.py": ([str(EXAMPLES / "donor_game.py")], "mean resources"),
    "epidemic.py": ([str(EXAMPLES / "epidemic.py")], "attack rate"),
    "indirect_reciprocity.py": ([str(EXAMPLES / "indirect_reciprocity.py")], "cooperation"),
    "market.py": ([str(EXAMPLES / "market.py")], "fraud_rate"),
    "mixed_society.py": ([str(EXAMPLES / "mixed_society.py")], "identical prompts deduplicated"),
    "network_game.py": ([str(EXAMPLES / "network_game.py")], "cooperators"),
    "public_goods.py": ([str(EXAMPLES / "public_goods.py")], "contributions by round"),
    "skill_society.py": ([str(EXAMPLES / "skill_society.py")], "held-out gain"),
    # scenario modules: run by the CLI, mixed agents with the LLM ones on the test server
    "boltzmann_study.py": (
        [
            "-m",
            "society.cli",
            "run",
            f"{EXAMPLES / 'boltzmann_study.py'}:Boltzmann",
            "--set",
            "agents=mixed",
            "--set",
            "population=20",
            "--set",
            "steps=5",
            "--set",
            "split=rules:2,learned:1,llm:1",
            "--replicates",
            "2",
            "--llm",
            "openai/test-model",
            "--api-base",
            "{api_base}",
            "--out",
            "{tmp}/run",
        ],
        "gini",
    ),  # fmt: skip
    "mesa_boltzmann.py": (
        [
            "-m",
            "society.cli",
            "run",
            f"{EXAMPLES / 'mesa_boltzmann.py'}:MesaBoltzmann",
            "--set",
            "population=20",
            "--set",
            "steps=5",
            "--replicates",
            "2",
            "--out",
            "{tmp}/run",
        ],
        "gini",
    ),  # fmt: skip
}
PRESENT = sorted(p.name for p in EXAMPLES.glob("*.py"))


def test_every_example_has_a_smoke_test():
    assert set(PRESENT) <= set(CASES), f"add to CASES: {sorted(set(PRESENT) - set(CASES))}"


@pytest.fixture(scope="module")
def runs(request, tmp_path_factory):
    """Start the selected examples, two at a time, in test order; name -> Future."""
    names = []
    for item in request.session.items:
        spec = getattr(item, "callspec", None)
        if item.module is request.module and spec is not None and "name" in spec.params:
            names.append(spec.params["name"])
    server = TestServer().start_in_thread()  # replies with an instance of the asked schema
    env = {**os.environ, "SOCIETY_EXAMPLE_SMALL": "1"}

    def run(name: str) -> tuple[subprocess.CompletedProcess, Path]:
        tmp = tmp_path_factory.mktemp(name.removesuffix(".py"))
        argv = [a.format(tmp=tmp, api_base=server.url + "/v1") for a in CASES[name][0]]
        res = subprocess.run(
            [sys.executable, *argv], capture_output=True, text=True, cwd=tmp, env=env, timeout=600
        )
        return res, tmp

    pool = ThreadPoolExecutor(max_workers=2)
    futures: dict[str, Future] = {n: pool.submit(run, n) for n in names if n in PRESENT}
    yield futures
    pool.shutdown(wait=True, cancel_futures=True)
    server.stop()


@pytest.mark.parametrize("name", sorted(CASES))
def test_example_runs_small(name, runs):
    if name not in PRESENT:
        pytest.skip(f"examples/{name} is not there")
    res, tmp = runs[name].result()
    assert res.returncode == 0, res.stderr[-3000:]
    assert CASES[name][1] in res.stdout, res.stdout[-3000:]
    if "--out" in CASES[name][0]:
        summary = json.loads((tmp / "run" / "summary.json").read_text())
        assert summary["status"] == "completed"
        assert len(summary["metrics"]["gini"]["values"]) == 2
        if name == "boltzmann_study.py":  # the LLM agents were asked, and answered
            assert summary["llm"]["requests"] > 0 and summary["llm"]["failures"] == 0


def _commands(group, prefix: tuple[str, ...] = ()):
    for name, cmd in group.commands.items():
        if hasattr(cmd, "commands"):  # a group (typer's own click)
            yield from _commands(cmd, (*prefix, name))
        else:
            yield (*prefix, name)


COMMANDS = sorted(_commands(typer.main.get_command(app)))


def test_cli_has_the_documented_commands():
    assert {("list",), ("describe",), ("run",), ("replay",), ("report",), ("llm", "serve")} <= set(
        COMMANDS
    )


@pytest.mark.parametrize("command", COMMANDS, ids=" ".join)
def test_every_command_help_shows_an_example(command):
    res = typer.testing.CliRunner().invoke(app, [*command, "--help"])
    assert res.exit_code == 0, res.output
    assert "Example" in res.output, f"society {' '.join(command)} --help shows no example"
