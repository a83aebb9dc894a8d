"""Running a scenario: validated config, run directory, recorder, summary and plots.

A scenario is a small class (Mesa's ``Model`` in spirit) with a pydantic ``Config`` and a
``run(config, ctx)`` that records rows through ``ctx.recorder`` and returns its headline
metrics, one value per replicate. :func:`run_scenario` does everything around it, so a
user's own scenario defined in a script runs exactly like a built-in one.
"""

from __future__ import annotations

import datetime as _dt
import functools
import importlib.metadata
import json
import math
import os
import platform
import shutil
import signal
import sys
import threading
import time
import tomllib
from collections.abc import Callable, Mapping
from contextvars import ContextVar
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import pandas as pd
import pydantic

from sim_core.checkpoint import FILE as CHECKPOINT_FILE
from sim_core.checkpoint import Checkpoints, Interrupted, load_for_resume
from sim_core.errors import ConfigError, RunError
from sim_core.progress import Progress
from sim_core.recorder import Recorder
from sim_core.rng import RNG
from sim_core.stats import summarize

DEFAULT_CHECKPOINT_EVERY = 50
"""Moments between checkpoints of a scenario that keeps them (and one at every stop)."""

LIVE_FLUSH_S = 1.0
"""A run with a directory flushes its rows at least this often (seconds of wall time), so
live readers (``society serve``) see them while it runs."""

DEFAULT_MAX_FALLBACK_RATE = 0.1
"""A run is ``degraded`` when more than this share of one cohort's decisions were fallbacks."""

RECORDED_OPTIONS = ("llm", "api_base", "api_key_env", "concurrency", "llm_shards")
"""Run options that shape results, kept in summary.json so `society resume` restores them.
``api_key_env`` is the NAME of the variable holding a key, never the key."""

BYTES_PER_AGENT = 200
"""Coarse memory per agent per replicate held at once (a 1e7-agent network-game peaks near
2 GiB); a scenario whose agents are heavier sets its own ``bytes_per_agent``."""

VERSIONED_PACKAGES = (
    "society-sim",
    "jax",
    "jaxlib",
    "numpy",
    "networkx",
    "mesa",
    "litellm",
    "pydantic",
)


class Scenario:
    """Base class of a study. Subclasses set the class attributes and implement ``run``."""

    name: ClassVar[str] = "scenario"
    Config: ClassVar[type[pydantic.BaseModel]]
    headline: ClassVar[tuple[str, ...]] = ()
    labels: ClassVar[dict[str, type]] = {}
    # True when ``run`` saves checkpoints through ``ctx.checkpoints`` (see sim_core.checkpoint):
    # then SIGINT/SIGTERM stop it cleanly at a moment's end and `society resume` continues it.
    # Other scenarios resume by running again from the start with the same seed.
    checkpointing: ClassVar[bool] = False
    # Bounds of headline metrics (lowest, highest possible): their intervals are clipped to
    # them. Names ending in "fraction" or "_rate" are taken as in [0, 1] unless named here.
    bounds: ClassVar[dict[str, tuple[float, float]]] = {}
    bytes_per_agent: ClassVar[int] = BYTES_PER_AGENT

    @classmethod
    def description(cls) -> str:
        doc = (cls.Config.__doc__ or cls.__doc__ or "").strip()
        return doc.splitlines()[0] if doc else ""

    def run(self, config: Any, ctx: RunContext) -> Mapping[str, np.ndarray]:
        """Simulate all replicates; return ``{headline metric: values, one per replicate}``."""
        raise NotImplementedError

    def horizon(self, config: Any) -> tuple[float, str] | None:
        """The last moment of a run and its unit, for progress and ETA (None: unknown). By
        default ``steps`` x ``generations``, or ``steps`` (the shared vocabulary)."""
        steps, gens = (getattr(config, k, None) for k in ("steps", "generations"))
        if isinstance(steps, int) and isinstance(gens, int):
            return float(steps * gens), "moments"
        if isinstance(steps, int):
            return float(steps), "steps"
        return None

    def memory_estimate(self, config: Any, replicates: int) -> tuple[int, str] | None:
        """Bytes a run needs at once and the parameter that sets them (None: no estimate).
        By default ``bytes_per_agent`` x ``population`` x the replicates held together."""
        population = getattr(config, "population", None)
        if not isinstance(population, int) or isinstance(population, bool):
            return None
        return self.bytes_per_agent * population * replicates, f"population={population}"

    def plot(self, frame: pd.DataFrame, plots_dir: Path, config: Any) -> list[Path]:
        """Write PNGs; by default, each recorded metric's mean over replicates against time."""
        return plot_metrics(frame, plots_dir)


