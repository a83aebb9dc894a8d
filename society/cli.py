"""The ``society`` command: a thin layer over :mod:`society.registry` (``scenarios.run``
and friends: the Python API comes first).

Exit status: 0 a completed (or stopped) run; 2 bad input, one line on stderr naming what is
wrong and what is accepted; 3 a degraded run (too many LLM decisions were fallbacks for
failed calls; ``--accept-degraded`` exits 0); 1 a run that could not go on (one line, e.g.
the local model server died) or an unexpected error. Heavy imports (jax, the scenario
models) happen only in ``run``.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import tomllib
from pathlib import Path
from typing import Annotated, Any

import typer

from sim_core.errors import ConfigError, RunError
from society import registry

EXIT_DEGRADED = 3
EXIT_INTERRUPTED = 130  # the shell's code for SIGINT: the run stopped at a checkpoint

app = typer.Typer(
    name="society",
    help="Simulate societies of LLM, learned and rule agents.",
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)


# --seed: jax keys take 32 bits (a seed >= 2**32 repeats a smaller one's streams)
MAX_SEED = 2**32 - 1  # as sim_core.experiment (not imported here: start-up time)
MAX_REPLICATES = 2**31 - 1


def _fail(message: str) -> None:
    message = " ".join(message.splitlines())  # one line, whatever a value quoted in it holds
    print(f"error: {message}", file=sys.stderr)
    raise SystemExit(2)


def parse_set(items: list[str]) -> dict[str, Any]:
    """``KEY=VALUE`` pairs; values are read as TOML literals (numbers, true/false, "text")
    and otherwise kept as strings for the scenario's config to validate."""
    out: dict[str, Any] = {}
    for item in items:
        key, raw = _split_pair(item, "--set", "KEY=VALUE")
        out[key] = parse_value(raw)
    return out


def _split_pair(item: str, option: str, shape: str) -> tuple[str, str]:
    key, sep, raw = item.partition("=")
    key = key.strip().replace("-", "_")
    if not sep or not key:
        raise ConfigError(f"{option} expects {shape}, got '{item}'")
    return key, raw


def parse_value(raw: str) -> Any:
    """One value as ``--set`` reads it: a TOML literal, otherwise the text itself."""
    try:
        return tomllib.loads(f"v = {raw.strip()}")["v"]
    except (tomllib.TOMLDecodeError, RecursionError):  # not a literal, or nested too deep
        return raw.strip()


def parse_grid(items: list[str]) -> dict[str, list[Any]]:
    """``KEY=V1,V2,...`` per item (each value read as by ``--set``), or ``KEY=[V1, V2]`` as a
    TOML array when values hold commas; a key given twice is an error."""
    out: dict[str, list[Any]] = {}
    for item in items:
        key, raw = _split_pair(item, "--grid", "KEY=V1,V2,...")
        if key in out:
            raise ConfigError(f"--grid '{key}' is given twice; list all its values in one --grid")
        whole = parse_value(raw)
        values = whole if isinstance(whole, list) else [parse_value(v) for v in raw.split(",")]
        if not values or any(v == "" for v in values):
            raise ConfigError(f"--grid '{key}' has an empty value in '{item}'")
        if len({repr(v) for v in values}) != len(values):
            raise ConfigError(f"--grid '{key}' lists a value twice in '{item}'")
        out[key] = values
    return out


@app.command("list")
def list_cmd() -> None:
    """List the scenarios, one line each.

    Example:

    \b
        society list
    """
    width = max(len(n) for n in registry.names())
    for name in registry.names():
        print(f"{name:<{width}}  {registry.summary_line(name)}")


