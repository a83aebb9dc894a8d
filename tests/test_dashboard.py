"""`society serve`: the live dashboard, end to end against a real run in a subprocess.

A network-game run writes rows (flushed about once a second) and progress.json while the
dashboard serves it; a headless Chromium (Debian's /usr/bin/chromium, driven by Playwright)
must see a chart grow, and a plain SSE client must get rows and progress, then see the run
as ``interrupted`` once its process is killed. No wall-clock bounds: polling with generous
timeouts only.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from sim_core.dashboard import Dashboard, run_info
from sim_core.progress import read_progress

REPO = Path(__file__).resolve().parents[1]
CHROMIUM = Path("/usr/bin/chromium")
SCREENSHOT = REPO / "test-output" / "dashboard.png"
TIMEOUT_S = 180  # generous: shared CPUs; never a bound on speed
CHROMIUM_ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]  # fmt: skip


def _wait(cond, what: str, timeout: float = TIMEOUT_S, every: float = 0.2):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        got = cond()
        if got:
            return got
        time.sleep(every)
    raise AssertionError(f"timed out waiting for {what}")


@pytest.fixture(scope="module")
def live_run(tmp_path_factory):
    """A network-game run in a subprocess, long enough to be watched while it runs (it is
    killed by the last test, or at teardown)."""
    run_dir = tmp_path_factory.mktemp("dash") / "live"
    cmd = [
        sys.executable, "-m", "society.cli", "run", "network-game",
        "--set", "population=2000", "--set", "steps=40000", "--set", "synchronous=true", "--set", "game=snowdrift",
        "--out", str(run_dir),
    ]  # fmt: skip
    env = {**os.environ, "CI": "1", "JAX_PLATFORMS": "cpu"}
    proc = subprocess.Popen(
        cmd, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT
    )
    try:
        _wait(
            lambda: (
                (read_progress(run_dir) or {}).get("pid") == proc.pid or proc.poll() is not None
            ),
            "progress.json",
        )
        assert proc.poll() is None, proc.stdout.read().decode()
        yield proc, run_dir
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait()
        proc.stdout.close()


@pytest.fixture(scope="module")
def dashboard(live_run):
    _, run_dir = live_run
    dash = Dashboard([run_dir], poll_s=0.2)
    url = dash.start()
    yield url
    dash.stop()


@pytest.mark.skipif(
    not CHROMIUM.exists() and not os.environ.get("CI"), reason="no /usr/bin/chromium"
)
def test_browser_sees_chart_grow_while_run_progresses(live_run, dashboard):
    from playwright.sync_api import sync_playwright

    proc, _ = live_run
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            page.goto(dashboard)
            page.wait_for_selector("#status[data-status]", timeout=TIMEOUT_S * 1000)
            assert page.text_content("#title") == "live"
            chart = '.chart[data-metric="cooperator_fraction"]'
            page.wait_for_selector(chart, timeout=TIMEOUT_S * 1000)

            def points() -> int:
                return int(page.get_attribute(chart, "data-points") or 0)

            first = points()
            assert proc.poll() is None, "the run ended before the page saw it running"
            page.wait_for_function(
                f"document.querySelector('{chart}').dataset.points > {first}",
                timeout=TIMEOUT_S * 1000,
            )
            assert points() > first
            assert page.text_content("#status") == "running"
            page.wait_for_function(  # progress.json has caught up with the rows
                r"/^steps [1-9]/.test(document.getElementById('prog').textContent)",
                timeout=TIMEOUT_S * 1000,
            )
            SCREENSHOT.parent.mkdir(exist_ok=True)
            page.screenshot(path=str(SCREENSHOT), full_page=True)
            print(f"dashboard screenshot: {SCREENSHOT}")
        finally:
            browser.close()
    assert SCREENSHOT.stat().st_size > 0


def _read_events(url: str, stop_after) -> list[tuple[str, dict]]:
    """SSE events of ``url`` until ``stop_after(events)`` is true or the stream ends."""
    import aiohttp

    async def main() -> list[tuple[str, dict]]:
        events: list[tuple[str, dict]] = []
        timeout = aiohttp.ClientTimeout(total=TIMEOUT_S)
        # One SSE event holds every row so far on one line (hundreds of KiB once the run has
        # gone far; a browser's EventSource takes any length): no line limit of aiohttp's.
        session = aiohttp.ClientSession(timeout=timeout, read_bufsize=2**24)
        async with session, session.get(url) as resp:
            assert resp.status == 200
            assert resp.headers["Content-Type"].startswith("text/event-stream")
            name = None
            async for raw in resp.content:
                line = raw.decode().rstrip("\n")
                if line.startswith("event: "):
                    name = line[7:]
                elif line.startswith("data: ") and name:
                    events.append((name, json.loads(line[6:])))
                    name = None
                    if stop_after(events):
                        break
        return events

    return asyncio.run(main())


def test_sse_streams_rows_and_progress_then_interrupted(live_run, dashboard):
    proc, run_dir = live_run
    url = dashboard + "api/runs/live/events"

    def seen(events, kind):
        return [d for n, d in events if n == kind]

    events = _read_events(
        url, lambda ev: seen(ev, "rows") and seen(ev, "progress") and seen(ev, "status")
    )
    rows = seen(events, "rows")[0]["metrics"]["cooperator_fraction"]
    assert rows and all(len(p) == 2 for p in rows)
    progress = seen(events, "progress")[-1]
    assert (
        progress["pid"] == proc.pid and progress["total"] == 40000 and progress["unit"] == "steps"
    )
    assert seen(events, "status")[0]["status"] == "running"

    proc.send_signal(signal.SIGKILL)  # dies while "running": the dashboard must say so
    proc.wait()
    events = _read_events(url, lambda ev: bool(seen(ev, "end")))
    assert seen(events, "end") == [{"status": "interrupted"}]
    assert seen(events, "status")[-1]["status"] == "interrupted"
    assert json.loads((run_dir / "summary.json").read_text())["status"] == "running"


def test_run_info_of_finished_and_dead_runs(tmp_path):
    done = tmp_path / "done"
    (done / "plots").mkdir(parents=True)
    for name in ("network_niches.png", "artifact_lineage.png", "reach.png"):
        (done / "plots" / name).write_bytes(b"\x89PNG")
    summary = {"scenario": "skill-society", "seed": 1, "config": {}, "status": "completed",
               "metrics": {"reach": {"mean": 0.5}}}  # fmt: skip
    (done / "summary.json").write_text(json.dumps(summary))
    info = run_info("done", done)
    assert info["status"] == "completed" and info["headline"] == {"reach": 0.5}
    assert info["network"] == ["network_niches.png"] and info["lineage"] == ["artifact_lineage.png"]

    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    gone = tmp_path / "gone"
    gone.mkdir()
    (gone / "summary.json").write_text(json.dumps({**summary, "status": "running", "metrics": {}}))
    progress = {"pid": dead.pid, "host": socket.gethostname(), "status": "running"}
    (gone / "progress.json").write_text(json.dumps(progress))
    assert run_info("gone", gone)["status"] == "interrupted"
    progress["pid"] = os.getpid()
    (gone / "progress.json").write_text(json.dumps(progress))
    assert run_info("gone", gone)["status"] == "running"


def test_progress_channel_of_run_scenario(tmp_path):
    """run_scenario publishes progress.json and in-process snapshots (the `society run` bar
    listens to the same ones); the last carries the final status."""
    import pydantic

    from sim_core.experiment import Scenario, run_scenario
    from sim_core.progress import console_progress, listening

    class Tiny(Scenario):
        name = "tiny"

        class Config(pydantic.BaseModel):
            steps: int = 5

        def run(self, cfg, ctx):
            for t in range(1, cfg.steps + 1):
                ctx.recorder.record(float(t), "x", float(t))
            return {"x": [float(cfg.steps)]}

    snaps: list[dict] = []
    with listening(snaps.append), console_progress(enabled=True):
        run_scenario(Tiny, out=tmp_path / "run")
    assert (
        snaps[0]["status"] == "running" and snaps[0]["total"] == 5 and snaps[0]["unit"] == "steps"
    )
    assert snaps[-1]["status"] == "completed" and snaps[-1]["done"] == 5 and snaps[-1]["rows"] == 5
    assert read_progress(tmp_path / "run") == snaps[-1]
    assert run_info("run", tmp_path / "run")["status"] == "completed"


def test_recorder_flushes_on_a_time_interval(tmp_path):
    from sim_core.recorder import Recorder

    rec = Recorder(tmp_path / "m", flush_interval_s=0.0)
    rec.record(1.0, "x", [1.0, 2.0])
    rec.record(3.0, "x", 3.0)
    assert len(list((tmp_path / "m").glob("part-*.parquet"))) == 2  # no close needed
    assert rec.latest_time == 3.0 and rec.rows_recorded == 3
    slow = Recorder(tmp_path / "n", flush_interval_s=None)
    slow.record(1.0, "x", 1.0)
    assert not list((tmp_path / "n").glob("part-*.parquet")) and slow.rows_recorded == 1