@dataclass
class RunContext:
    """What a scenario's ``run`` gets besides its config."""

    seed: int
    replicates: int
    rng: RNG
    recorder: Recorder
    run_dir: Path | None
    options: dict[str, Any] = field(default_factory=dict)  # e.g. {"llm": ..., "api_base": ...}
    batch_replicates: int | None = None  # replicates per vectorised batch (None: all at once)
    stop_reason: str | None = None  # set by a scenario that stopped early (e.g. a budget)
    max_fallback_rate: float = DEFAULT_MAX_FALLBACK_RATE
    # cohort -> {"decisions", "fallbacks"[, "degenerate", "degenerate_kinds", "example"]}:
    # decisions that should have come from a model call, how many a stand-in answered
    # because the call failed, and how many were valid replies that say nothing (count_fallbacks).
    fallbacks: dict[str, dict[str, int]] = field(default_factory=dict)
    first_failure: str | None = None
    report: dict[str, Any] = field(default_factory=dict)  # extra sections of summary.json
    checkpoints: Any = None  # sim_core.checkpoint.Checkpoints of this run
    progress: Progress | None = None  # the live channel (progress.json, progress listeners)

    def count_fallbacks(
        self,
        cohort: str,
        decisions: int,
        fallbacks: int,
        first_failure: str | None = None,
        *,
        degenerate: Mapping[str, int] | None = None,
        example: str | None = None,
    ) -> None:
        """Add to a cohort's decisions and fallbacks (with the first failure's cause) and its
        degenerate replies by kind (with the first one's text). More than
        ``max_fallback_rate`` of both together in any cohort make the run ``degraded``: its
        numbers describe the stand-in or a copy machine, not the agents."""
        counts = self.fallbacks.setdefault(cohort, {"decisions": 0, "fallbacks": 0})
        counts["decisions"] += int(decisions)
        counts["fallbacks"] += int(fallbacks)
        if self.first_failure is None and first_failure:
            self.first_failure = first_failure
        if degenerate:
            kinds = counts.setdefault("degenerate_kinds", {})
            for kind, n in degenerate.items():
                kinds[kind] = kinds.get(kind, 0) + int(n)
            counts["degenerate"] = counts.get("degenerate", 0) + sum(
                int(n) for n in degenerate.values()
            )
            if example is not None and "example" not in counts:
                counts["example"] = example

    def degradation(self) -> list[str]:
        """One line per cohort whose share of fallbacks and degenerate replies is above
        ``max_fallback_rate``, quoting a degenerate reply when there were some."""
        out = []
        for cohort, c in sorted(self.fallbacks.items()):
            n, k, d = c["decisions"], c["fallbacks"], c.get("degenerate", 0)
            if n > 0 and (k + d) / n > self.max_fallback_rate:
                what = f"{k} of {n} decisions were fallbacks"
                if d:
                    kinds = ", ".join(
                        f"{kind} {m}" for kind, m in sorted(c["degenerate_kinds"].items())
                    )
                    what += (
                        f" and {d} were degenerate replies ({kinds}), e.g. {c.get('example', '')!r}"
                    )
                share = f"{(k + d) / n:.0%} > max_fallback_rate {self.max_fallback_rate:g}"
                out.append(one_line(f"cohort '{cohort}': {what} ({share})"))
        return out

    def replicate_batches(self) -> list[np.ndarray]:
        """Replicate ids split into the batches a scenario should vmap over."""
        size = self.batch_replicates or self.replicates
        return [
            np.arange(i, min(i + size, self.replicates)) for i in range(0, self.replicates, size)
        ]


