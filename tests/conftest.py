"""Helpers shared by several test files, which import them as ``from conftest import ...``
(pytest puts tests/ on sys.path to load this file): runs killed after a checkpoint and
resumed, and the test server's scripted replies for each scenario's LLM agents. No test
file imports another test file."""

from __future__ import annotations

import ast
import io
import json
import os
import re
import signal
import subprocess
import sys
import time
import tokenize
from collections.abc import Callable
from pathlib import Path

# -- compile options: set before jax starts (subprocesses inherit them) ---------------------------
# XLA's CPU compiler is most of this suite's time (61% of worker time, by jax.monitoring's
# compile events), and tests compile many small programs that run briefly. Its older fusion
# code generation at LLVM -O1 compiles them ~2x faster. Float results may differ in the last
# bits, as on a CPU of another vector width (learning runs of many steps amplify that; their
# tolerances allow for it); the pins are the same under both:
# test_headline_pins.py::test_jaxs_default_compile_options_give_the_same_pins. A user's own
# XLA_FLAGS come after these, so theirs win.
TEST_XLA_FLAGS = "--xla_cpu_use_fusion_emitters=false --xla_backend_optimization_level=1"
os.environ["XLA_FLAGS"] = f"{TEST_XLA_FLAGS} {os.environ.get('XLA_FLAGS', '')}".strip()
# -- one core per xdist worker, before jax starts its thread pool: a small world's kernels run
# inline on one core (docs/scaling.md), and two workers' pools do not contend for both cores
# (the suite: 469 s against 497 s; six files twice each: 107 s and 111 s against 109 s and 114 s)
_worker = os.environ.get("PYTEST_XDIST_WORKER", "")
_cores = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []  # not macOS
if _worker and 0 < int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "0")) <= len(_cores):
    os.sched_setaffinity(0, {_cores[int(_worker.removeprefix("gw")) % len(_cores)]})

import jax
import numpy as np
import pandas as pd
import pytest

import scenarios
from scenarios.skill_society.prompts import DISTIL_SYSTEM
from scenarios.skill_society.tasks import apply_rule, describe_rule, infer_rule, parse_rule
from sim_core.checkpoint import CheckpointError, Checkpoints, read
from sim_core.recorder import read_metrics

# -- plots only where a test checks them ----------------------------------------------------------
# A run's plots cost ~0.1 s a figure (a fifth of the resume tests' time); runs in tests write
# none (subprocesses inherit this), but every study's plots are drawn by the resume tests'
# reference runs and the tests marked ``plots``.
os.environ.setdefault("SOCIETY_PLOTS", "0")


@pytest.fixture(autouse=True)
def _plots_if_marked(request, monkeypatch):
    if request.node.get_closest_marker("plots"):
        monkeypatch.setenv("SOCIETY_PLOTS", "1")


# -- compiled code freed between test files ----------------------------------------------------
@pytest.fixture(autouse=True, scope="module")
def _free_compiled_code():
    """After each test file, drop every compiled XLA executable. Each holds a few memory maps,
    and a worker that ran half the suite held ~50,000 of Linux's 65,530 (vm.max_map_count):
    the next compile segfaulted and took the xdist worker down."""
    yield
    jax.clear_caches()


# -- runs killed after a checkpoint and resumed ----------------------------------------------------
SOCIETY = str(Path(sys.executable).with_name("society"))
SEED = 3


def start(
    out: Path, scenario: str, config: dict, *extra: str, checkpoint_every: int = 1
) -> subprocess.Popen:
    args = [
        SOCIETY,
        "run",
        scenario,
        "--seed",
        str(SEED),
        "--checkpoint-every",
        str(checkpoint_every),
        "--out",
        str(out),
        *extra,
    ]
    for k, v in config.items():
        args += ["--set", f"{k}={str(v).lower()}"]
    return subprocess.Popen(
        args,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "CI": "1"},
    )


