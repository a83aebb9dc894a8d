"""The live channel of a running run: ``progress.json`` and in-process listeners.

While :func:`sim_core.experiment.run_scenario` runs, a :class:`Progress` publishes a small
snapshot about once a second: the process id and host (so a reader can tell a dead run
from a running one), the latest simulated moment, the rows recorded so far, ``done`` of
``total`` moments with an ETA, and named extra sections (the LLM session adds calls in
flight and done, tokens and cost). It is written atomically (temporary file, rename), so a
reader never sees half a file and a kill leaves the last complete snapshot. The same
snapshot goes to in-process listeners (``society run``'s progress bar): one source for
the dashboard and the terminal.
"""

from __future__ import annotations

import json
import os
import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

PROGRESS_FILE = "progress.json"
INTERVAL_S = 1.0
PLAIN_EVERY_S = 30.0
"""Seconds between plain progress lines when output is not a terminal (a log, CI, nohup)."""

_listeners: list[Callable[[dict[str, Any]], None]] = []


@contextmanager
def listening(fn: Callable[[dict[str, Any]], None]) -> Iterator[None]:
    """Call ``fn(snapshot)`` on every publication of every run started meanwhile (from the
    publishing thread, so ``fn`` must be quick and thread-safe)."""
    _listeners.append(fn)
    try:
        yield
    finally:
        _listeners.remove(fn)


