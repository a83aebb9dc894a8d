"""API keys are read only from the environment and never written anywhere: not in the run
directory (summary.json, metrics parts, the LLM cache, artifact stores, plots), not on stdout
or stderr, not in logs, even when the server refuses the key and quotes it back (FaultPlan
kind "400-key"; a 401 stops the run at once, see test_run_lifecycle), against a real test
server on 127.0.0.1.
"""

from __future__ import annotations

import asyncio
import json
import logging
import sqlite3
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from pydantic import BaseModel, ConfigDict, Field

import scenarios
from sim_core.experiment import RunContext, Scenario
from society.llm import LLMClient, LLMConfig, Request
from society.llm.session import open_client, record_usage
from society.llm.testserver import FaultPlan, TestServer

KEY = "sk-test-FAKE-0123456789abcdef"
NEEDLES = (KEY, "FAKE-0123456789abcdef", "0123456789abcdef")  # the key and its distinctive parts


def _texts_of(path: Path) -> list[tuple[str, bytes]]:
    """The raw bytes of a file and, for formats that may compress or page their contents
    (Parquet, SQLite), the decoded contents as well."""
    raw = path.read_bytes()
    out = [("raw", raw)]
    if path.suffix == ".parquet":
        out.append(("table", pd.read_parquet(path).to_csv().encode()))
    if raw.startswith(b"SQLite format 3\x00"):
        con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            out.append(("dump", "\n".join(con.iterdump()).encode()))
        finally:
            con.close()
    return out


def assert_key_nowhere(run_dir: Path, *outputs: str) -> list[str]:
    """Scan every file under ``run_dir`` and each captured output for the key; return the
    names of the files scanned."""
    files = sorted(p for p in run_dir.rglob("*") if p.is_file())
    for path in files:
        for how, data in _texts_of(path):
            for needle in NEEDLES:
                assert needle.encode() not in data, (
                    f"{needle!r} in {path.relative_to(run_dir)} ({how})"
                )
    for text in outputs:
        for needle in NEEDLES:
            assert needle not in text, f"{needle!r} in captured output:\n{text}"
    return [str(p.relative_to(run_dir)) for p in files]