@app.command("describe")
def describe_cmd(scenario: Annotated[str, typer.Argument(help="scenario name")]) -> None:
    """Show a scenario's parameters: type, default and meaning.

    Example:

    \b
        society describe network-game
        society describe examples/boltzmann_study.py:Boltzmann
    """
    from rich.console import Console
    from rich.table import Table

    rows = registry.describe(scenario)
    table = Table(title=f"{scenario}: {registry.summary_line(scenario)}", show_lines=False)
    for col in ("parameter", "type", "default", "meaning"):
        table.add_column(col, overflow="fold")
    for r in rows:
        table.add_row(r["name"], r["type"], r["default"], r["description"])
    Console(width=max(120, Console().width)).print(table)


@app.command("run")
def run_cmd(
    scenario: Annotated[str, typer.Argument(help="scenario name (see `society list`)")],
    set_: Annotated[
        list[str] | None, typer.Option("--set", help="parameter KEY=VALUE (repeatable)")
    ] = None,
    config: Annotated[Path | None, typer.Option("--config", help="TOML file of parameters")] = None,
    seed: Annotated[int, typer.Option(help="root random seed", min=0, max=MAX_SEED)] = 0,
    replicates: Annotated[
        int, typer.Option(help="independent replicates", min=1, max=MAX_REPLICATES)
    ] = 1,
    out: Annotated[
        Path | None, typer.Option(help="run directory (default runs/<scenario>-<time>)")
    ] = None,
    llm: Annotated[
        str | None,
        typer.Option(
            help="litellm model string for LLM agents (default: 'local', the embedded model)"
        ),
    ] = None,
    api_base: Annotated[
        str | None, typer.Option("--api-base", help="OpenAI-compatible server URL")
    ] = None,
    api_key_env: Annotated[
        str | None,
        typer.Option(
            "--api-key-env",
            help="NAME of the environment variable holding the API key for --api-base (the key itself is never written anywhere)",
        ),
    ] = None,
    concurrency: Annotated[
        int | None,
        typer.Option(
            "--concurrency", min=1, help="LLM calls in flight at once (default: the client's, 256)"
        ),
    ] = None,
    llm_shards: Annotated[
        int | None,
        typer.Option(
            "--llm-shards", min=1, help="Ray actors that make the LLM calls (default: 1, none)"
        ),
    ] = None,
    max_fallback_rate: Annotated[
        float,
        typer.Option(
            "--max-fallback-rate",
            help="the run is 'degraded' (exit 3) when more than this share of an LLM cohort's decisions were fallbacks for failed calls",
        ),
    ] = 0.1,
    accept_degraded: Annotated[
        bool,
        typer.Option(
            "--accept-degraded",
            help="exit 0 even when the run is degraded (the summary still says so)",
        ),
    ] = False,
    checkpoint_every: Annotated[
        int,
        typer.Option(
            "--checkpoint-every",
            min=0,
            help="moments between checkpoints (0: only when stopped by Ctrl-C/SIGTERM), for scenarios that keep them",
        ),
    ] = 50,
    plots: Annotated[
        bool | None,
        typer.Option(
            "--plots/--no-plots",
            help="write plots/ (default: yes, unless the environment sets SOCIETY_PLOTS=0)",
        ),
    ] = None,
) -> None:
    """Run a scenario and write its run directory.

    Example:

    \b
        society run network-game --set population=400 --set steps=50 --seed 1 --replicates 4
        society run examples/boltzmann_study.py:Boltzmann --set population=50 --out runs/b
    """
    from sim_core.experiment import load_config_file

    values: dict[str, Any] = {}
    if config is not None:
        values.update(load_config_file(config))
    values.update(parse_set(set_ or []))
    registry.config_class(scenario)  # unknown scenario: one-line error before heavy imports
    _check_out(out)
    options = _options(
        llm=llm, api_base=api_base, api_key_env=api_key_env, concurrency=concurrency,
        llm_shards=llm_shards,
    )  # fmt: skip
    result = _run(
        scenario, seed=seed, replicates=replicates, out=out, config=values, options=options,
        max_fallback_rate=max_fallback_rate, checkpoint_every=checkpoint_every, plots=plots,
    )  # fmt: skip
    _finish(scenario, result, accept_degraded)