def _stand_in_rate(counts: Mapping[str, Any]) -> float:
    """A cohort's share of decisions that were fallbacks or degenerate replies."""
    n = counts["decisions"]
    return (counts["fallbacks"] + counts.get("degenerate", 0)) / n if n else 0.0


_current_run: ContextVar[RunContext | None] = ContextVar("sim_core_current_run", default=None)


def current_run() -> RunContext | None:
    """The RunContext of the scenario running now (None outside ``run_scenario``), so that
    machinery a scenario uses (the LLM session) reports fallbacks to the run without every
    scenario passing ``ctx`` along. Visible in the scenario's thread and in the asyncio
    tasks it starts; not in threads it starts itself."""
    return _current_run.get()


@dataclass
class RunResult:
    """The outcome of a run: summary dict, tidy metrics frame and run directory. The frame is
    built when first read (about 1 ms: most of a small run's fixed cost in a sweep)."""

    summary: dict
    frame: Callable[[], pd.DataFrame] = field(repr=False)
    run_dir: Path | None

    @functools.cached_property
    def metrics(self) -> pd.DataFrame:
        return self.frame()

    def headline(self) -> pd.DataFrame:
        """One row per headline metric: mean and 95% interval over replicates."""
        rows = [
            {
                "metric": k,
                "mean": v["mean"],
                "ci95_low": v["ci95"][0],
                "ci95_high": v["ci95"][1],
                "replicates": len(v["values"]),
            }
            for k, v in self.summary["metrics"].items()
        ]
        return pd.DataFrame(rows)


def study_ref(scenario: Scenario) -> str:
    """Where a scenario's class lives, as ``module:Class`` or, for a study loaded from a file,
    ``/abs/path/study.py:Class``: what `society replay` and `resume` load when its name is
    not a registered one."""
    cls = type(scenario)
    file = getattr(sys.modules.get(cls.__module__), "__file__", None)
    if cls.__module__.startswith("society_study_") and file:  # society.registry._user_study's name
        return f"{Path(file).resolve()}:{cls.__qualname__}"
    return f"{cls.__module__}:{cls.__qualname__}"


def versions() -> dict[str, str]:
    """Versions of Python and the packages that shape results (read without importing them)."""
    return dict(_versions())


@functools.cache
def _versions() -> dict[str, str]:  # reading package metadata costs ms: once per process
    out = {"python": platform.python_version()}
    for pkg in VERSIONED_PACKAGES:
        try:
            out[pkg] = importlib.metadata.version(pkg)
        except importlib.metadata.PackageNotFoundError:
            out[pkg] = "not installed"
    return out


def _describe_error(err: dict, config_cls: type[pydantic.BaseModel]) -> str:
    loc = ".".join(str(p) for p in err.get("loc", ())) or "config"
    if err.get("type") == "extra_forbidden":
        accepted = ", ".join(config_cls.model_fields)
        return f"unknown parameter '{loc}'; accepted: {accepted}"
    msg = err.get("msg", "invalid value")
    if err.get("type") == "renamed":  # society.fields.StudyConfig: an old parameter name
        return msg
    if err.get("type") == "value_error":
        msg = msg.removeprefix("Value error, ")
    if "input" in err and err.get("type") != "missing" and not isinstance(err["input"], dict):
        return f"invalid value for '{loc}': {msg} (got {err['input']!r})"
    return f"invalid value for '{loc}': {msg}"


def validate_config(
    config_cls: type[pydantic.BaseModel], values: Mapping[str, Any]
) -> pydantic.BaseModel:
    """Build a scenario config or raise :class:`ConfigError` with a one-line message."""
    try:
        return config_cls.model_validate(dict(values))
    except pydantic.ValidationError as exc:
        errors = exc.errors()
        raise ConfigError(one_line(_describe_error(errors[0], config_cls))) from None
    except OSError as exc:  # a validator that looked for a file the OS refuses to name (too long)
        keys = [k for k, v in dict(values).items() if isinstance(v, str) and v == exc.filename]
        where = f"invalid value for '{keys[0]}'" if keys else "invalid config"
        got = (
            repr(exc.filename)
            if len(str(exc.filename)) <= 80
            else repr(str(exc.filename)[:80] + "...")
        )
        raise ConfigError(one_line(f"{where}: {exc.strerror or exc} (got {got})")) from None


