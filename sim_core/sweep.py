"""Parameter sweeps: one run directory per grid point, a combined table, resumable, on Ray.

    from sim_core.sweep import run_sweep
    result = run_sweep(MyScenario, {"b": [1.2, 1.5], "population": [100, 400]}, out="sweeps/b",
                       seed=1, replicates=5, workers=4)
    result.table  # one row per point x headline metric

``out`` gets ``points/<name>/`` (a normal run directory per point, ``name`` derived from the
point's values only, so it is stable across reruns), ``sweep.json`` (what was asked) and
``sweep.parquet`` / ``sweep.csv`` (the point's parameters as columns, then metric, mean,
ci95_low, ci95_high, replicates, status). Every point runs with the same seed (common random
numbers: differences between points are the parameters', not the streams').

Rerunning with the same arguments skips points whose ``summary.json`` says completed,
stopped or degraded, and reruns the others (a half-written or failed point's directory is
removed first). With ``workers`` > 1 the points run on a local Ray (``num_cpus=workers``), one
actor per worker pinned to a core of its own; with a cluster address, as Ray tasks placed by
the cluster; with one worker and no address, here, in order, without Ray. Ray is imported
only when it is used.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
import shutil
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pydantic

from sim_core.errors import ConfigError
from sim_core.experiment import (
    MAX_REPLICATES,
    MAX_SEED,
    Scenario,
    one_line,
    run_scenario,
    validate_config,
)
from sim_core.ray_runtime import check_reachable, start_ray

FINISHED = ("completed", "stopped", "degraded")
"""Statuses of a point that a rerun keeps."""
MAX_POINTS = 100_000  # a full grid larger than this must be sampled with ``random``
SPEC_FILE = "sweep.json"
TABLE_COLUMNS = ("point", "metric", "mean", "ci95_low", "ci95_high", "replicates", "status")

Runner = Callable[..., Any]
"""``runner(scenario, *, seed, replicates, out, config) -> RunResult`` (picklable for Ray)."""


@dataclass
class SweepResult:
    """The combined table and what this call did with each point (by point name)."""

    table: pd.DataFrame
    out: Path
    ran: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)


def grid_size(grid: Mapping[str, Sequence[Any]]) -> int:
    return math.prod(len(v) for v in grid.values())


def grid_points(
    grid: Mapping[str, Sequence[Any]], random: int | None = None, seed: int = 0
) -> list[dict[str, Any]]:
    """Every combination of the grid's values (first key slowest), or ``random`` of them drawn
    without replacement with ``seed`` (kept in grid order)."""
    if not grid:
        raise ConfigError("a sweep needs at least one --grid KEY=V1,V2,...")
    keys = list(grid)
    for key in keys:
        if len(grid[key]) == 0:
            raise ConfigError(f"--grid '{key}' has no values")
    total = grid_size(grid)
    if random is not None:
        if isinstance(random, bool) or not isinstance(random, int) or not 1 <= random <= total:
            raise ConfigError(
                f"invalid value for '--random': must be an integer in [1, {total}] (the grid's size) (got {random!r})"
            )
        index = np.sort(np.random.default_rng(seed).choice(total, size=random, replace=False))
    else:
        if total > MAX_POINTS:
            raise ConfigError(
                f"the grid has {total} points (more than {MAX_POINTS}); sample some with --random N"
            )
        index = np.arange(total)
    sizes = [len(grid[k]) for k in keys]
    points = []
    for i in index.tolist():
        point = {}
        for key, size in zip(
            reversed(keys), reversed(sizes), strict=True
        ):  # mixed radix, last key fastest
            i, j = divmod(i, size)
            point[key] = grid[key][j]
        points.append({k: point[k] for k in keys})
    return points


def point_name(point: Mapping[str, Any]) -> str:
    """A directory name from the point's values alone: readable part plus a short hash."""
    text = json.dumps(dict(point), sort_keys=True, default=str)
    digest = hashlib.sha1(text.encode()).hexdigest()[:8]
    readable = "_".join(f"{k}={v}" for k, v in point.items())
    readable = re.sub(r"[^A-Za-z0-9._=+-]+", "-", readable)[:80].strip("-.") or "point"
    return f"{readable}-{digest}"


def _scenario_ref(scenario: Any) -> str:
    if isinstance(scenario, str):
        return scenario
    cls = scenario if isinstance(scenario, type) else type(scenario)
    return f"{cls.__module__}:{cls.__qualname__}"


def _default_runner(
    scenario: Any, *, seed: int, replicates: int, out: str, config: dict[str, Any]
) -> Any:
    return run_scenario(scenario, seed=seed, replicates=replicates, out=out, config=config)


