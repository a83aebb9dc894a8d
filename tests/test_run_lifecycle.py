"""Runs that never lie, part two: the run lifecycle seen from the CLI.

Replay never goes online, resume restores every run option, a kill in the finishing phase
leaves a resumable checkpoint or a finished summary, API keys come from a named variable and
a refused key stops the run at once, sizes are checked before anything runs, and errors are
one line. Two tiny studies keep it cheap: ``_Asker`` (LLM agents through the run's client,
against the real TestServer on 127.0.0.1) and ``_Counter`` (a checkpointing scheduler).
"""

from __future__ import annotations

import asyncio
import json
import shutil
import sqlite3

import numpy as np
import pandas as pd
import pytest
from pydantic import BaseModel, ConfigDict, Field

import scenarios
from sim_core import experiment
from sim_core.checkpoint import Checkpoints
from sim_core.errors import ConfigError, RunError
from sim_core.experiment import RunContext, Scenario
from sim_core.progress import Progress, plain_line, plain_progress
from sim_core.recorder import read_metrics
from sim_core.scheduler import Scheduler
from sim_core.stats import summarize
from society.cli import main
from society.llm import Request
from society.llm.session import open_client
from society.llm.testserver import FaultPlan, TestServer, parse_args

KEY = "sk-lifecycle-SECRET-0123456789"
REPLY = '{"give": 3}'


class _Ask(BaseModel):  # a number: never judged a degenerate reply (society.llm.degenerate)
    give: int = Field(ge=0, le=10)


class _AskConfig(BaseModel):
    """A few LLM agents answer for a few moments."""

    model_config = ConfigDict(extra="forbid")
    population: int = Field(3, ge=1)
    steps: int = Field(2, ge=1)


class _Asker(Scenario):
    name = "asker"
    Config = _AskConfig
    headline = ("answered",)

    def run(self, cfg: _AskConfig, ctx: RunContext) -> dict[str, np.ndarray]:
        return asyncio.run(self._arun(cfg, ctx))

    async def _arun(self, cfg: _AskConfig, ctx: RunContext) -> dict[str, np.ndarray]:
        answered = 0.0
        async with open_client(
            ctx.options, run_dir=ctx.run_dir, max_retries=2, backoff_base_s=0.0
        ) as client:
            for t in range(1, cfg.steps + 1):
                requests = [
                    Request([{"role": "user", "content": f"moment {t}, agent {i}"}], schema=_Ask,
                            fallback=_Ask(give=0), agent=i, cohort="askers")
                    for i in range(cfg.population)
                ]  # fmt: skip
                answered += sum(c.ok for c in await client.complete_many(requests))
                ctx.recorder.record(float(t), "answered", answered, replicate=0)
        return {"answered": np.array([answered])}


class _CountConfig(BaseModel):
    """One counter ticks once a moment."""

    model_config = ConfigDict(extra="forbid")
    steps: int = Field(5, ge=1)


class _Counter(Scenario):
    name = "counter"
    Config = _CountConfig
    headline = ("total",)
    checkpointing = True

    def run(self, cfg: _CountConfig, ctx: RunContext) -> dict[str, np.ndarray]:
        done = ctx.checkpoints.finished(0)
        if done is None:
            sim, state = Scheduler(), {"n": 0}

            def tick() -> None:
                state["n"] += 1
                ctx.recorder.record(float(state["n"]), "count", float(state["n"]), replicate=0)
                if state["n"] >= cfg.steps:
                    sim.stop("steps")

            sim.handle("tick", tick)
            saved = ctx.checkpoints.resume(0, sim)
            if saved is not None:
                state.update(saved)
            else:
                sim.every(1.0, tick, name="tick")
            ctx.checkpoints.attach(0, sim, lambda: dict(state))
            sim.run()
            done = float(state["n"])
            ctx.checkpoints.finish(0, done)
        return {"total": np.array([done])}


class _Killed(BaseException):
    """Stands for SIGKILL at one instant: nothing after it runs (not even except-clauses
    that catch Exception)."""