# What str.splitlines() breaks a line at: each is shown escaped in a one-line message.
_LINE_BREAKS = {c: repr(c)[1:-1] for c in "\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"}


def one_line(message: str, limit: int = 2000) -> str:
    """``message`` on one line (line breaks escaped) and at most ``limit`` characters."""
    text = message.translate(str.maketrans(_LINE_BREAKS))
    return text if len(text) <= limit else text[: limit - 3] + "..."


def load_config_file(path: str | Path) -> dict[str, Any]:
    """Read a TOML parameter file (a flat table of parameter = value)."""
    path = Path(path)
    try:
        with path.open("rb") as fh:
            data = tomllib.load(fh)
    except FileNotFoundError:
        raise ConfigError(f"config file '{path}' does not exist") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"config file '{path}' is not valid TOML: {exc}") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(
            f"config file '{path}' is not valid TOML: not UTF-8 ({exc.reason})"
        ) from None
    except RecursionError:
        raise ConfigError(f"config file '{path}' is not valid TOML: nested too deeply") from None
    except (OSError, ValueError) as exc:  # a directory, no permission, a NUL in the name
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise ConfigError(f"config file '{path}' cannot be read: {reason}") from None
    return data


RESUMED_FROM_START = "from the start (no checkpoint)"

MAX_SEED = 2**32 - 1  # jax keys take 32 bits: larger seeds would repeat smaller ones
MAX_REPLICATES = 2**31 - 1  # numpy and jax index replicates with int32/int64 arrays


def _new_run_dir(out: str | Path | None, name: str, seed: int) -> Path:
    if out is not None:
        path = Path(out)
        if path.exists() and not path.is_dir():
            raise ConfigError(f"output directory '{path}' is a file; choose a new --out")
        if path.exists() and any(path.iterdir()):
            if not _failed_before_any_row(path):
                raise ConfigError(
                    f"output directory '{path}' exists and is not empty; choose a new --out"
                )
            _clear(path, keep=())  # a run that failed before its first row: run it again here
    else:
        stamp = _dt.datetime.now().strftime("%Y%m%d-%H%M%S")
        path = Path("runs") / f"{name}-{stamp}-s{seed}"
        i = 1
        while path.exists():
            path = Path("runs") / f"{name}-{stamp}-s{seed}-{i}"
            i += 1
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ConfigError(f"output directory '{path}' cannot be made ({exc.strerror})") from None
    return path


def _failed_before_any_row(path: Path) -> bool:
    """True for the directory of a run that failed before recording a row (e.g. a bad
    edge-list file): it holds nothing worth keeping, so the same command may run again."""
    try:
        summary = json.loads((path / "summary.json").read_text())
    except (OSError, ValueError):
        return False
    rows = summary.get("rows_recorded") if isinstance(summary, dict) else None
    return (
        summary.get("status") == "failed"
        and rows == 0
        and not any((path / "metrics.parquet").glob("*.parquet"))
    )


def _clear(path: Path, keep: tuple[str, ...]) -> list[str]:
    """Remove everything in ``path`` but the names matching a pattern in ``keep``; return
    the names removed."""
    removed = []
    for item in sorted(path.iterdir()):
        if any(item.match(pattern) for pattern in keep):
            continue
        shutil.rmtree(item) if item.is_dir() and not item.is_symlink() else item.unlink()
        removed.append(item.name)
    return removed


def machine_memory() -> int | None:
    """Physical memory of this machine in bytes (None when the OS does not say)."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        pass
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def _gib(n: float) -> str:
    return f"{n / 2**30:.3g} GiB"


def check_memory(
    scenario: Scenario, cfg: Any, replicates: int, batch_replicates: int | None
) -> None:
    """A one-line ConfigError, before anything runs, when the scenario's memory estimate for
    the replicates held at once is larger than this machine's memory."""
    together = min(batch_replicates or replicates, replicates)
    estimate = scenario.memory_estimate(cfg, together)
    total = machine_memory()
    if estimate is None or total is None or estimate[0] <= total:
        return
    need, what = estimate
    raise ConfigError(
        f"{what} with {together} replicate(s) at once needs about {_gib(need)} of memory, more than "
        f"this machine's {_gib(total)}; lower it, or hold fewer replicates at once (batch_replicates)"
    )