def _run_point(
    runner: Runner, scenario: Any, seed: int, replicates: int, out: str, config: dict[str, Any]
) -> dict[str, Any]:
    """One point (in this process or a Ray worker): its status, metrics and wall time.
    A failure is returned, not raised, so that the other points go on."""
    started = time.perf_counter()
    try:
        result = runner(scenario, seed=seed, replicates=replicates, out=out, config=config)
        summary = result.summary
        return {
            "status": summary["status"],
            "metrics": summary["metrics"],
            "wall_s": time.perf_counter() - started,
        }
    except Exception as exc:  # the point's own failure: recorded, the sweep goes on
        return {
            "status": "failed",
            "metrics": {},
            "error": one_line(f"{type(exc).__name__}: {exc}", 500),
            "wall_s": time.perf_counter() - started,
        }


class _PointWorker:
    """A local Ray actor that runs points one after another on one core. XLA spreads one
    run over every core it sees; two workers that both do so contend (measured: 8 points on
    2 cores take 0.63 of one worker's time unpinned, 0.55 pinned)."""

    def __init__(self, core: int | None):
        if core is not None:
            os.sched_setaffinity(0, {core})

    def run(self, *args: Any) -> dict[str, Any]:
        return _run_point(*args)


def _cores(workers: int) -> list[int | None]:
    """A distinct core for each local worker, or None (no pinning) where there are fewer
    cores than workers or the OS cannot pin."""
    if not hasattr(os, "sched_getaffinity"):
        return [None] * workers
    cores = sorted(os.sched_getaffinity(0))
    return cores[:workers] if len(cores) >= workers else [None] * workers


def _read_summary(run_dir: Path) -> dict[str, Any] | None:
    try:
        return json.loads((run_dir / "summary.json").read_text())
    except (OSError, ValueError):
        return None


def _prepare_out(out: Path, spec: dict[str, Any]) -> None:
    if out.exists() and not out.is_dir():
        raise ConfigError(f"output directory '{out}' is a file; choose a new --out")
    spec_path = out / SPEC_FILE
    if spec_path.exists():
        try:
            old = json.loads(spec_path.read_text())
        except (OSError, ValueError):
            old = None
        if old != spec:
            raise ConfigError(
                f"'{out}' holds a sweep with other arguments (see its {SPEC_FILE}); rerun with the "
                "same arguments to resume it, or choose a new --out"
            )
        return
    if out.exists() and any(out.iterdir()):
        raise ConfigError(
            f"output directory '{out}' exists, is not empty and holds no sweep; choose a new --out"
        )
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ConfigError(f"output directory '{out}' cannot be made ({exc.strerror})") from None
    spec_path.write_text(json.dumps(spec, indent=2) + "\n")