def _options(**values: Any) -> dict[str, Any]:
    """The run options given (as registry.run builds them); ``api_key_env`` checked now:
    a NAME, set in the environment (one line, never echoing a value)."""
    from society.llm.config import LLMConfig

    options = {k: v for k, v in values.items() if v is not None}
    if "api_key_env" in options:
        try:
            LLMConfig.model_validate({"model": "x", "api_key_env": options["api_key_env"]})
        except ValueError as exc:
            reason = (
                exc.errors()[0]["msg"].removeprefix("Value error, ")
                if hasattr(exc, "errors")
                else str(exc)
            )
            raise ConfigError(f"invalid value for '--api-key-env': {reason}") from None
        name = options["api_key_env"]
        if not os.environ.get(name):
            raise ConfigError(
                f"--api-key-env {name}: the environment variable {name} is not set (or empty); export the API key in it"
            )
    return options


def _run(scenario: str, *, options: dict[str, Any], **kwargs: Any) -> Any:
    """registry.run with every run option (a progress bar on a terminal, plain progress
    lines in a log)."""
    from sim_core.experiment import run_scenario
    from sim_core.progress import console_progress

    try:
        with console_progress():
            return run_scenario(registry.get(scenario), options=options, **kwargs)
    except KeyboardInterrupt:  # before its first checkpoint: summary.json says stopped
        print(
            "stopped early: interrupted before its first checkpoint; society resume runs it again",
            file=sys.stderr,
        )
        raise typer.Exit(EXIT_INTERRUPTED) from None


def _finish(scenario: str, result: Any, accept_degraded: bool = False) -> None:
    """Print the summary; exit 130 when interrupted, 3 when degraded (unless accepted)."""
    _print_summary(scenario, result)
    for name in result.summary.get("missing_headline", []):
        print(
            f"warning: headline metric '{name}' was declared by the scenario but its run returned no values",
            file=sys.stderr,
        )
    if result.summary.get("interrupted"):
        raise typer.Exit(EXIT_INTERRUPTED)
    if _report_failures(result.summary) and not accept_degraded:
        raise typer.Exit(EXIT_DEGRADED)


def _study_of(summary: dict) -> str:
    """The scenario of a run directory: its registered name, else where its class lives."""
    name = summary["scenario"]
    return name if name in registry.names() or "study" not in summary else summary["study"]