def _die(*args: object) -> None:
    raise _Killed


@pytest.fixture
def server():
    srv = TestServer(reply=REPLY).start_in_thread()
    yield srv
    srv.stop()


def _one_line_error(capsys) -> str:
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and err.startswith("error: ") and "Traceback" not in err, err
    return err


# -- 1. replay never goes online ---------------------------------------------------------------
def test_replay_without_its_cache_fails_in_one_line_before_any_request(server, tmp_path, capsys):
    run = tmp_path / "run"
    res = scenarios.run(_Asker, out=run, llm="openai/test-model", api_base=server.url + "/v1")
    assert res.summary["status"] == "completed" and server.requests == 6
    copy = tmp_path / "copy"
    shutil.copytree(run, copy)
    for cache in copy.glob("llm-cache.sqlite*"):
        cache.unlink()
    with pytest.raises(SystemExit) as exit_:
        main(["replay", str(copy), "--out", str(tmp_path / "again")])
    assert exit_.value.code == 2
    err = _one_line_error(capsys)
    assert "LLM cache" in err and "is missing" in err
    assert server.requests == 6 and not (tmp_path / "again").exists()
    # With the cache, the replay answers from it alone: the server sees nothing more.
    assert main(["replay", str(run), "--out", str(tmp_path / "again")]) == 0
    assert server.requests == 6


def test_replay_through_the_api_with_a_missing_cache_never_calls(server, tmp_path):
    with pytest.raises(ConfigError, match="LLM cache .* is missing"):
        scenarios.run(
            _Asker, write=False, llm="openai/test-model", replay=tmp_path / "nothing.sqlite"
        )
    assert server.requests == 0


# -- 2 and 4. every run option is recorded (a key's variable NAME, never a key) and restored -----
def test_resume_restores_every_run_option_and_starts_clean_without_a_checkpoint(
    tmp_path, capsys, monkeypatch
):
    monkeypatch.setenv("LIFECYCLE_KEY", KEY)
    srv = TestServer(reply=REPLY, api_key=KEY).start_in_thread()
    try:
        run = tmp_path / "run"
        args = ["run", "tests.test_run_lifecycle:_Asker", "--llm", "openai/test-model", "--api-base",
                srv.url + "/v1", "--api-key-env", "LIFECYCLE_KEY", "--concurrency", "2",
                "--checkpoint-every", "7", "--out", str(run)]  # fmt: skip
        assert main(args) == 0
        assert set(srv.authorizations) == {f"Bearer {KEY}"}  # the key went to --api-base
        summary = json.loads((run / "summary.json").read_text())
        assert summary["options"] == {
            "llm": "openai/test-model", "api_base": srv.url + "/v1", "api_key_env": "LIFECYCLE_KEY",
            "concurrency": 2, "checkpoint_every": 7,
        }  # fmt: skip
        # As if killed before it finished, with stale per-run state beside it.
        summary["status"] = "running"
        (run / "summary.json").write_text(json.dumps(summary))
        (run / "artifacts-r0.sqlite").write_bytes(b"stale store")
        for cache in run.glob("llm-cache.sqlite*"):  # (kept on a resume: replies are asked again)
            cache.unlink()
        capsys.readouterr()
        assert main(["resume", str(run)]) == 0  # no option given again
        assert "no checkpoint" in capsys.readouterr().err
        assert srv.requests == 12 and set(srv.authorizations) == {f"Bearer {KEY}"}
    finally:
        srv.stop()
    after = json.loads((run / "summary.json").read_text())
    assert after["status"] == "completed" and after["options"] == summary["options"]
    assert after["resumed"] == "from the start (no checkpoint)"
    assert not (run / "artifacts-r0.sqlite").exists()  # a fresh start: clean stores
    assert len(read_metrics(run)) == 2  # the rows of one run, not two
    for path in run.rglob("*"):
        if path.is_file():
            assert KEY.encode() not in path.read_bytes(), path
    with sqlite3.connect(run / "llm-cache.sqlite") as con:
        assert KEY not in "\n".join(con.iterdump())