def run_scenario(
    scenario: Scenario | type[Scenario],
    *,
    seed: int = 0,
    replicates: int = 1,
    out: str | Path | None = None,
    write: bool = True,
    config: Mapping[str, Any] | pydantic.BaseModel | None = None,
    options: Mapping[str, Any] | None = None,
    batch_replicates: int | None = None,
    max_fallback_rate: float = DEFAULT_MAX_FALLBACK_RATE,
    checkpoint_every: int = DEFAULT_CHECKPOINT_EVERY,
    resume: str | Path | None = None,
    plots: bool | None = None,
    **params: Any,
) -> RunResult:
    """Validate parameters, run every replicate, and write the run directory.

    ``config`` (a mapping or a Config instance) and keyword ``params`` give parameter
    values (keywords win). With ``write=False`` nothing is written to disk. ``plots=False``
    writes no ``plots/`` (a sweep's points, a test); default: the environment variable
    ``SOCIETY_PLOTS`` (``0``: none), else plots.

    The summary's ``status`` is ``completed``, ``stopped`` (the scenario stopped early,
    ``stop_reason`` says why), ``degraded`` (more than ``max_fallback_rate`` of some
    cohort's decisions were fallbacks for failed model calls; ``degraded`` lists them) or
    ``failed`` (an exception, re-raised). ``scenarios.run(..., max_fallback_rate=0.5)``
    reaches this parameter through its keyword arguments.

    A scenario with ``checkpointing`` saves a checkpoint every ``checkpoint_every`` moments
    (0: only at stops) and when SIGINT or SIGTERM asks it to stop (status ``stopped``,
    ``interrupted`` true). ``resume=DIR`` continues the run in DIR from its checkpoint (or,
    without one, runs it again from the start in DIR); the same parameters must be given.
    """
    if isinstance(scenario, type):
        scenario = scenario()
    if not isinstance(seed, int) or not 0 <= seed <= MAX_SEED:
        raise ConfigError(
            f"invalid value for 'seed': must be an integer in [0, {MAX_SEED}] (got {seed!r})"
        )
    if not isinstance(replicates, int) or not 1 <= replicates <= MAX_REPLICATES:
        raise ConfigError(
            f"invalid value for 'replicates': must be an integer in [1, {MAX_REPLICATES}] (got {replicates!r})"
        )
    if batch_replicates is not None and (
        not isinstance(batch_replicates, int) or batch_replicates < 1
    ):
        raise ConfigError(
            f"invalid value for 'batch_replicates': must be an integer >= 1 (got {batch_replicates!r})"
        )
    if (
        isinstance(max_fallback_rate, bool)
        or not isinstance(max_fallback_rate, int | float)
        or not 0 <= max_fallback_rate <= 1
    ):
        raise ConfigError(
            f"invalid value for 'max_fallback_rate': must be a number in [0, 1] (got {max_fallback_rate!r})"
        )
    if isinstance(config, pydantic.BaseModel):
        values = {**config.model_dump(), **params}
    else:
        values = {**(config or {}), **params}
    if (
        isinstance(checkpoint_every, bool)
        or not isinstance(checkpoint_every, int)
        or checkpoint_every < 0
    ):
        raise ConfigError(
            f"invalid value for 'checkpoint_every': must be an integer >= 0 (got {checkpoint_every!r})"
        )
    cfg = validate_config(scenario.Config, values)
    check_memory(scenario, cfg, replicates, batch_replicates)
    identity = {
        "scenario": scenario.name, "config": cfg.model_dump(mode="json"), "seed": seed,
        "replicates": replicates, "batch_replicates": batch_replicates,
    }  # fmt: skip
    resumed = None
    if resume is not None:
        run_dir = Path(resume)
        resumed = _prepare_resume(run_dir, identity, scenario.checkpointing)
    else:
        run_dir = _new_run_dir(out, scenario.name, seed) if write else None
    recorder = Recorder(
        run_dir / "metrics.parquet" if run_dir else None, labels=scenario.labels,
        flush_interval_s=LIVE_FLUSH_S if run_dir else None,
    )  # fmt: skip
    if resumed is not None:
        recorder.rows_written = int(resumed["recorder"]["rows"])
    ctx = RunContext(
        seed=seed,
        replicates=replicates,
        rng=RNG(seed),
        recorder=recorder,
        run_dir=run_dir,
        options=dict(options or {}),
        batch_replicates=batch_replicates,
        max_fallback_rate=float(max_fallback_rate),
    )
    ctx.checkpoints = Checkpoints(
        run_dir if scenario.checkpointing else None,
        recorder,
        every=checkpoint_every,
        run=identity,
        resumed=resumed,
    )

    def put_fallbacks(saved: dict[str, Any]) -> None:
        ctx.fallbacks, ctx.first_failure = saved["counts"], saved["first"]

    ctx.checkpoints.keep(
        "fallbacks", lambda: {"counts": ctx.fallbacks, "first": ctx.first_failure}, put_fallbacks
    )
    summary: dict[str, Any] = {
        "scenario": scenario.name,
        "study": study_ref(scenario),  # how `society replay` / `resume` load it again
        "config": cfg.model_dump(mode="json"),
        "seed": seed,
        "replicates": replicates,
        "versions": versions(),
        # what resume and replay need besides the config (a key's variable name, never a key)
        "options": {
            **{k: v for k, v in (options or {}).items() if k in RECORDED_OPTIONS},
            "checkpoint_every": checkpoint_every,
        },
        "status": "running",
        "metrics": {},
    }
    if resume is not None:
        summary["resumed"] = "from a checkpoint" if resumed is not None else RESUMED_FROM_START
    summary["batch_replicates"] = batch_replicates
    _write_summary(run_dir, summary)  # a run that is killed still names its scenario and config
    started = time.perf_counter()
    total, unit = scenario.horizon(cfg) or (None, "moments")
    progress = ctx.progress = Progress(run_dir, scenario=scenario.name, total=total, unit=unit)
    progress.rows = lambda: recorder.rows_recorded
    progress.latest_time = lambda: recorder.latest_time
    progress.start()
    token = _current_run.set(ctx)
    restore_signals = (
        _stop_on_signals(ctx.checkpoints)
        if scenario.checkpointing and run_dir is not None
        else None
    )
    try:
        headline = scenario.run(cfg, ctx)
    except Interrupted as exc:
        recorder.close()  # nothing: the checkpoint flushed every row up to its moment
        summary.update(
            status="stopped",
            interrupted=True,
            stop_reason=f"{exc}; continue it with: society resume {run_dir}",
        )
        summary["wall_time_s"] = round(time.perf_counter() - started, 3)
        _write_summary(run_dir, summary)
        return RunResult(summary=summary, frame=recorder.frame, run_dir=run_dir)
    except KeyboardInterrupt:  # Ctrl-C or SIGTERM before the run could keep a checkpoint
        recorder.close()
        summary.update(
            status="stopped",
            interrupted=True,
            stop_reason="interrupted before its first checkpoint; society resume runs it again",
        )
        summary["wall_time_s"] = round(time.perf_counter() - started, 3)
        _write_summary(run_dir, summary)
        raise
    except BaseException as exc:
        recorder.close()  # keep every row recorded before the failure
        summary.update(
            status="failed",
            error=f"{type(exc).__name__}: {exc}",
            rows_recorded=recorder.rows_written,
        )
        summary["wall_time_s"] = round(time.perf_counter() - started, 3)
        _write_summary(run_dir, summary)
        raise
    finally:
        _current_run.reset(token)
        progress.stop(summary["status"] if summary["status"] != "running" else "finishing")
        if restore_signals is not None:
            restore_signals()
    recorder.close()
    # Everything is computed and written before the checkpoint goes: a kill at any instant
    # leaves either a resumable checkpoint or a finished summary.
    try:
        metrics = _headline_summaries(scenario, headline, replicates)
    except RunError as exc:
        summary.update(status="failed", error=str(exc), rows_recorded=recorder.rows_written)
        _write_summary(run_dir, summary)
        progress.stop("failed")
        raise
    degraded = ctx.degradation()
    summary["status"] = "degraded" if degraded else "stopped" if ctx.stop_reason else "completed"
    if degraded:
        summary["degraded"] = degraded
    if ctx.stop_reason:
        summary["stop_reason"] = ctx.stop_reason
    if ctx.fallbacks:
        summary["fallbacks"] = {
            cohort: {**c, "rate": _stand_in_rate(c)} for cohort, c in sorted(ctx.fallbacks.items())
        }
        summary["max_fallback_rate"] = ctx.max_fallback_rate
    if ctx.first_failure:
        summary["first_failure"] = ctx.first_failure
    summary.update(ctx.report)
    summary["metrics"] = metrics
    missing = [m for m in scenario.headline if m not in metrics]
    if missing:
        summary["missing_headline"] = missing
    if plots is None:
        plots = os.environ.get("SOCIETY_PLOTS", "1") != "0"
    if run_dir is not None and plots:
        scenario.plot(recorder.frame(), run_dir / "plots", cfg)
    summary["wall_time_s"] = round(time.perf_counter() - started, 3)
    _write_summary(run_dir, summary)
    if summary["status"] != "stopped":
        ctx.checkpoints.remove()  # finished and recorded: nothing is left to resume
    progress.stop(summary["status"])  # progress.json ends with the final status
    return RunResult(summary=summary, frame=recorder.frame, run_dir=run_dir)