@app.command("resume")
def resume_cmd(
    run_dir: Annotated[Path, typer.Argument(help="the directory of a stopped or killed run")],
    api_base: Annotated[
        str | None,
        typer.Option("--api-base", help="OpenAI-compatible server URL (default: the run's)"),
    ] = None,
    api_key_env: Annotated[
        str | None,
        typer.Option(
            "--api-key-env",
            help="NAME of the environment variable holding the API key (default: the run's)",
        ),
    ] = None,
    concurrency: Annotated[
        int | None,
        typer.Option(
            "--concurrency", min=1, help="LLM calls in flight at once (default: the run's)"
        ),
    ] = None,
    llm_shards: Annotated[
        int | None,
        typer.Option(
            "--llm-shards", min=1, help="Ray actors that make the LLM calls (default: the run's)"
        ),
    ] = None,
    checkpoint_every: Annotated[
        int | None,
        typer.Option(
            "--checkpoint-every",
            min=0,
            help="moments between checkpoints from here on (default: the run's)",
        ),
    ] = None,
    accept_degraded: Annotated[
        bool, typer.Option("--accept-degraded", help="exit 0 even when the run is degraded")
    ] = False,
) -> None:
    """Continue a run that was stopped (Ctrl-C, SIGTERM, a budget) or killed, in its own
    directory, from its last checkpoint, with the run's own options (model, server, key
    variable, concurrency, checkpoint interval) unless given again; rows after that
    checkpoint are written again, so metrics.parquet ends as an uninterrupted run's would.
    Without a checkpoint the run starts again from the start, from clean state (it says so).
    Example: society resume runs/network-game-20261203-081500-s1"""
    from sim_core.checkpoint import FILE
    from sim_core.report import load_run

    summary = load_run(run_dir)
    recorded = summary.get("options") or {}
    given = {"api_base": api_base, "api_key_env": api_key_env, "concurrency": concurrency,
             "llm_shards": llm_shards}  # fmt: skip
    keys = ("llm", "api_base", "api_key_env", "concurrency", "llm_shards")
    options = _options(
        **{k: given.get(k) if given.get(k) is not None else recorded.get(k) for k in keys}
    )
    every = (
        checkpoint_every if checkpoint_every is not None else recorded.get("checkpoint_every", 50)
    )
    if summary.get("status") not in ("completed", "degraded") and not (run_dir / FILE).exists():
        print(
            f"resume: no checkpoint in {run_dir}: the run starts again from the start, from clean state",
            file=sys.stderr,
        )
    result = _run(
        _study_of(summary), seed=summary["seed"], replicates=summary.get("replicates", 1),
        config=summary["config"], options=options, batch_replicates=summary.get("batch_replicates"),
        resume=run_dir, checkpoint_every=every,
    )  # fmt: skip
    _finish(summary["scenario"], result, accept_degraded)


@app.command("replay")
def replay_cmd(
    run_dir: Annotated[Path, typer.Argument(help="a finished run's directory")],
    out: Annotated[
        Path | None, typer.Option(help="directory of the replay (default runs/<scenario>-<time>)")
    ] = None,
) -> None:
    """Run a finished run again from its directory: same scenario, config and seed, every LLM
    reply from its llm-cache.sqlite (no server, no network, no API key); the metrics are the
    same.

    Example:

    \b
        society replay runs/skill-society-20261203-081500-s1
    """
    from sim_core.report import load_run

    summary = load_run(run_dir)
    _check_out(out)
    cache = run_dir / "llm-cache.sqlite"
    if summary.get("llm") and not cache.is_file():  # the run called a model: its replies are needed
        raise ConfigError(
            f"replay: the run's LLM cache {cache} is missing; a replay answers only from it and never calls a model"
        )
    options = {
        "llm": (summary.get("options") or {}).get("llm"),
        "replay": cache,
    }  # never a server or a key
    result = _run(
        _study_of(summary), seed=summary["seed"], replicates=summary.get("replicates", 1), out=out,
        config=summary["config"], options={k: v for k, v in options.items() if v is not None},
    )  # fmt: skip
    _print_summary(summary["scenario"], result)
    if _report_failures(result.summary):
        raise typer.Exit(EXIT_DEGRADED)


