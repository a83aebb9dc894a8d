"""Exact replay: a finished LLM run reruns from its run directory with no server, no network
and no API key, and gives identical metrics (society replay DIR)."""

from __future__ import annotations

import json
import subprocess
import sys

import pandas as pd
import pytest
from conftest import skill_society_scripted

import scenarios
from sim_core.recorder import read_metrics
from society.llm.testserver import TestServer

RUN = dict(
    seed=3, llm="openai/test-model", agents="mixed", split="learned:6,llm:2", population=8,
    degree=2, steps=6, eval_every=3, sharing="broadcast", llm_eval_tasks=2,
)  # fmt: skip


def _cli(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "society.cli", *args], capture_output=True, text=True, env=env
    )


def _logical(frame: pd.DataFrame) -> pd.DataFrame:
    """The rows a replay must reproduce (all of them: I/O counters are not recorded)."""
    return frame.sort_values(list(frame.columns)).reset_index(drop=True)


@pytest.fixture(scope="module")
def finished(tmp_path_factory):
    out = tmp_path_factory.mktemp("replay") / "run"
    srv = TestServer(reply=skill_society_scripted, latency=0.01).start_in_thread()
    try:
        res = scenarios.run("skill-society", out=out, api_base=srv.url + "/v1", **RUN)
    finally:
        srv.stop()  # the server is gone before any replay
    assert res.summary["status"] == "completed"
    return out


def test_replay_from_the_run_directory_gives_identical_metrics(finished, tmp_path):
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}  # no key, no proxy, no server
    done = _cli("replay", str(finished), "--out", str(tmp_path / "again"), env=env)
    assert done.returncode == 0, done.stderr
    original = _logical(read_metrics(finished))
    replayed = _logical(read_metrics(tmp_path / "again"))
    pd.testing.assert_frame_equal(original, replayed)
    a = json.loads((finished / "summary.json").read_text())["metrics"]
    b = json.loads((tmp_path / "again" / "summary.json").read_text())["metrics"]
    assert a == b


def test_replay_with_a_missing_reply_fails_in_one_line(finished, tmp_path):
    summary = json.loads((finished / "summary.json").read_text())
    summary["seed"] += 1  # other tasks: replies the cache does not hold
    other = tmp_path / "edited"
    other.mkdir()
    (other / "summary.json").write_text(json.dumps(summary))
    (other / "llm-cache.sqlite").write_bytes((finished / "llm-cache.sqlite").read_bytes())
    done = _cli("replay", str(other), "--out", str(tmp_path / "again"))
    assert done.returncode == 1
    lines = done.stderr.strip().splitlines()
    assert (
        len(lines) == 1 and lines[0].startswith("error: replay:") and "Traceback" not in done.stderr
    )


def test_replay_of_something_that_is_not_a_run_is_one_line(tmp_path):
    done = _cli("replay", str(tmp_path))
    assert (
        done.returncode == 2
        and done.stderr.startswith("error: ")
        and "no summary.json" in done.stderr
    )
    (tmp_path / "summary.json").write_text("{not json")
    done = _cli("replay", str(tmp_path))
    assert done.returncode == 2 and "not a readable summary" in done.stderr