def _headline_summaries(scenario: Scenario, headline: Any, replicates: int) -> dict[str, dict]:
    """Each returned headline metric's mean and interval (clipped to its declared bounds);
    a RunError (one line) when the scenario returned something else than one value per
    replicate of each."""
    if not isinstance(headline, Mapping):
        raise RunError(
            f"scenario {scenario.name} returned {type(headline).__name__} from run(); "
            "expected a mapping of headline metric -> one value per replicate"
        )
    out = {}
    for name, vals in headline.items():
        try:
            vals = np.asarray(vals, dtype=float).ravel()
        except (TypeError, ValueError):
            raise RunError(
                f"scenario {scenario.name} returned non-numeric values of '{name}'"
            ) from None
        if vals.size != replicates:
            raise RunError(
                f"scenario {scenario.name} returned {vals.size} values of '{name}' for {replicates} "
                f"replicate(s); run() must return one value per replicate"
            )
        out[name] = summarize(vals, bounds=_bounds(scenario, name, vals))
    return out


def _bounds(scenario: Scenario, name: str, vals: np.ndarray) -> tuple[float, float] | None:
    """A headline metric's declared bounds; else [0, 1] for a ``*fraction`` or ``*_rate``
    whose values all lie in it (a rate outside [0, 1] is no fraction and is left alone)."""
    if name in scenario.bounds:
        return scenario.bounds[name]
    finite = vals[np.isfinite(vals)]
    if name.endswith(("fraction", "_rate")) and ((finite >= 0) & (finite <= 1)).all():
        return (0.0, 1.0)
    return None