def wait_for_checkpoint(
    proc: subprocess.Popen, out: Path, ready: Callable[[dict], bool] | None = None
) -> None:
    """Until a checkpoint exists (and ``ready(checkpoint)`` holds), the run still going."""
    deadline = time.monotonic() + 600  # start-up on a loaded 2-core machine; not a speed bound
    while True:
        assert proc.poll() is None, (
            f"the run ended before the checkpoint awaited: {proc.communicate()}"
        )
        assert time.monotonic() < deadline, "no checkpoint appeared"
        if (out / "checkpoint.npz").exists():
            if ready is None:
                return
            try:
                if ready(read(out / "checkpoint.npz")):
                    return
            except (CheckpointError, TypeError):  # a checkpoint between batches holds no world
                pass
        time.sleep(0.01)


def kill_after_checkpoint(
    out: Path,
    scenario: str,
    config: dict,
    *extra: str,
    ready=None,
    wait: float = 0.0,
    checkpoint_every: int = 1,
) -> None:
    """Start ``society run`` (a checkpoint every ``checkpoint_every`` moments), SIGKILL it once
    a checkpoint exists (and ``ready`` holds; then ``wait`` seconds more), and check it was
    still running."""
    proc = start(out, scenario, config, *extra, checkpoint_every=checkpoint_every)
    wait_for_checkpoint(proc, out, ready)
    time.sleep(wait)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert json.loads((out / "summary.json").read_text())["status"] == "running", (
        "finished before the kill"
    )


class Killed(Exception):
    pass


def killed_in_process(
    monkeypatch: pytest.MonkeyPatch, scenario: str, moment: int, out: Path, config: dict, **kw
) -> None:
    """Run with a checkpoint every moment and die at the end of the moment after ``moment``,
    before its checkpoint: that moment's rows (and transcript lines) are written, then lost."""
    save = Checkpoints.save

    def die_after(self, batch, sim, world):
        if sim is not None and self.saved == moment:
            raise Killed
        save(self, batch, sim, world)

    with monkeypatch.context() as m:
        m.setattr(Checkpoints, "save", die_after)
        with pytest.raises(Killed):
            scenarios.run(scenario, seed=SEED, out=out, checkpoint_every=1, config=config, **kw)


def same_rows(run_dir: Path, reference: pd.DataFrame) -> None:
    got = read_metrics(run_dir)
    pd.testing.assert_frame_equal(
        got.reset_index(drop=True), reference.reset_index(drop=True), check_dtype=False
    )


def same_run(result, reference, out: Path) -> None:
    """A resumed run completed from its checkpoint with the reference's headline values
    (exactly, NaN where it has NaN) and rows."""
    assert (
        result.summary["status"] == "completed" and result.summary["resumed"] == "from a checkpoint"
    )
    for k, v in reference.summary["metrics"].items():
        np.testing.assert_array_equal(
            result.summary["metrics"][k]["values"], v["values"], err_msg=k
        )
    same_rows(out, reference.metrics)


# -- the test server's replies, scenario by scenario -----------------------------------------------
TEST_LLM = "openai/test-model"  # the model name runs against society.llm.testserver ask for


# commons: LLM fishers
def commons_schema_props(body: dict) -> dict:
    fmt = body.get("response_format") or {}
    schema = (fmt.get("json_schema") or {}).get("schema") or fmt.get("schema") or {}
    return schema.get("properties", {})


def commons_user_text(body: dict) -> str:
    return body["messages"][-1]["content"]


# donor-game: LLM donors
def donor_game_schema_of(body: dict) -> dict:
    fmt = body.get("response_format") or {}
    return (fmt.get("json_schema") or {}).get("schema") or fmt.get("schema") or {}


def donor_game_is_strategy_request(body: dict) -> bool:
    return "strategy" in donor_game_schema_of(body).get("properties", {})


