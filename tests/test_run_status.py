"""Honest outcomes: failed LLM calls are counted by kind, and a run whose LLM agents mostly
fell back says `degraded` in summary.json and exits 3 from the CLI.

Every case runs network-game with 10 LLM agents for a few rounds against a real server on
127.0.0.1 (the scriptable TestServer) or a closed port.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from pathlib import Path

import pytest

import scenarios
from society.cli import EXIT_DEGRADED, main
from society.llm import LLMClient, LLMConfig, Request
from society.llm.client import failure_kind
from society.llm.testserver import FaultPlan, TestServer

# 40 agents, split 2:1:1 -> 10 LLM agents; 3 rounds -> 30 LLM decisions.
GAME = {"population": 40, "steps": 3, "agents": "mixed", "split": "rules:2,learned:1,llm:1"}
SETS = [arg for k, v in GAME.items() for arg in ("--set", f"{k}={v}")]


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _round_one_invalid(body: dict) -> str:
    """Valid actions, except that every reply in round 1 (repairs too) is not JSON: 10 of
    the 30 decisions fall back, one third."""
    if any("Round 1." in str(m.get("content")) for m in body["messages"]):
        return "I would rather not say."
    return '{"cooperate": 0.5}'


@pytest.fixture
def flaky_server():
    srv = TestServer(reply=_round_one_invalid).start_in_thread()
    yield srv
    srv.stop()


def test_all_calls_failing_is_degraded_exits_3_and_quotes_the_cause(tmp_path: Path) -> None:
    port = _closed_port()
    out = tmp_path / "run"
    sets = [*SETS, "--set", "steps=2"]  # each round waits out the client's retries
    res = subprocess.run(
        [sys.executable, "-m", "society.cli", "run", "network-game", *sets,
         "--llm", "openai/x", "--api-base", f"http://127.0.0.1:{port}/v1", "--out", str(out)],
        capture_output=True, text=True,
    )  # fmt: skip
    assert res.returncode == EXIT_DEGRADED == 3, res.stderr
    summary = json.loads((out / "summary.json").read_text())
    assert summary["status"] == "degraded"
    assert summary["fallbacks"] == {"llm": {"decisions": 20, "fallbacks": 20, "rate": 1.0}}
    assert summary["llm"]["failure_kinds"] == {"connection": 20}
    assert summary["first_failure"].startswith("connection error: ClientConnectorError")
    assert f"127.0.0.1:{port}" in summary["first_failure"]
    assert "cohort 'llm': 20 of 20 decisions were fallbacks" in summary["degraded"][0]
    # The summary table says it, and stderr says it with the cause.
    assert "20 of 20 requests failed (connection 20)" in res.stdout
    assert "status: degraded" in res.stdout
    assert "degraded: cohort 'llm': 20 of 20 decisions were fallbacks" in res.stderr
    assert "first failure: connection error: ClientConnectorError" in res.stderr
    assert "Traceback" not in res.stderr


def test_fallbacks_above_the_threshold_degrade_the_run(tmp_path: Path, flaky_server) -> None:
    api_base = flaky_server.url + "/v1"
    res = scenarios.run(
        "network-game", out=tmp_path / "a", llm="openai/x", api_base=api_base, **GAME
    )
    s = res.summary
    assert s["status"] == "degraded" and s["max_fallback_rate"] == 0.1
    assert s["fallbacks"]["llm"] == {"decisions": 30, "fallbacks": 10, "rate": pytest.approx(1 / 3)}
    assert s["llm"]["failure_kinds"] == {"invalid": 10}
    assert s["first_failure"].startswith("invalid reply after one repair")
    written = json.loads((res.run_dir / "summary.json").read_text())
    assert written["status"] == "degraded" and written["degraded"] == s["degraded"]
    # The kinds are metric rows too.
    rows = res.metrics[res.metrics.metric == "llm_failures.invalid"]
    assert rows["value"].tolist() == [10.0]


def test_fallbacks_below_the_threshold_complete(tmp_path: Path, flaky_server) -> None:
    res = scenarios.run(
        "network-game", out=tmp_path / "b", llm="openai/x", api_base=flaky_server.url + "/v1",
        max_fallback_rate=0.5, **GAME,
    )  # fmt: skip
    s = res.summary
    assert s["status"] == "completed" and "degraded" not in s
    assert s["fallbacks"]["llm"]["fallbacks"] == 10 and s["llm"]["failures"] == 10


def test_the_cli_reports_partial_failures_and_can_accept_degradation(
    tmp_path: Path, flaky_server, capsys
) -> None:
    args = [
        "run",
        "network-game",
        *SETS,
        "--llm",
        "openai/x",
        "--api-base",
        flaky_server.url + "/v1",
    ]
    assert main([*args, "--out", str(tmp_path / "c"), "--accept-degraded"]) == 0
    out, err = capsys.readouterr()
    assert "10 of 30 requests failed (invalid 10)" in out and "status: degraded" in out
    assert "warning: 10 of 30 LLM requests failed (invalid 10)" in err
    assert (
        "degraded: cohort 'llm': 10 of 30 decisions were fallbacks (33% > max_fallback_rate 0.1)"
        in err
    )
    assert "first failure: invalid reply after one repair" in err
    assert json.loads((tmp_path / "c" / "summary.json").read_text())["status"] == "degraded"
    assert main([*args, "--out", str(tmp_path / "d"), "--max-fallback-rate", "0.4"]) == 0
    out, err = capsys.readouterr()
    assert "status: completed" in out and "warning: 10 of 30 LLM requests failed" in err
    assert "degraded:" not in err


def test_a_clean_run_completes_with_exit_0(tmp_path: Path, capsys) -> None:
    srv = TestServer(reply='{"cooperate": 1.0}').start_in_thread()
    try:
        code = main(["run", "network-game", *SETS, "--llm", "openai/x",
                     "--api-base", srv.url + "/v1", "--out", str(tmp_path / "run")])  # fmt: skip
    finally:
        srv.stop()
    out, err = capsys.readouterr()
    assert code == 0 and "status: completed" in out
    assert "warning" not in err and "degraded" not in err
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["status"] == "completed" and "first_failure" not in summary
    assert summary["fallbacks"] == {"llm": {"decisions": 30, "fallbacks": 0, "rate": 0.0}}
    assert summary["llm"]["requests"] == 30 and summary["llm"]["failure_kinds"] == {}


def test_a_bad_threshold_is_one_line_with_status_2() -> None:
    with pytest.raises(SystemExit) as exc:
        main(["run", "network-game", "--max-fallback-rate", "1.5", "--set", "population=16"])
    assert exc.value.code == 2


async def test_failures_are_counted_by_kind() -> None:
    plan = FaultPlan(script=("400", "429", "malformed", None))
    async with TestServer(reply="fine", faults=plan) as srv:
        cfg = LLMConfig(model="openai/test-model", api_base=srv.url + "/v1", max_retries=0)
        async with LLMClient(cfg) as client:
            msgs = [[{"role": "user", "content": f"question {i}"}] for i in range(4)]
            done = await client.complete_many(
                [Request(m, fallback={"say": "nothing"}, cohort="c") for m in msgs]
            )
    usage = client.usage
    assert sum(not c.ok for c in done) == 3
    assert usage.failure_kinds == {"http_400": 1, "http_429": 1, "malformed": 1}
    assert usage.first_error in {c.error for c in done if not c.ok}
    totals = {r["metric"]: r["value"] for r in usage.rows() if len(r) == 2}
    assert totals["llm_failures.http_429"] == 1 and totals["llm_failures"] == 3


@pytest.mark.parametrize(
    "error,kind",
    [
        ("connection error: ClientConnectorError: Cannot connect to host", "connection"),
        ("timeout after 60 s (after 4 attempts)", "timeout"),
        ("HTTP 503: overloaded (after 4 attempts)", "http_503"),
        ("repair failed: HTTP 400: bad request", "http_400"),
        ("invalid reply after one repair: cooperate: Input should be a valid number", "invalid"),
        ("malformed reply body from the server", "malformed"),
        ("empty reply from the model", "empty"),
        ("BadRequestError: something", "other"),
    ],
)
def test_failure_kinds_are_read_from_the_kept_message(error: str, kind: str) -> None:
    assert failure_kind(error) == kind