def _prepare_resume(
    run_dir: Path, identity: dict[str, Any], checkpointing: bool
) -> dict[str, Any] | None:
    """Check that ``run_dir`` is this run, unfinished; return its checkpoint (None: start over)."""
    summary_path = run_dir / "summary.json"
    try:
        previous = json.loads(summary_path.read_text())
    except FileNotFoundError:
        raise ConfigError(f"'{run_dir}' is not a run directory (no summary.json)") from None
    except (OSError, ValueError) as exc:
        raise ConfigError(
            f"'{summary_path}' cannot be read ({exc}); the run cannot be resumed"
        ) from None
    if previous.get("status") in ("completed", "degraded"):
        raise ConfigError(
            f"run '{run_dir}' already {previous['status']}: nothing to resume (see society replay)"
        )
    if checkpointing and (run_dir / CHECKPOINT_FILE).exists():
        doc = load_for_resume(run_dir)
        if doc["run"] != identity:
            diff = sorted(k for k in identity if doc["run"].get(k) != identity[k])
            raise ConfigError(
                f"checkpoint in '{run_dir}' belongs to another run (differs in: {', '.join(diff)})"
            )
        return doc
    # No checkpoint: the run starts again from clean state (rows, artifact stores, plots...);
    # only the LLM cache stays, its replies keyed by exactly what was asked.
    _clear(run_dir, keep=("summary.json", "llm-cache.sqlite*"))
    return None


