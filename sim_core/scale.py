"""Scaling experiments: time per step and memory per agent against population size.

Each (population, steps) run goes in a fresh Python process (``python -m sim_core.scale``),
so its peak resident memory (``VmHWM``) is that run's alone and no compiled kernel or cache
carries over between sizes. With ``marginal`` each size runs at ``steps`` and ``2*steps``:
the difference of the two run times over ``steps`` is the marginal cost of a step, free of
set-up and compilation; the plain time per step (run time / steps) is reported as well.

``out`` gets ``scale.parquet`` and ``scale.csv`` (one row per size), ``scale.png`` (log-log)
and ``scale.json`` with the fitted exponents (slope of log time per step on log N).
"""

from __future__ import annotations

import importlib
import json
import math
import os
import resource
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pydantic

from sim_core.errors import ConfigError
from sim_core.experiment import MAX_SEED, one_line, save_figure, validate_config

RESULT_PREFIX = "SIM_CORE_SCALE_RESULT "
COLUMNS = (
    "population", "steps", "status", "time_s", "time_s_2x", "time_per_step_s", "marginal_time_per_step_s",
    "time_per_agent_step_s", "rss_peak_bytes", "bytes_per_agent", "marginal_bytes_per_agent",
    "llm_tokens_per_agent_step", "llm_cost_per_agent_step", "error",
)  # fmt: skip


@dataclass
class ScaleResult:
    table: pd.DataFrame
    time_exponent: float
    time_basis: str  # which column the exponent was fitted on
    memory_exponent: float
    out: Path