def run_sweep(
    scenario: Any,
    grid: Mapping[str, Sequence[Any]],
    *,
    out: str | Path,
    base: Mapping[str, Any] | None = None,
    seed: int = 0,
    replicates: int = 1,
    random: int | None = None,
    workers: int = 1,
    ray_address: str | None = None,
    runner: Runner | None = None,
    config_class: type[pydantic.BaseModel] | None = None,
    progress: Callable[[str], None] | None = None,
) -> SweepResult:
    """Run ``scenario`` at each point of ``grid`` (``{key: [values]}``) on top of ``base``.

    ``scenario`` is a Scenario (class) or whatever ``runner`` accepts (``scenarios.sweep``
    passes a registry name and ``scenarios.run``); ``config_class`` defaults to the
    scenario's ``Config``. Every point's config is validated before anything runs, so an
    unknown key or a bad value is a :class:`ConfigError` naming it.
    """
    base = dict(base or {})
    grid = {str(k): list(v) for k, v in grid.items()}
    if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed <= MAX_SEED:
        raise ConfigError(
            f"invalid value for 'seed': must be an integer in [0, {MAX_SEED}] (got {seed!r})"
        )
    if (
        isinstance(replicates, bool)
        or not isinstance(replicates, int)
        or not 1 <= replicates <= MAX_REPLICATES
    ):
        raise ConfigError(
            f"invalid value for 'replicates': must be an integer in [1, {MAX_REPLICATES}] (got {replicates!r})"
        )
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise ConfigError(f"invalid value for 'workers': must be an integer >= 1 (got {workers!r})")
    both = sorted(set(grid) & set(base))
    if both:
        raise ConfigError(f"'{both[0]}' is given both by --grid and by --set; give it once")
    if config_class is None:
        if not (
            isinstance(scenario, Scenario)
            or (isinstance(scenario, type) and issubclass(scenario, Scenario))
        ):
            raise ConfigError("run_sweep needs config_class when scenario is not a Scenario")
        config_class = scenario.Config
    points = grid_points(grid, random, seed)
    configs = []
    for point in points:
        try:
            configs.append(validate_config(config_class, {**base, **point}).model_dump(mode="json"))
        except ConfigError as exc:
            where = ", ".join(f"{k}={v!r}" for k, v in point.items())
            raise ConfigError(f"{exc} (at grid point {where})") from None
    out = Path(out)
    spec = json.loads(json.dumps({
        "scenario": _scenario_ref(scenario), "grid": grid, "base": base, "seed": seed,
        "replicates": replicates, "random": random,
    }, default=str))  # fmt: skip
    if ray_address:
        check_reachable(ray_address)
    _prepare_out(out, spec)
    say = progress or (lambda _msg: None)
    runner = runner or _default_runner
    names = [point_name(p) for p in points]
    if len(set(names)) != len(names):
        raise ConfigError("two grid points have the same values; give each value once per --grid")
    result = SweepResult(table=pd.DataFrame(), out=out)
    todo = []
    for name, config in zip(names, configs, strict=True):
        run_dir = out / "points" / name
        summary = _read_summary(run_dir)
        if summary is not None and summary.get("status") in FINISHED:
            result.skipped.append(name)
            continue
        if run_dir.exists():
            shutil.rmtree(run_dir)  # half-written or failed: start the point again
        todo.append((name, config, str(run_dir.resolve())))
    if result.skipped:
        say(f"{len(result.skipped)} of {len(points)} point(s) already finished: skipped")
    outcomes: dict[str, dict[str, Any]] = {}

    def done(name: str, outcome: dict[str, Any]) -> None:
        outcomes[name] = outcome
        extra = f": {outcome['error']}" if outcome.get("error") else ""
        say(
            f"[{len(outcomes)}/{len(todo)}] {name}: {outcome['status']} ({outcome['wall_s']:.1f} s){extra}"
        )

    if todo and workers == 1 and not ray_address:
        for name, config, run_dir in todo:
            done(name, _run_point(runner, scenario, seed, replicates, run_dir, config))
    elif todo:
        ray, started = start_ray(workers, ray_address)
        try:
            queue = list(todo)
            pending: dict[Any, tuple[str, Any]] = {}  # object ref -> (point, its actor)
            task = ray.remote(num_cpus=1)(_run_point)

            def submit(actor: Any = None) -> None:
                name, config, run_dir = queue.pop(0)
                call = actor.run.remote if actor is not None else task.remote
                pending[call(runner, scenario, seed, replicates, run_dir, config)] = (name, actor)

            if ray_address:  # a cluster: one task per point, placed by Ray
                while queue:
                    submit()
            else:  # here: one actor per worker, each on a core of its own, fed a point at a time
                actors = [
                    ray.remote(num_cpus=1)(_PointWorker).remote(core) for core in _cores(workers)
                ]
                for actor in actors[: len(queue)]:
                    submit(actor)
            while pending:
                ready, _ = ray.wait(list(pending), num_returns=1)
                for ref in ready:
                    name, actor = pending.pop(ref)
                    try:
                        outcome = ray.get(ref)
                    except Exception as exc:  # the worker died (out of memory, a lost node)
                        outcome = {
                            "status": "failed",
                            "metrics": {},
                            "error": one_line(f"{type(exc).__name__}: {exc}", 500),
                            "wall_s": 0.0,
                        }
                    done(name, outcome)
                    if actor is not None and queue:
                        submit(actor)
        finally:
            if started:
                ray.shutdown()
    result.ran = [name for name, _, _ in todo]
    result.failed = [name for name in result.ran if outcomes[name]["status"] not in FINISHED]
    result.table = _table(out, points, names, outcomes)
    _write_table(result.table, out)
    return result


def _table(
    out: Path, points: list[dict[str, Any]], names: list[str], outcomes: dict[str, dict[str, Any]]
) -> pd.DataFrame:
    rows = []
    for point, name in zip(points, names, strict=True):
        summary = _read_summary(out / "points" / name) or {}
        outcome = outcomes.get(name, {})
        status = summary.get("status") or outcome.get("status", "missing")
        metrics = summary.get("metrics") or outcome.get("metrics") or {}
        nan = float("nan")
        if not metrics:
            rows.append({**point, "point": name, "metric": None, "mean": nan, "ci95_low": nan,
                         "ci95_high": nan, "replicates": 0, "status": status})  # fmt: skip
        for metric, m in metrics.items():
            lo, hi = m.get("ci95") or [None, None]
            rows.append({
                **point, "point": name, "metric": metric,
                "mean": nan if m.get("mean") is None else float(m["mean"]),
                "ci95_low": nan if lo is None else float(lo), "ci95_high": nan if hi is None else float(hi),
                "replicates": len(m.get("values", [])), "status": status,
            })  # fmt: skip
    keys = list(points[0]) if points else []
    frame = pd.DataFrame(rows, columns=[*keys, *TABLE_COLUMNS])
    for key in keys:  # a column mixing kinds of values (1.5 and "single") is kept as text
        kinds = {type(v) for v in frame[key]}
        if len(kinds) > 1 and not kinds <= {int, float}:
            frame[key] = frame[key].map(str)
    return frame


def _write_table(table: pd.DataFrame, out: Path) -> None:
    tmp = out / ".sweep.parquet.tmp"
    table.to_parquet(tmp, index=False)
    tmp.replace(out / "sweep.parquet")
    table.to_csv(out / "sweep.csv", index=False)