def _stop_on_signals(checkpoints: Checkpoints) -> Callable[[], None] | None:
    """SIGINT/SIGTERM ask the run to checkpoint and stop at the end of the moment; a second
    signal interrupts at once. Returns the function that puts the old handlers back."""
    if threading.current_thread() is not threading.main_thread():
        return None

    def on_signal(signum: int, frame: Any) -> None:
        if checkpoints.interrupt is not None or not checkpoints.used:
            raise KeyboardInterrupt  # a second signal, or a path of the scenario without checkpoints
        checkpoints.interrupt = f"interrupted by {signal.Signals(signum).name}"

    old = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGINT, signal.SIGTERM)}
    return lambda: [signal.signal(sig, h) for sig, h in old.items()] and None


def _write_summary(run_dir: Path | None, summary: dict) -> None:
    if run_dir is None:
        return
    tmp = run_dir / ".summary.json.tmp"
    tmp.write_text(json.dumps(_strict_json(summary), indent=2, allow_nan=False) + "\n")
    tmp.replace(run_dir / "summary.json")


def _strict_json(value: Any) -> Any:
    """NaN and infinities become null: summary.json stays valid JSON for every reader."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: _strict_json(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_strict_json(v) for v in value]
    return value


def subplots(plots_dir: Path, *args: Any, **kwargs: Any) -> tuple[Any, Any]:
    """``plt.subplots`` for a run's figures: no display needed (Agg), ``plots_dir`` made."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    plots_dir.mkdir(parents=True, exist_ok=True)
    return plt.subplots(*args, **kwargs)


def save_figure(fig: Any, path: Path) -> Path:
    """Lay ``fig`` out, write it to ``path`` and free it (pyplot keeps every open figure)."""
    import matplotlib.pyplot as plt

    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return path


_ROW_COLUMNS = ("time", "metric", "value", "replicate")
MAX_PLOT_LINES = 8  # more label values than this on one metric (per-agent rows) are averaged


def plot_metrics(
    frame: pd.DataFrame, plots_dir: Path, metrics: list[str] | None = None
) -> list[Path]:
    """One PNG per metric against time: the mean over replicates, each replicate faint.

    Rows of a metric that carry labels (a cohort, a kind, a strategy) are drawn as one line
    per label value, up to ``MAX_PLOT_LINES``; beyond that (per-agent rows) they are averaged.
    """
    plots_dir.mkdir(parents=True, exist_ok=True)
    written = []
    if frame.empty:
        return written
    for metric in metrics or sorted(frame["metric"].unique()):
        sub = frame[frame["metric"] == metric]
        if sub["time"].nunique() < 2:
            continue
        labels = [c for c in sub.columns if c not in _ROW_COLUMNS and sub[c].notna().any()]
        lines = sub.groupby(labels, dropna=False, sort=True) if labels else [((), sub)]
        if labels and lines.ngroups > MAX_PLOT_LINES:
            lines, labels = [((), sub)], []
        fig, ax = subplots(plots_dir, figsize=(6, 3.5), dpi=100)
        for i, (values, rows) in enumerate(lines):
            values = values if isinstance(values, tuple) else (values,)
            name = ", ".join(f"{k}={v}" for k, v in zip(labels, values, strict=True) if pd.notna(v))
            colour = f"C{i % 10}"
            per_rep = rows.groupby(["replicate", "time"], as_index=False)["value"].mean()
            for _, rep in per_rep.groupby("replicate"):
                ax.plot(rep["time"], rep["value"], color=colour, alpha=0.25, lw=0.8)
            mean = per_rep.groupby("time")["value"].mean()
            ax.plot(
                mean.index, mean.values, color=colour, lw=2, label=name or "mean over replicates"
            )
        ax.set_xlabel("time")
        ax.set_ylabel(metric)
        ax.legend(loc="best", fontsize=8)
        written.append(save_figure(fig, plots_dir / f"{metric.replace('/', '_')}.png"))
    return written