class Progress:
    """One run's live progress; :meth:`start` begins publishing, :meth:`stop` ends it."""

    def __init__(
        self,
        run_dir: Path | None,
        *,
        scenario: str = "",
        total: float | None = None,
        unit: str = "moments",
        interval_s: float = INTERVAL_S,
    ):
        self.run_dir = Path(run_dir) if run_dir is not None else None
        self.scenario = scenario
        self.total = float(total) if total is not None else None
        self.unit = unit
        self.interval_s = float(interval_s)
        self.status = "running"
        self.done: float | None = None  # set by advance(); else the recorder's latest time
        self.rows: Callable[[], int] = lambda: 0
        self.latest_time: Callable[[], float | None] = lambda: None
        self.sources: dict[str, Callable[[], dict[str, Any]]] = {}
        self.started = time.time()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def advance(self, done: float, total: float | None = None) -> None:
        """Report ``done`` moments (of ``total``, when it changes) explicitly."""
        self.done = float(done)
        if total is not None:
            self.total = float(total)

    def add_source(self, name: str, fn: Callable[[], dict[str, Any]]) -> None:
        """A section of the snapshot, e.g. ``llm``: ``fn()`` is read at each publication."""
        self.sources[name] = fn

    def snapshot(self) -> dict[str, Any]:
        now = time.time()
        done = self.done if self.done is not None else self.latest_time()
        snap: dict[str, Any] = {
            "scenario": self.scenario,
            "status": self.status,
            "pid": os.getpid(),
            "host": socket.gethostname(),
            "started_at": self.started,
            "updated_at": now,
            "elapsed_s": round(now - self.started, 3),
            "time": done,
            "done": done,
            "total": self.total,
            "unit": self.unit,
            "rows": int(self.rows()),
            "eta_s": None,
        }
        if done and self.total and 0 < done < self.total and self.status == "running":
            snap["eta_s"] = round((now - self.started) * (self.total - done) / done, 1)
        for name, fn in list(self.sources.items()):
            try:
                snap[name] = fn()
            except Exception as exc:  # a section must never stop the run
                snap[name] = {"error": f"{type(exc).__name__}: {exc}"}
        return snap

    def publish(self) -> dict[str, Any]:
        with self._lock:
            snap = self.snapshot()
            if self.run_dir is not None:
                try:
                    write_json_atomic(self.run_dir / PROGRESS_FILE, snap)
                except (OSError, ValueError):  # a full disk, a removed directory: run on
                    pass
            for fn in list(_listeners):
                try:
                    fn(snap)
                except Exception:  # a broken display must not stop the run
                    pass
            return snap

    def _loop(self) -> None:
        while not self._stop.wait(self.interval_s):
            self.publish()

    def start(self) -> Progress:
        if self.run_dir is None and not _listeners:
            return self  # nobody to tell
        self.publish()
        self._thread = threading.Thread(target=self._loop, name="sim-core-progress", daemon=True)
        self._thread.start()
        return self

    def stop(self, status: str) -> None:
        """Stop publishing; the last snapshot carries the final ``status``."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        self.status = status
        if self._thread is not None:
            self.publish()


def write_json_atomic(path: Path, data: Any) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(data, allow_nan=False, default=str) + "\n")
    os.replace(tmp, path)


def read_progress(run_dir: str | Path) -> dict[str, Any] | None:
    """A run's last snapshot, or None when it has none (yet)."""
    try:
        data = json.loads((Path(run_dir) / PROGRESS_FILE).read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def process_alive(progress: dict[str, Any] | None) -> bool | None:
    """Whether the process that publishes ``progress`` still runs: True/False, or None when
    that cannot be told (no snapshot, or another host)."""
    if not progress or not isinstance(progress.get("pid"), int):
        return None
    if progress.get("host") != socket.gethostname():
        return None
    try:
        os.kill(progress["pid"], 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # exists, owned by someone else
        return True
    return True


def live_status(summary_status: str | None, progress: dict[str, Any] | None) -> str:
    """The status to show: ``interrupted`` for a run that says ``running`` but whose
    process is gone."""
    status = summary_status or (progress or {}).get("status") or "unknown"
    if status == "running" and process_alive(progress) is False:
        return "interrupted"
    return status


def describe(snap: dict[str, Any]) -> str:
    """One line about a snapshot: rows, elapsed, ETA and the LLM section when present."""
    parts = [f"rows {snap.get('rows', 0):,}", f"elapsed {_dur(snap.get('elapsed_s'))}"]
    if snap.get("eta_s") is not None:
        parts.append(f"ETA {_dur(snap['eta_s'])}")
    llm = snap.get("llm")
    if isinstance(llm, dict) and "requests" in llm:
        parts.append(
            f"LLM {llm.get('in_flight', 0)} in flight, {llm['requests']:,} done, "
            f"{llm.get('tokens', 0):,} tokens, ${llm.get('cost_usd', 0.0):.4f}"
        )
    return " · ".join(parts)


def _dur(s: float | None) -> str:
    if s is None:
        return "-"
    return f"{s:.0f} s" if s < 90 else f"{s / 60:.1f} min" if s < 5400 else f"{s / 3600:.1f} h"


def plain_line(snap: dict[str, Any]) -> str:
    """A progress line for a log: moments done of the total, rate, ETA, and :func:`describe`."""
    done, total, unit = snap.get("done") or 0, snap.get("total"), snap.get("unit", "moments")
    elapsed = snap.get("elapsed_s") or 0
    parts = [
        f"{done:g}/{total:g} {unit} ({100 * done / total:.0f}%)" if total else f"{done:g} {unit}"
    ]
    if elapsed > 0:
        parts.append(f"{done / elapsed:.3g} {unit}/s")
    return f"progress: {snap.get('scenario') or 'run'} " + " · ".join([*parts, describe(snap)])


@contextmanager
def plain_progress(every_s: float = PLAIN_EVERY_S, stream: Any = None) -> Iterator[None]:
    """One plain line (:func:`plain_line`) every ``every_s`` seconds of a run started inside,
    for output that is not a terminal: a batch job's log shows that the run is alive."""
    import sys

    last = [time.monotonic()]
    lock = threading.Lock()

    def show(snap: dict[str, Any]) -> None:
        now = time.monotonic()
        with lock:
            if snap.get("status") != "running" or now - last[0] < every_s:
                return
            last[0] = now
        print(plain_line(snap), file=stream or sys.stdout, flush=True)

    with listening(show):
        yield


@contextmanager
def console_progress(enabled: bool | None = None) -> Iterator[None]:
    """A rich progress bar of the runs started inside (``society run``): moments done of the
    total, LLM calls in flight and done, tokens, cost, ETA. By default only when stdout is a
    terminal and the environment variable CI is unset; otherwise plain lines at a steady
    interval (:func:`plain_progress`)."""
    import sys

    if enabled is None:
        enabled = sys.stdout.isatty() and not os.environ.get("CI")
    if not enabled:
        with plain_progress():
            yield
        return
    from rich.progress import BarColumn, TextColumn
    from rich.progress import Progress as Bar

    bar = Bar(
        TextColumn("{task.description}"), BarColumn(), TextColumn("{task.fields[done]}"),
        TextColumn("{task.fields[info]}"), transient=True,
    )  # fmt: skip
    task = bar.add_task("starting", total=None, done="", info="")

    def show(snap: dict[str, Any]) -> None:
        done, total = snap.get("done"), snap.get("total")
        shown = (
            f"{done or 0:g}/{total:g} {snap.get('unit', '')}"
            if total
            else f"{done or 0:g} {snap.get('unit', '')}"
        )
        bar.update(task, description=snap.get("scenario") or "run", completed=done or 0, total=total,
                   done=shown, info=describe(snap))  # fmt: skip

    with bar, listening(show):
        yield