def test_a_rejected_key_stops_the_run_at_once_in_one_line(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("LIFECYCLE_KEY", "sk-wrong-0123456789")
    srv = TestServer(reply=REPLY, api_key=KEY).start_in_thread()
    try:
        with pytest.raises(SystemExit) as exit_:
            main(["run", "tests.test_run_lifecycle:_Asker", "--set", "population=1", "--llm", "openai/test-model",
                  "--api-base", srv.url + "/v1", "--api-key-env", "LIFECYCLE_KEY", "--out", str(tmp_path / "run")])  # fmt: skip
        assert exit_.value.code == 1
        err = _one_line_error(capsys)
        assert (
            "HTTP 401 (authentication)" in err and "$LIFECYCLE_KEY" in err and "http_500" not in err
        )
        assert srv.requests == 1  # not retried, and no other agent's call was sent after it
        assert "sk-wrong" not in err
    finally:
        srv.stop()


def test_a_missing_key_variable_is_one_line_before_anything_runs(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("LIFECYCLE_KEY", raising=False)
    args = ["run", "tests.test_run_lifecycle:_Asker", "--llm", "openai/x", "--api-base",
            "http://127.0.0.1:9/v1", "--out", str(tmp_path / "run")]  # fmt: skip
    with pytest.raises(SystemExit) as exit_:
        main([*args, "--api-key-env", "LIFECYCLE_KEY"])
    assert exit_.value.code == 2 and "LIFECYCLE_KEY is not set" in _one_line_error(capsys)
    with pytest.raises(SystemExit):
        main([*args, "--api-key-env", KEY.replace("-", "+")])  # a key pasted in place of a name
    err = _one_line_error(capsys)
    assert "NAME of an environment variable" in err and "SECRET" not in err
    assert not (tmp_path / "run").exists()


# -- 3. the finishing phase ------------------------------------------------------------------------
@pytest.mark.plots  # killed while plotting
def test_a_kill_while_finishing_leaves_a_checkpoint_or_a_finished_summary(tmp_path, monkeypatch):
    reference = scenarios.run(_Counter, write=False, checkpoint_every=1)
    out = tmp_path / "run"
    with monkeypatch.context() as m:  # killed while plotting: the summary was not final yet
        m.setattr(_Counter, "plot", _die)
        with pytest.raises(_Killed):
            scenarios.run(_Counter, out=out, checkpoint_every=1)
    assert json.loads((out / "summary.json").read_text())["status"] == "running"
    assert (out / "checkpoint.npz").exists()  # ...so the checkpoint is still there
    resumed = scenarios.run(_Counter, resume=out, checkpoint_every=1)
    assert (
        resumed.summary["status"] == "completed"
        and resumed.summary["resumed"] == "from a checkpoint"
    )
    assert resumed.summary["metrics"] == reference.summary["metrics"]
    pd.testing.assert_frame_equal(read_metrics(out), reference.metrics, check_dtype=False)

    out2 = tmp_path / "run2"
    with monkeypatch.context() as m:  # killed as the checkpoint goes: the summary is final
        m.setattr(Checkpoints, "remove", _die)
        with pytest.raises(_Killed):
            scenarios.run(_Counter, out=out2, checkpoint_every=1)
    final = json.loads((out2 / "summary.json").read_text())
    assert final["status"] == "completed" and final["metrics"]["total"]["mean"] == 5
    with pytest.raises(ConfigError, match="already completed"):
        scenarios.run(_Counter, resume=out2)


# -- 5. sizes ------------------------------------------------------------------------------------
def test_sizes_are_bounded_and_memory_is_checked_before_anything_runs(tmp_path, monkeypatch):
    for population in (2_000_000_000, 10**12):
        with pytest.raises(
            ConfigError, match=r"'population': must be at most 1,000,000,000 agents"
        ):
            scenarios.run("network-game", out=tmp_path / "a", population=population)
    monkeypatch.setattr(experiment, "machine_memory", lambda: 2**30)  # a 1 GiB machine
    with pytest.raises(ConfigError) as err:
        scenarios.run("network-game", out=tmp_path / "a", population=10_000_000, replicates=2)
    message = str(err.value)
    assert "population=10000000 with 2 replicate(s) at once needs about 3.73 GiB" in message
    assert "this machine's 1 GiB" in message and "\n" not in message
    assert not (tmp_path / "a").exists()


# -- 8. a run that fails before its first row does not block the same command -------------------
class _Fragile(_Counter):
    name = "fragile"
    broken = True

    def run(self, cfg, ctx):
        if type(self).broken:
            raise ConfigError("invalid value for 'graph': line 3 of edges.txt is not 'u v'")
        return super().run(cfg, ctx)


def test_a_run_that_failed_before_its_first_row_can_run_again_in_its_directory(
    tmp_path, monkeypatch
):
    out = tmp_path / "run"
    with pytest.raises(ConfigError, match="line 3"):
        scenarios.run(_Fragile, out=out)
    assert json.loads((out / "summary.json").read_text())["status"] == "failed"
    monkeypatch.setattr(_Fragile, "broken", False)  # the user fixed the edge-list file
    assert scenarios.run(_Fragile, out=out).summary["status"] == "completed"
    with pytest.raises(ConfigError, match="exists and is not empty"):  # a finished run stays
        scenarios.run(_Fragile, out=out)


# -- 9. a study that returns the wrong values --------------------------------------------------------
class _Wrong(_Counter):
    name = "wrong"
    headline = ("total", "declared_never_returned")

    def run(self, cfg, ctx):
        out = {"total": np.full(ctx.replicates, super().run(cfg, ctx)["total"][0])}
        return {**out, "extra": np.zeros(3)} if ctx.replicates == 2 else out


def test_wrong_headline_values_are_one_line_and_a_missing_one_is_reported(tmp_path, capsys):
    with pytest.raises(RunError, match=r"returned 3 values of 'extra' for 2 replicate\(s\)"):
        scenarios.run(_Wrong, out=tmp_path / "a", replicates=2)
    summary = json.loads((tmp_path / "a" / "summary.json").read_text())
    assert summary["status"] == "failed" and "3 values of 'extra'" in summary["error"]
    assert main(["run", "tests.test_run_lifecycle:_Wrong", "--out", str(tmp_path / "b")]) == 0
    assert json.loads((tmp_path / "b" / "summary.json").read_text())["missing_headline"] == [
        "declared_never_returned"
    ]
    assert "headline metric 'declared_never_returned' was declared" in capsys.readouterr().err


# -- 6. report into a directory that does not exist yet ----------------------------------------------
def test_report_makes_the_directory_of_its_out_file(tmp_path, capsys):
    scenarios.run(_Counter, out=tmp_path / "run")
    target = tmp_path / "missing" / "dir" / "r.html"
    assert main(["report", str(tmp_path / "run"), "--out", str(target)]) == 0
    assert target.read_text().startswith("<!doctype html>")
    (tmp_path / "file").write_text("")
    with pytest.raises(SystemExit):
        main(["report", str(tmp_path / "run"), "--out", str(tmp_path / "file" / "r.html")])
    assert "--out" in _one_line_error(capsys)


# -- 10. intervals of bounded metrics stay in their bounds ---------------------------------------------
def test_intervals_of_fractions_stay_in_zero_one():
    wide = summarize([0.1, 0.9])
    assert wide["ci95"][0] < 0 and wide["ci95"][1] > 1  # t with 1 degree of freedom: 12.7
    assert summarize([0.1, 0.9], bounds=(0.0, 1.0))["ci95"] == [0.0, 1.0]
    assert summarize([0.5], bounds=(0.0, 1.0))["ci95"] == [0.5, 0.5]

    class Fractions(_Counter):
        name = "fractions"
        bounds = {"score": (0.0, 0.95)}

        def run(self, cfg, ctx):
            return {"cooperator_fraction": np.array([0.1, 0.9]), "growth_rate": np.array([-1.0, 3.0]),
                    "score": np.array([0.1, 0.9])}  # fmt: skip

    m = scenarios.run(Fractions, write=False, replicates=2).summary["metrics"]
    assert m["cooperator_fraction"]["ci95"] == [0.0, 1.0]  # named a fraction: [0, 1]
    assert m["growth_rate"]["ci95"][0] < -1  # a "rate" outside [0, 1] is no fraction
    assert m["score"]["ci95"] == [0.0, 0.95]  # declared by the study


# -- 7. donor-game's progress counts generations -------------------------------------------------------
def test_donor_game_progress_counts_generations():
    from scenarios.donor_game.model import DonorGame

    cfg = DonorGame.Config(generations=10, steps=12)
    assert DonorGame().horizon(cfg) == (10.0, "generations")


# -- 12. plain progress lines when output is not a terminal --------------------------------------------
def test_plain_progress_lines_name_moments_rate_and_eta():
    lines: list[str] = []

    class Stream:
        def write(self, text: str) -> None:
            lines.extend(t for t in text.splitlines() if t)

        def flush(self) -> None:
            pass

    prog = Progress(None, scenario="demo", total=100, unit="steps")
    with plain_progress(every_s=0.0, stream=Stream()):
        prog.started -= 10  # ten seconds in
        prog.advance(25)
        prog.publish()
        prog.status = "completed"
        prog.publish()  # the final snapshot is the summary's business, not a progress line
    assert len(lines) == 1
    assert lines[0].startswith("progress: demo 25/100 steps (25%) · 2.5 steps/s")
    assert "ETA 30 s" in lines[0]
    assert plain_line({"done": 3, "unit": "moments"}).startswith("progress: run 3 moments")


# -- 11. the test server's faults, and retries counted in the run's LLM usage --------------------------
def test_test_server_faults_are_chosen_from_its_command_line(monkeypatch):
    monkeypatch.setenv("SERVER_KEY", KEY)
    args, plan, key = parse_args(["--fault-rate", "0.5", "--fault-kinds", "timeout,403", "--hang-s", "2",
                                  "--fault-delay", "0.5", "--api-key-env", "SERVER_KEY"])  # fmt: skip
    assert plan == FaultPlan(rate=0.5, kinds=("timeout", "403"), hang_s=2.0, delay_s=0.5)
    assert key == KEY
    with pytest.raises(SystemExit):
        parse_args(["--fault-kinds", "teapot"])


def test_retries_are_counted_in_the_summary(tmp_path):
    srv = TestServer(reply=REPLY, faults=FaultPlan(script=("500", "429"))).start_in_thread()
    try:
        res = scenarios.run(
            _Asker, out=tmp_path / "run", llm="openai/test-model", api_base=srv.url + "/v1"
        )
    finally:
        srv.stop()
    llm = res.summary["llm"]
    assert llm["retries"] == 2 and llm["failures"] == 0 and srv.requests == 8


class Sigterm(Scenario):
    """A study that is sent SIGTERM before it keeps any checkpoint."""

    name, Config, headline, checkpointing = "sigterm", _CountConfig, ("x",), True

    def run(self, cfg, ctx):
        import signal

        signal.raise_signal(signal.SIGTERM)
        return {"x": np.zeros(ctx.replicates)}


def test_sigterm_before_the_first_checkpoint_is_one_line_exit_130_and_a_stopped_run(
    tmp_path, capsys
):
    """Once 1 run in 9 died with exit 143, no output and summary.json left `running`."""
    out = tmp_path / "run"
    try:
        code = main(["run", f"{__file__}:Sigterm", "--out", str(out)])
    except SystemExit as exc:
        code = exc.code
    assert code == 130
    said = capsys.readouterr()
    text = said.out + said.err
    assert "Traceback" not in text and "interrupted before its first checkpoint" in text, text
    summary = json.loads((out / "summary.json").read_text())
    assert summary["status"] == "stopped" and summary["interrupted"] is True
