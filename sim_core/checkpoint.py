"""Checkpoints of a running scenario, and resuming from them.

A checkpoint is one file, ``checkpoint.npz`` in the run directory, replaced atomically:
a JSON document (the scheduler's queue as data, the world state's structure, the
recorder's position, the outputs of finished replicate batches) and the world state's
arrays beside it. No pickle: resuming a directory never executes code read from it.

A scenario takes part in three calls (see ``society/study.py``'s ``_fused_batch``)::

    done = ctx.checkpoints.finished(batch)        # outputs of a batch finished earlier
    saved = ctx.checkpoints.resume(batch, sim)    # world state (and sim's queue) or None
    ctx.checkpoints.attach(batch, sim, lambda: state)  # save every K moments and on a stop
    ...
    ctx.checkpoints.finish(batch, outputs)

Rows recorded after the last checkpoint are dropped on resume (the recorder is flushed at
every checkpoint), so a resumed run's ``metrics.parquet`` holds the same rows, in the same
order, as an uninterrupted run with the same seed: none lost, none twice.
"""

from __future__ import annotations

import inspect
import io
import json
import os
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from sim_core.errors import ConfigError
from sim_core.recorder import Recorder
from sim_core.scheduler import Scheduler

FILE = "checkpoint.npz"
FORMAT = 2  # 2: a cohort batch holds several replicates (1: one replicate a batch)


class CheckpointError(ConfigError):
    """A checkpoint that cannot be read or does not belong to this run (one line)."""


class Interrupted(Exception):
    """Raised at the end of the moment in which SIGINT/SIGTERM arrived, once the checkpoint
    is saved: the run stops there, and ``society resume`` continues it."""


def _encode(value: Any, arrays: dict[str, np.ndarray]) -> Any:
    """JSON-able form of a pytree of dicts, lists, tuples, arrays and scalars."""
    if isinstance(value, dict):
        return {"__dict__": [[k, _encode(v, arrays)] for k, v in value.items()]}
    if isinstance(value, tuple):
        return {"__tuple__": [_encode(v, arrays) for v in value]}
    if isinstance(value, list):
        return [_encode(v, arrays) for v in value]
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, np.generic):
        return value.item()
    if hasattr(value, "__array__"):  # numpy or jax arrays
        key = f"a{len(arrays)}"
        arrays[key] = np.asarray(value)
        return {"__array__": key}
    raise TypeError(
        f"cannot save a {type(value).__name__} in a checkpoint (arrays, numbers, strings, lists, tuples, dicts)"
    )


def _decode(value: Any, arrays: Any) -> Any:
    if isinstance(value, list):
        return [_decode(v, arrays) for v in value]
    if isinstance(value, dict):
        if "__array__" in value:
            return arrays[value["__array__"]]
        if "__tuple__" in value:
            return tuple(_decode(v, arrays) for v in value["__tuple__"])
        return {k: _decode(v, arrays) for k, v in value["__dict__"]}
    return value


def write(path: Path, doc: dict[str, Any]) -> None:
    """Write ``doc`` (a pytree) to ``path`` atomically: a kill leaves the old file or the new."""
    arrays: dict[str, np.ndarray] = {}
    meta = json.dumps(_encode(doc, arrays), allow_nan=True)
    tmp = path.with_name(f".{path.name}.tmp")
    with open(tmp, "wb") as fh:
        np.savez(fh, __meta__=np.frombuffer(meta.encode(), dtype=np.uint8), **arrays)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


def read(path: Path) -> dict[str, Any]:
    """Read a checkpoint written by :func:`write`, or raise a one-line CheckpointError."""
    try:
        with np.load(path, allow_pickle=False) as npz:
            arrays = {k: npz[k] for k in npz.files}
        doc = _decode(json.loads(arrays.pop("__meta__").tobytes().decode()), arrays)
    except FileNotFoundError:
        raise CheckpointError(
            f"no checkpoint at '{path}': the run kept none (it finished, or stopped before its first)"
        ) from None
    except (
        OSError,
        ValueError,
        KeyError,
        EOFError,
        zipfile.BadZipFile,
        UnicodeDecodeError,
        TypeError,
        io.UnsupportedOperation,
    ) as exc:
        raise CheckpointError(
            f"checkpoint '{path}' is corrupt or not a checkpoint ({type(exc).__name__}: {exc})"
        ) from None
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        got = doc.get("format") if isinstance(doc, dict) else None
        raise CheckpointError(
            f"checkpoint '{path}' has format {got!r}; this version reads format {FORMAT} "
            "(resume with the version that wrote it, or start the run again)"
        )
    return doc