@pytest.fixture
def fake_key(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    return KEY


# -- the CLI, in a subprocess that inherits the key ---------------------------------------------
@pytest.mark.plots
def test_a_cli_run_against_a_refusing_server_writes_the_key_nowhere(fake_key, tmp_path):
    # Some calls are refused with 400 quoting back the key the request carried (--api-key-env);
    # the rest are answered. The run is degraded by the refusals; --accept-degraded exits 0.
    plan = FaultPlan(rate=0.3, kinds=("400-key",), seed=1)
    srv = TestServer(reply='{"answer": "x", "note": "y"}', faults=plan).start_in_thread()
    out = tmp_path / "run"
    try:
        res = subprocess.run(
            [sys.executable, "-m", "society.cli", "run", "skill-society", "--set", "agents=llm",
             "--set", "population=4", "--set", "degree=2", "--set", "steps=2", "--set", "eval_every=2",
             "--set", "llm_eval_tasks=1", "--llm", "openai/test-model", "--api-base", srv.url + "/v1",
             "--api-key-env", "OPENAI_API_KEY", "--out", str(out), "--accept-degraded"],
            capture_output=True, text=True,
        )  # fmt: skip
    finally:
        srv.stop()
    assert res.returncode == 0, res.stderr
    assert srv.faults_injected["400-key"] > 0 and set(srv.authorizations) == {f"Bearer {KEY}"}
    summary = json.loads((out / "summary.json").read_text())
    assert summary["llm"]["failure_kinds"].get("http_400", 0) > 0
    assert summary["options"]["api_key_env"] == "OPENAI_API_KEY"  # the name, not the key
    assert "http_400" in res.stderr  # the refusals were reported...
    scanned = assert_key_nowhere(out, res.stdout, res.stderr)  # ...without the key
    for name in ("summary.json", "llm-cache.sqlite", "artifacts-r0.sqlite"):
        assert name in scanned
    assert any(n.startswith("metrics.parquet/part-") for n in scanned)
    assert any(n.startswith("plots/") and n.endswith(".png") for n in scanned)


# -- scenarios.run, with a study whose model server needs the key --------------------------------
# This study asks for OPENAI_API_KEY (open_client's api_key_env), so the server receives the
# key and its 400 quotes it back into the error that reaches the cache, the summary and the
# output.
class _Ask(BaseModel):
    answer: str


class _KeyedConfig(BaseModel):
    """A few LLM agents answer once; their model server needs an API key."""

    model_config = ConfigDict(extra="forbid")
    population: int = Field(6, ge=1)
    fast_path: bool = True


class _Keyed(Scenario):
    name = "keyed"
    Config = _KeyedConfig
    headline = ("answered",)
    labels = {"agent": int, "cohort": str}

    def run(self, cfg: _KeyedConfig, ctx: RunContext) -> dict[str, np.ndarray]:
        return asyncio.run(self._arun(cfg, ctx))

    async def _arun(self, cfg: _KeyedConfig, ctx: RunContext) -> dict[str, np.ndarray]:
        async with open_client(
            ctx.options, run_dir=ctx.run_dir, api_key_env="OPENAI_API_KEY",
            fast_path=cfg.fast_path, max_retries=1, backoff_base_s=0.01,
        ) as client:  # fmt: skip
            answered = 0.0
            for t in (1.0, 2.0):  # two moments, so that every metric gets a plot
                requests = [
                    Request([{"role": "user", "content": f"moment {t:g}, agent {i}: answer"}],
                            schema=_Ask, fallback=_Ask(answer="?"), agent=i, cohort="askers")
                    for i in range(cfg.population)
                ]  # fmt: skip
                out = await client.complete_many(requests)
                answered += sum(c.ok for c in out)
                ctx.recorder.record(t, "answered", answered, replicate=0)
                record_usage(ctx.recorder, client, t, agents_per_replicate=cfg.population)
        return {"answered": np.array([answered])}


@pytest.mark.plots
@pytest.mark.parametrize("path", ["fast", "litellm"])
def test_a_run_whose_server_quotes_the_key_back_writes_it_nowhere(
    path, fake_key, tmp_path, capfd, caplog
):
    caplog.set_level(logging.WARNING)
    srv = TestServer(faults=FaultPlan(script=("400-key",) * 3)).start_in_thread()
    try:
        res = scenarios.run(
            _Keyed, out=tmp_path / "run", llm="openai/test-model", api_base=srv.url + "/v1",
            fast_path=path == "fast", max_fallback_rate=1.0,
        )  # fmt: skip
    finally:
        srv.stop()
    assert set(srv.authorizations) == {f"Bearer {KEY}"}  # the key was sent, from the environment
    assert srv.faults_injected["400-key"] == 3
    s = res.summary
    assert s["status"] == "completed" and s["metrics"]["answered"]["mean"] == 12 - 3
    assert s["llm"]["failure_kinds"] == {"http_400": 3}
    # The server's message quoted the key; the client replaced it before anything kept it.
    assert s["first_failure"].startswith("HTTP 400") and "[api key]" in s["first_failure"]
    captured = capfd.readouterr()
    scanned = assert_key_nowhere(
        res.run_dir, captured.out, captured.err, caplog.text, json.dumps(s),
        res.metrics.to_csv(), repr(res),
    )  # fmt: skip
    assert {"summary.json", "llm-cache.sqlite"} <= set(scanned)
    assert any(n.startswith("metrics.parquet/part-") for n in scanned)
    assert any(n.endswith(".png") for n in scanned)
    # The cache did store the refusals (scrubbed), so the scan looked at the quoted text.
    with sqlite3.connect(res.run_dir / "llm-cache.sqlite") as con:
        dump = "\n".join(con.iterdump())
    assert dump.count("[api key]") == 3


# -- a key longer than the part of a server's message a transport keeps (300 characters) --------
LONG_KEY = "sk-test-FAKE-" + "0123456789abcdef" * 18  # 301 characters, like a JWT used as a key


@pytest.mark.parametrize("path", ["fast", "litellm"])
async def test_a_long_key_cut_short_in_the_quote_is_scrubbed_too(path, tmp_path, monkeypatch):
    monkeypatch.setenv("SOCIETY_LONG_KEY", LONG_KEY)
    async with TestServer(faults=FaultPlan(script=("400-key",))) as srv:
        config = LLMConfig(
            model="openai/test-model", api_base=srv.url + "/v1", api_key_env="SOCIETY_LONG_KEY",
            fast_path=path == "fast", cache_path=tmp_path / "llm-cache.sqlite",
        )  # fmt: skip
        async with LLMClient(config) as client:
            out = await client.complete([{"role": "user", "content": "hi"}], agent=0)
    assert srv.authorizations == [f"Bearer {LONG_KEY}"]
    # The quote was cut inside the key; what was left of it is gone as well.
    assert not out.ok and out.error.startswith("HTTP 400") and out.error.endswith("[api key]")
    assert_key_nowhere(tmp_path, out.error, client.usage.first_error, repr(out))