def donor_game_user_text(body: dict) -> str:
    return body["messages"][-1]["content"]


def donor_game_held_in_prompt(body: dict) -> float:
    return float(
        re.search(r"You currently have ([0-9.]+) units", donor_game_user_text(body)).group(1)
    )


def donor_game_half_reply(body: dict) -> str:
    if donor_game_is_strategy_request(body):
        name = re.search(r"Your name is (\S+)\.", donor_game_user_text(body)).group(1)
        return json.dumps(
            {"reasoning": "r", "strategy": f"My strategy will be to give half, says {name}."}
        )
    return json.dumps({"reasoning": "half", "amount": donor_game_held_in_prompt(body) / 2})


# market: LLM firms
def market_user_text(body: dict) -> str:
    """The firm's prompt (a repair request appends messages after it)."""
    return body["messages"][1]["content"]


def market_cost_in(body: dict) -> float:
    return float(re.search(r"Your cost is ([0-9.]+) per unit", market_user_text(body)).group(1))


# public-goods: LLM contributors and punishers
def public_goods_reply(body: dict) -> str:
    """Give everything in round 1 and nothing after when punishment is on (else always give
    everything); 2 punishment points to each member below the group mean. With a sanction
    stage the number's field is 'amount', else 'contribution'."""
    user = body["messages"][-1]["content"]
    if "after the contributions" in user:
        return json.dumps({"reason": "r", "amount": 2})
    punishing = "punish" in body["messages"][0]["content"]
    give = 20 if (not punishing or "Round 1 of" in user) else 0
    return json.dumps({"reason": "r", "amount" if punishing else "contribution": give})


# skill-society: LLM solvers
def skill_society_scripted(body: dict) -> str:
    """A solver that answers correctly only when a quoted artifact states the task's rule,
    and writes notes that state the rule it infers from the examples and the feedback."""
    system, user = body["messages"][0]["content"], body["messages"][-1]["content"]
    domain = re.search(r"Task domain: (\w+)\.", user).group(1)
    examples = tuple(tuple(m) for m in re.findall(r"^  (.+?) -> (.+)$", user, re.M))
    if system.startswith(DISTIL_SYSTEM[:30]):
        query = re.search(r"What is the output for: (.+)", user).group(1)
        expected = re.search(r"expected output was:\n(.+)$", user, re.M)
        answered = re.search(r"You answered: '(.*)'\. That", user).group(1)
        solved = examples + ((query, expected.group(1) if expected else answered),)
        p = infer_rule(domain, solved)
        return json.dumps(
            {"note": describe_rule(domain, p) if p else f"{domain}: no rule fits {query!r} yet"}
        )
    quoted = "\n".join(line[2:] for line in user.splitlines() if line.startswith("| "))
    query = re.search(r"What is the output for: (.+)", user).group(1)
    for d, p in parse_rule(quoted):
        if d == domain and all(apply_rule(d, p, x) == y for x, y in examples):
            return json.dumps({"answer": apply_rule(d, p, query)})
    return json.dumps(
        {"answer": query}
    )  # a guess that differs per task (one reply to all is degenerate)


def lines_of_code(*paths: str) -> int:
    """Lines with code (paths from the repository root): no blanks, comments or docstrings."""
    total = 0
    for path in paths:
        text = (Path(__file__).resolve().parents[1] / path).read_text()
        docs = {
            n for node in ast.walk(ast.parse(text)) if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)
            and isinstance(node.value.value, str) for n in range(node.lineno, node.end_lineno + 1)
        }  # fmt: skip
        skip = {
            tokenize.COMMENT,
            tokenize.NL,
            tokenize.NEWLINE,
            tokenize.INDENT,
            tokenize.DEDENT,
            tokenize.ENDMARKER,
        }
        toks = tokenize.generate_tokens(io.StringIO(text).readline)
        total += len({t.start[0] for t in toks if t.type not in skip} - docs)
    return total