class Checkpoints:
    """A run's checkpointing: every ``every`` moments, at clean stops, and on SIGINT/SIGTERM.

    ``run`` is the identity of the run (scenario, config, seed, replicates...), stored in
    every checkpoint and checked on resume. Without a run directory it does nothing.
    """

    def __init__(
        self,
        run_dir: Path | None,
        recorder: Recorder,
        *,
        every: int = 0,
        run: dict[str, Any] | None = None,
        resumed: dict[str, Any] | None = None,
    ):
        self.path = run_dir / FILE if run_dir is not None else None
        self.recorder = recorder
        self.every = int(every)
        self.run = run or {}
        self.done: dict[int, Any] = dict(resumed["done"]) if resumed else {}
        self.kept: dict[str, Callable[[], Any]] = {}
        self._kept_saved: dict[str, Any] = dict(resumed.get("kept") or {}) if resumed else {}
        self._resumed = resumed
        self.interrupt: str | None = None  # set by a signal handler: checkpoint, then stop
        self.saved = 0
        self.used = False  # a scenario called attach(): it can be resumed from its checkpoints

    def keep(self, name: str, get: Callable[[], Any], put: Callable[[Any], None]) -> None:
        """Save ``get()`` under ``name`` in every checkpoint; when resuming, give the saved
        value to ``put`` now. For state of the whole run, beside the batches' worlds: LLM
        usage and budget, fallback counts."""
        self.kept[name] = get
        if name in self._kept_saved:
            put(self._kept_saved.pop(name))

    # -- batches ------------------------------------------------------------------------
    def finished(self, batch: int) -> Any | None:
        """The outputs a batch finished with before the run was resumed, else None."""
        return self.done.get(batch)

    def resume(self, batch: int, sim: Scheduler) -> Any | None:
        """When resuming inside ``batch``: restore ``sim``'s queue and return the saved world
        state (register ``sim``'s handlers first). Otherwise None: start the batch afresh."""
        r = self._resumed
        if r is None or r.get("batch") != batch or r.get("world") is None:
            return None
        sim.restore(r["scheduler"])
        self._resumed = None
        return r["world"]

    def attach(
        self, batch: int, sim: Scheduler, state: Callable[[], Any], every: int | None = None
    ) -> None:
        """Save ``state()`` and ``sim``'s queue every ``every`` moments (default: the run's),
        and at the end of
        the moment in which a signal asked the run to stop (then raise :class:`Interrupted`).
        ``state`` may be a coroutine function (run by ``sim.arun``): e.g. one that first
        waits for a request in flight, so that its reply is saved as data."""
        self.used = True
        if self.path is None:
            return
        moments, every = 0, self.every if every is None else every

        def stop_if_asked() -> None:
            if self.interrupt is not None:
                raise Interrupted(f"{self.interrupt} at t={sim.now:g}")

        async def save_later(world: Any) -> None:
            self.save(batch, sim, await world)
            stop_if_asked()

        def on_moment() -> Any:
            nonlocal moments
            moments += 1
            # a stop of the scenario's own (a budget) ends the batch: finish() saves then
            due = self.interrupt is not None or (every and moments % every == 0)
            if due and sim.stop_reason is None:
                world = state()
                if inspect.isawaitable(world):
                    return save_later(world)
                self.save(batch, sim, world)
            stop_if_asked()
            return None

        sim.on_moment = on_moment

    def save(self, batch: int, sim: Scheduler | None, world: Any) -> None:
        if self.path is None:
            return
        self.recorder.flush()  # every row up to this moment is on disk, in whole parts
        write(self.path, {
            "format": FORMAT, "run": self.run, "batch": batch, "done": self.done,
            "scheduler": sim.snapshot() if sim is not None else None, "world": world,
            "recorder": {"parts": self.recorder._parts, "rows": self.recorder.rows_written},
            "kept": {name: get() for name, get in self.kept.items()},
        })  # fmt: skip
        self.saved += 1

    def finish(self, batch: int, outputs: Any) -> None:
        """Record a finished batch's outputs (saved, so a resume skips the batch)."""
        self.done[batch] = outputs
        self.save(batch + 1, None, None)

    def remove(self) -> None:
        """Drop the checkpoint of a run that completed (nothing is left to resume)."""
        if self.path is not None and self.path.exists():
            self.path.unlink()


def load_for_resume(run_dir: Path) -> dict[str, Any]:
    """Read a run directory's checkpoint and put its metrics back where it was taken:
    Parquet parts written after it are removed (the resumed run writes them again)."""
    doc = read(run_dir / FILE)
    parts_dir = run_dir / "metrics.parquet"
    keep = int(doc["recorder"]["parts"])
    if parts_dir.is_dir():
        for p in sorted(parts_dir.glob("part-*.parquet")):
            if int(p.stem.split("-")[1]) >= keep:
                p.unlink()
        for p in parts_dir.glob(".tmp-*"):
            p.unlink()
    have = len(list(parts_dir.glob("part-*.parquet"))) if parts_dir.is_dir() else 0
    if have != keep:
        raise CheckpointError(
            f"run directory '{run_dir}' has {have} metric parts but its checkpoint needs {keep}: rows were lost"
        )
    return doc