def _check_out(out: Path | None) -> None:
    """A one-line error now, not a traceback once the run has started, when ``--out`` cannot
    be a new directory: its nearest existing ancestor must be a writable directory. (An
    existing non-empty ``--out`` is refused by the run itself, before it writes anything.)"""
    if out is None:
        return
    try:
        if "\x00" in str(out):
            raise ValueError("a NUL byte in the path")
        near = out
        while not near.exists() and near.parent != near:
            near = near.parent
        if not near.is_dir():
            raise ValueError(f"'{near}' is not a directory")
        if not os.access(near, os.W_OK | os.X_OK):
            raise ValueError(f"'{near}' is not writable")
    except (OSError, ValueError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise ConfigError(f"invalid value for '--out': {reason} (got '{out}')") from None


@app.command("report")
def report_cmd(
    run_dirs: Annotated[
        list[Path], typer.Argument(help="one run directory, or several to compare")
    ],
    out: Annotated[
        Path | None,
        typer.Option(help="HTML file (default: report.html in the first run directory)"),
    ] = None,
) -> None:
    """Write one self-contained HTML report (headline table with intervals, every plot, the
    config, versions, LLM usage and failures) that opens offline; several runs side by side.

    Example:

    \b
        society report runs/skill-society-A runs/skill-society-B --out compare.html
    """
    from sim_core.report import write_report

    if out is not None:
        try:
            out.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise ConfigError(
                f"invalid value for '--out': its directory cannot be made ({exc.strerror or exc}) (got '{out}')"
            ) from None
    print(f"report: {write_report(run_dirs, out)}")


@app.command("sweep")
def sweep_cmd(
    scenario: Annotated[str, typer.Argument(help="scenario name (see `society list`)")],
    grid: Annotated[
        list[str] | None,
        typer.Option(
            "--grid",
            help="KEY=V1,V2,... values to sweep (repeatable; KEY=[...] as a TOML array when values hold commas)",
        ),
    ] = None,
    set_: Annotated[
        list[str] | None, typer.Option("--set", help="fixed parameter KEY=VALUE (repeatable)")
    ] = None,
    config: Annotated[
        Path | None, typer.Option("--config", help="TOML file of fixed parameters")
    ] = None,
    random: Annotated[
        int | None,
        typer.Option("--random", help="run N points drawn from the grid with the seed", min=1),
    ] = None,
    seed: Annotated[
        int, typer.Option(help="root random seed of every point", min=0, max=MAX_SEED)
    ] = 0,
    replicates: Annotated[
        int, typer.Option(help="independent replicates per point", min=1, max=MAX_REPLICATES)
    ] = 1,
    out: Annotated[
        Path, typer.Option(help="sweep directory; rerun with the same arguments to resume")
    ] = Path("sweep"),
    workers: Annotated[
        int,
        typer.Option(
            help="points run at once (Ray actors on this machine, one core each; 1: in this process)",
            min=1,
        ),
    ] = 1,
    ray_address: Annotated[
        str | None,
        typer.Option(
            "--ray",
            help="address of a Ray cluster to run the points on (e.g. auto or ray://host:10001)",
        ),
    ] = None,
) -> None:
    """Run a scenario at every point of a parameter grid: one run directory per point under
    OUT/points/, and OUT/sweep.parquet (and .csv) with each point's headline metrics (mean,
    95% CI). Rerunning with the same arguments skips finished points. Example: society sweep
    network-game --grid b=1.2,1.5,1.8 --grid update=fermi,imitation --set population=400
    --replicates 5 --seed 1 --workers 4 --out sweeps/b"""
    from sim_core.experiment import load_config_file

    values: dict[str, Any] = {}
    if config is not None:
        values.update(load_config_file(config))
    values.update(parse_set(set_ or []))
    points = parse_grid(grid or [])
    registry.config_class(scenario)  # unknown scenario: one-line error before heavy imports
    _check_out(out)
    result = registry.sweep(
        scenario, points, out=out, config=values, seed=seed, replicates=replicates, random=random,
        workers=workers, ray_address=ray_address, progress=print,
    )  # fmt: skip
    n = len(result.ran) + len(result.skipped)
    print(
        f"{n} point(s): {len(result.ran)} run, {len(result.skipped)} already finished, {len(result.failed)} failed"
    )
    print(f"table: {out / 'sweep.parquet'}")
    if result.failed:
        print(
            f"error: {len(result.failed)} point(s) failed (rerun the same command to retry them): {', '.join(result.failed)}",
            file=sys.stderr,
        )
        raise typer.Exit(1)


@app.command("scale")
def scale_cmd(
    scenario: Annotated[str, typer.Argument(help="scenario name (see `society list`)")],
    population: Annotated[
        str,
        typer.Option("--population", help="population sizes, comma-separated, e.g. 1e3,1e4,1e5"),
    ],
    set_: Annotated[
        list[str] | None, typer.Option("--set", help="fixed parameter KEY=VALUE (repeatable)")
    ] = None,
    steps: Annotated[
        int | None,
        typer.Option(
            help="steps per run (default: the scenario's); runs also take 2x this to get the marginal cost of a step",
            min=1,
        ),
    ] = None,
    seed: Annotated[int, typer.Option(help="root random seed", min=0, max=MAX_SEED)] = 0,
    marginal: Annotated[
        bool,
        typer.Option(
            "--marginal/--no-marginal",
            help="also run 2x steps and report the marginal time per step",
        ),
    ] = True,
    population_field: Annotated[
        str | None,
        typer.Option(
            "--population-field",
            help="parameter that sets the number of agents (default: population)",
        ),
    ] = None,
    steps_field: Annotated[
        str | None,
        typer.Option(
            "--steps-field",
            help="parameter that sets the number of steps (default: steps, days, rounds or periods)",
        ),
    ] = None,
    out: Annotated[
        Path, typer.Option(help="directory for scale.parquet, scale.csv, scale.png, scale.json")
    ] = Path("scale"),
) -> None:
    """Scaling experiment: one run per population size, each in a fresh process; writes time
    per step (plain and marginal), peak memory per agent, LLM tokens and cost per agent-step,
    a log-log plot and the fitted exponent. Example: society scale network-game --population
    1e3,1e4,1e5 --steps 20 --set update=fermi --out scale/ng"""
    sizes = [parse_value(v) for v in population.split(",")]
    values = parse_set(set_ or [])
    _check_out(out)
    result = registry.scale(
        scenario, sizes, out=out, config=values, steps=steps, seed=seed, marginal=marginal,
        population_field_name=population_field, steps_field_name=steps_field, progress=print,
    )  # fmt: skip
    cols = [
        "population",
        "status",
        "time_per_step_s",
        "marginal_time_per_step_s",
        "bytes_per_agent",
    ]
    print(result.table[cols].to_string(index=False))
    print(f"time exponent ({result.time_basis} ~ N^k): k = {result.time_exponent:.3f}")
    print(f"memory exponent (peak RSS ~ N^k): k = {result.memory_exponent:.3f}")
    print(f"table: {out / 'scale.parquet'}; plot: {out / 'scale.png'}")
    if (result.table["status"] == "failed").any():
        print("error: some sizes failed; see the error column of scale.csv", file=sys.stderr)
        raise typer.Exit(1)


@app.command("serve")
def serve_cmd(
    run_dirs: Annotated[
        list[Path] | None, typer.Argument(help="run directories (default: every run under ./runs)")
    ] = None,
    port: Annotated[
        int | None, typer.Option(help="port on 127.0.0.1 (default: a free one, printed on start)")
    ] = None,
) -> None:
    """Serve a live dashboard of running and finished runs until Ctrl-C: status, headline
    metrics, charts of the recorded metrics updated as the runs write them, the network view
    and artifact lineage where a run has them. One self-contained page; works offline.

    Example:

    \b
        society run network-game --set population=2000 --set steps=20000 --out runs/ng &
        society serve runs/ng --port 8765    # then open http://127.0.0.1:8765/
    """
    from sim_core.dashboard import serve

    serve(run_dirs or None, port=port)


llm_app = typer.Typer(help="The embedded local model.", no_args_is_help=True)
app.add_typer(llm_app, name="llm")


@llm_app.command("serve")
def llm_serve(
    port: Annotated[
        int | None, typer.Option(help="port on 127.0.0.1 (default: a free one)")
    ] = None,
) -> None:
    """Serve the embedded local model (OpenAI-compatible) until Ctrl-C.

    Example (it prints the model string and api_base to use it with):

    \b
        society llm serve --port 8081
    """
    from society.llm import local

    try:
        local.require_available()
    except local.LocalModelUnavailable as exc:
        raise ConfigError(str(exc)) from None
    local.serve(port=port)


def _print_summary(scenario: str, result: Any) -> None:
    from rich.console import Console
    from rich.table import Table

    s = result.summary
    table = Table(
        title=f"{scenario}: seed {s['seed']}, {s['replicates']} replicate(s), {s['wall_time_s']:.1f} s"
    )
    for col in ("metric", "mean", "95% CI", "replicates"):
        table.add_column(col)
    for name, m in s["metrics"].items():
        lo, hi = m["ci95"]
        table.add_row(name, f"{m['mean']:.4g}", f"[{lo:.4g}, {hi:.4g}]", str(len(m["values"])))
    console = Console()
    console.print(table)
    for note in s.get("notes", []):  # what each kind of agent achieved (skill-society)
        console.print(note, markup=False)
    llm = s.get("llm")
    if llm and llm["failures"]:
        kinds = ", ".join(f"{k} {n}" for k, n in sorted(llm["failure_kinds"].items()))
        console.print(
            f"LLM calls: {llm['failures']} of {llm['requests']} requests failed ({kinds}); "
            f"{llm['fallbacks']} answered by the fallback",
            markup=False,
        )
    if llm and llm.get("retries"):
        console.print(f"LLM calls retried: {llm['retries']} (429, 5xx, timeouts...)", markup=False)
    if s.get("stop_reason"):
        console.print(f"stopped early: {s['stop_reason']}", markup=False)
    console.print(f"status: {s['status']}")
    console.print(f"run directory: {result.run_dir}")


def _report_failures(s: dict[str, Any]) -> bool:
    """LLM failures on stderr (stdout may go to a file nobody reads); True when degraded."""
    llm = s.get("llm")
    if llm and llm["failures"]:
        kinds = ", ".join(f"{k} {n}" for k, n in sorted(llm["failure_kinds"].items()))
        print(
            f"warning: {llm['failures']} of {llm['requests']} LLM requests failed ({kinds})",
            file=sys.stderr,
        )
    for reason in s.get("degraded", []):
        print(f"degraded: {reason}", file=sys.stderr)
    if s.get("first_failure") and (s.get("degraded") or (llm and llm["failures"])):
        print(f"first failure: {s['first_failure']}", file=sys.stderr)
    return s["status"] == "degraded"


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt  # SIGTERM as Ctrl-C until a run installs its own handlers


def main(argv: list[str] | None = None) -> int:
    """Entry point: every user error becomes one line on stderr and exit status 2. SIGTERM
    is Ctrl-C while it runs (never a silent death with status 143)."""
    if threading.current_thread() is not threading.main_thread():
        return _main(argv)
    old = signal.signal(signal.SIGTERM, _interrupt)
    try:
        return _main(argv)
    finally:
        signal.signal(signal.SIGTERM, old)


def _main(argv: list[str] | None) -> int:
    try:
        try:
            rc = app(args=argv, standalone_mode=False, prog_name="society")
        except RuntimeError as exc:  # an event handler's user-facing error: report its cause
            from sim_core.scheduler import EventError  # imported by then: no start-up cost

            cause = exc.__cause__
            if isinstance(exc, EventError) and isinstance(cause, ConfigError | RunError):
                raise cause from None
            raise
    except ConfigError as exc:
        _fail(str(exc))
    except RunError as exc:  # e.g. the local model server died: its cause, not a traceback
        print(f"error: {' '.join(str(exc).splitlines())}", file=sys.stderr)
        raise SystemExit(1) from None
    except typer.Abort:
        _fail("aborted")
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        raise SystemExit(EXIT_INTERRUPTED) from None
    except typer.TyperException as exc:  # click-style usage errors (bad option, missing arg)
        fmt = getattr(exc, "format_message", None)
        _fail(" ".join((fmt() if fmt else str(exc)).split()))
    return rc if isinstance(rc, int) else 0


if __name__ == "__main__":
    sys.exit(main())