def _peak_rss_bytes() -> int:
    """This process's peak resident set size (VmHWM; ru_maxrss where /proc is missing)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return int(peak if sys.platform == "darwin" else peak * 1024)


def _llm_totals(frame: pd.DataFrame) -> dict[str, float]:
    """Run-wide LLM tokens and cost (replicate -1 rows without cohort/agent labels, the last)."""
    out = {"llm_tokens": math.nan, "llm_cost_usd": math.nan}
    if frame.empty or "metric" not in frame:
        return out
    rows = frame[frame["metric"].isin(list(out)) & (frame["replicate"] == -1)]
    for label in ("cohort", "agent"):
        if label in rows:
            rows = rows[rows[label].isna()]
    for metric in out:
        sub = rows[rows["metric"] == metric]
        if not sub.empty:
            out[metric] = float(sub.sort_values("time")["value"].iloc[-1])
    return out


def child_main(spec: dict[str, Any]) -> dict[str, Any]:
    """Run one (population, steps) point in this process and measure it."""
    module, _, attr = spec["runner"].partition(":")
    runner = getattr(importlib.import_module(module), attr)
    started = time.perf_counter()  # not the summary's wall time: it is rounded to 1 ms
    result = runner(
        spec["scenario"], seed=spec["seed"], replicates=1, write=False, config=spec["config"]
    )
    return {
        "status": result.summary["status"],
        "wall_time_s": time.perf_counter() - started,
        "rss_peak_bytes": _peak_rss_bytes(),
        **_llm_totals(result.metrics),
    }


def _run_child(spec: dict[str, Any]) -> dict[str, Any]:
    root = str(Path(__file__).resolve().parents[1])
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
    proc = subprocess.run(
        [sys.executable, "-m", "sim_core.scale", json.dumps(spec)],
        capture_output=True, text=True, env=env, check=False,
    )  # fmt: skip
    for line in reversed(proc.stdout.splitlines()):
        if line.startswith(RESULT_PREFIX):
            return json.loads(line[len(RESULT_PREFIX) :])
    tail = (proc.stderr.strip().splitlines() or [f"exit status {proc.returncode}"])[-1]
    return {"status": "failed", "error": one_line(tail, 500)}


def fit_exponent(x: Sequence[float], y: Sequence[float]) -> float:
    """Slope of log y on log x over the points where both are finite and positive (NaN with
    fewer than two such points)."""
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    ok = np.isfinite(x) & np.isfinite(y) & (x > 0) & (y > 0)
    if ok.sum() < 2 or np.unique(x[ok]).size < 2:
        return math.nan
    return float(np.polyfit(np.log(x[ok]), np.log(y[ok]), 1)[0])


def run_scale(
    scenario: str,
    populations: Sequence[int],
    *,
    out: str | Path,
    population_field: str,
    steps_field: str,
    runner: str,
    config_class: type[pydantic.BaseModel],
    base: Mapping[str, Any] | None = None,
    steps: int | None = None,
    seed: int = 0,
    marginal: bool = True,
    progress: Callable[[str], None] | None = None,
) -> ScaleResult:
    """Run ``scenario`` (a reference ``runner`` resolves in a fresh process, e.g. a registry
    name with ``runner="society.registry:run"``) at each population size and write the table, the
    plot and the exponents. ``steps`` defaults to the config's value of ``steps_field``."""
    base = dict(base or {})
    say = progress or (lambda _msg: None)
    sizes = []
    for n in populations:
        if isinstance(n, float) and n.is_integer():
            n = int(n)
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise ConfigError(
                f"invalid value for '--population': sizes must be integers >= 1 (got {n!r})"
            )
        sizes.append(n)
    if not sizes:
        raise ConfigError("invalid value for '--population': give at least one size, e.g. 1e3,1e4")
    sizes = sorted(set(sizes))
    if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed <= MAX_SEED:
        raise ConfigError(
            f"invalid value for 'seed': must be an integer in [0, {MAX_SEED}] (got {seed!r})"
        )
    for name in (population_field, steps_field):
        if name in base:
            raise ConfigError(f"'{name}' is set by the scale command itself; leave it out of --set")
    if steps is None:
        steps = getattr(
            validate_config(config_class, {**base, population_field: sizes[0]}), steps_field
        )
    if isinstance(steps, bool) or not isinstance(steps, int) or steps < 1:
        raise ConfigError(f"invalid value for '--steps': must be an integer >= 1 (got {steps!r})")
    step_counts = (steps, 2 * steps) if marginal else (steps,)
    configs = {}
    for n in sizes:  # every config is checked before any run starts
        for k in step_counts:
            configs[n, k] = validate_config(
                config_class, {**base, population_field: n, steps_field: k}
            ).model_dump(mode="json")
    out = Path(out)
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise ConfigError(f"output directory '{out}' exists and is not empty; choose a new --out")
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ConfigError(f"output directory '{out}' cannot be made ({exc.strerror})") from None
    rows = []
    prev = None
    for n in sizes:
        measured = {}
        for k in step_counts:
            say(f"population {n}, {k} steps ...")
            measured[k] = _run_child(
                {"runner": runner, "scenario": scenario, "seed": seed, "config": configs[n, k]}
            )
        first = measured[steps]
        failed = [m for m in measured.values() if m["status"] == "failed"]
        nan = math.nan
        row = {c: nan for c in COLUMNS}
        row.update(
            population=n,
            steps=steps,
            status=failed[0]["status"] if failed else first["status"],
            error=None,
        )
        if failed:
            row["error"] = failed[0].get("error")
        else:
            row["time_s"] = first["wall_time_s"]
            row["time_per_step_s"] = first["wall_time_s"] / steps
            if marginal:
                row["time_s_2x"] = measured[2 * steps]["wall_time_s"]
                row["marginal_time_per_step_s"] = (row["time_s_2x"] - row["time_s"]) / steps
            per_step = (
                row["marginal_time_per_step_s"]
                if marginal and row["marginal_time_per_step_s"] > 0
                else row["time_per_step_s"]
            )
            row["time_per_agent_step_s"] = per_step / n
            row["rss_peak_bytes"] = max(int(m["rss_peak_bytes"]) for m in measured.values())
            row["bytes_per_agent"] = row["rss_peak_bytes"] / n
            if prev is not None:
                row["marginal_bytes_per_agent"] = (row["rss_peak_bytes"] - prev[1]) / (n - prev[0])
            prev = (n, row["rss_peak_bytes"])
            tokens, cost = first.get("llm_tokens"), first.get("llm_cost_usd")
            agent_steps = n * steps
            row["llm_tokens_per_agent_step"] = nan if tokens is None else tokens / agent_steps
            row["llm_cost_per_agent_step"] = nan if cost is None else cost / agent_steps
        say(f"population {n}: {row['status']}, {row['time_per_step_s']:.4g} s/step")
        rows.append(row)
    table = pd.DataFrame(rows, columns=list(COLUMNS))
    marg = table["marginal_time_per_step_s"]
    use_marginal = (
        marginal and bool(((marg > 0) & np.isfinite(marg)).sum() >= 2) and bool((marg > 0).all())
    )
    basis = "marginal_time_per_step_s" if use_marginal else "time_per_step_s"
    time_exp = fit_exponent(table["population"], table[basis])
    mem_exp = fit_exponent(table["population"], table["rss_peak_bytes"])
    table.to_parquet(out / "scale.parquet", index=False)
    table.to_csv(out / "scale.csv", index=False)
    (out / "scale.json").write_text(json.dumps({
        "scenario": scenario, "population_field": population_field, "steps_field": steps_field,
        "steps": steps, "seed": seed, "base": base, "time_exponent": _finite(time_exp), "time_basis": basis,
        "memory_exponent": _finite(mem_exp),
    }, indent=2, default=str) + "\n")  # fmt: skip
    _plot(table, basis, time_exp, mem_exp, out / "scale.png")
    return ScaleResult(
        table=table, time_exponent=time_exp, time_basis=basis, memory_exponent=mem_exp, out=out
    )


def _finite(x: float) -> float | None:
    return x if math.isfinite(x) else None


def _plot(table: pd.DataFrame, basis: str, time_exp: float, mem_exp: float, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(9, 3.5), dpi=100)
    for ax, col, label, exp in (
        (ax1, basis, "time per step (s)", time_exp),
        (ax2, "rss_peak_bytes", "peak RSS (bytes)", mem_exp),
    ):
        ok = table[(table[col] > 0) & np.isfinite(table[col])]
        ax.plot(ok["population"], ok[col], "o-")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("population N")
        ax.set_ylabel(label)
        ax.set_title(f"slope {exp:.2f}" if math.isfinite(exp) else "slope n/a")
    save_figure(fig, path)


if __name__ == "__main__":
    outcome = child_main(json.loads(sys.argv[1]))
    print(RESULT_PREFIX + json.dumps(outcome), flush=True)
