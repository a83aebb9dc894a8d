"""The ``society`` command: a thin layer over :mod:`scenarios` (the Python API comes first).

Exit status: 0 a completed (or stopped) run; 2 bad input, one line on stderr naming what is
wrong and what is accepted; 3 a degraded run (too many LLM decisions were fallbacks for
failed calls; ``--accept-degraded`` exits 0); 1 a run that could not go on (one line, e.g.
the local model server died) or an unexpected error. Heavy imports (jax, the scenario
models) happen only in ``run``.
"""

from __future__ import annotations

import os
import sys
import tomllib
from pathlib import Path
from typing import Annotated, Any

import typer

import scenarios
from sim_core.errors import ConfigError, RunError

EXIT_DEGRADED = 3

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
        key, sep, raw = item.partition("=")
        key = key.strip().replace("-", "_")
        if not sep or not key:
            raise ConfigError(f"--set expects KEY=VALUE, got '{item}'")
        try:
            value = tomllib.loads(f"v = {raw.strip()}")["v"]
        except (tomllib.TOMLDecodeError, RecursionError):  # not a literal, or nested too deep
            value = raw.strip()
        out[key] = value
    return out


@app.command("list")
def list_cmd() -> None:
    """List the scenarios, one line each."""
    width = max(len(n) for n in scenarios.names())
    for name in scenarios.names():
        print(f"{name:<{width}}  {scenarios.summary_line(name)}")


@app.command("describe")
def describe_cmd(scenario: Annotated[str, typer.Argument(help="scenario name")]) -> None:
    """Show a scenario's parameters: type, default and meaning."""
    from rich.console import Console
    from rich.table import Table

    rows = scenarios.describe(scenario)
    table = Table(title=f"{scenario}: {scenarios.summary_line(scenario)}", show_lines=False)
    for col in ("parameter", "type", "default", "meaning"):
        table.add_column(col, overflow="fold")
    for r in rows:
        table.add_row(r["name"], r["type"], r["default"], r["description"])
    Console(width=max(120, Console().width)).print(table)


@app.command("run")
def run_cmd(
    scenario: Annotated[str, typer.Argument(help="scenario name (see `society list`)")],
    set_: Annotated[list[str] | None, typer.Option("--set", help="parameter KEY=VALUE (repeatable)")] = None,
    config: Annotated[Path | None, typer.Option("--config", help="TOML file of parameters")] = None,
    seed: Annotated[int, typer.Option(help="root random seed", min=0, max=MAX_SEED)] = 0,
    replicates: Annotated[int, typer.Option(help="independent replicates", min=1, max=MAX_REPLICATES)] = 1,
    out: Annotated[Path | None, typer.Option(help="run directory (default runs/<scenario>-<time>)")] = None,
    llm: Annotated[str | None, typer.Option(help="litellm model string for LLM agents (default: 'local', the embedded model)")] = None,
    api_base: Annotated[str | None, typer.Option("--api-base", help="OpenAI-compatible server URL")] = None,
    max_fallback_rate: Annotated[float, typer.Option("--max-fallback-rate", help="the run is 'degraded' (exit 3) when more than this share of an LLM cohort's decisions were fallbacks for failed calls")] = 0.1,
    accept_degraded: Annotated[bool, typer.Option("--accept-degraded", help="exit 0 even when the run is degraded (the summary still says so)")] = False,
) -> None:
    """Run a scenario and write its run directory."""
    from sim_core.experiment import load_config_file

    values: dict[str, Any] = {}
    if config is not None:
        values.update(load_config_file(config))
    values.update(parse_set(set_ or []))
    scenarios.config_class(scenario)  # unknown scenario: one-line error before heavy imports
    _check_out(out)
    result = scenarios.run(
        scenario, seed=seed, replicates=replicates, out=out, config=values, llm=llm, api_base=api_base,
        max_fallback_rate=max_fallback_rate,
    )
    _print_summary(scenario, result)
    if _report_failures(result.summary) and not accept_degraded:
        raise typer.Exit(EXIT_DEGRADED)


@app.command("replay")
def replay_cmd(
    run_dir: Annotated[Path, typer.Argument(help="a finished run's directory")],
    out: Annotated[Path | None, typer.Option(help="directory of the replay (default runs/<scenario>-<time>)")] = None,
) -> None:
    """Run a finished run again from its directory: same scenario, config and seed, every LLM
    reply from its llm-cache.sqlite (no server, no network, no API key); the metrics are the
    same. Example: society replay runs/skill-society-20261203-081500-s1"""
    from sim_core.report import load_run

    summary = load_run(run_dir)
    _check_out(out)
    cache = run_dir / "llm-cache.sqlite"
    result = scenarios.run(
        summary["scenario"], seed=summary["seed"], replicates=summary.get("replicates", 1), out=out,
        config=summary["config"], llm=summary.get("options", {}).get("llm"),
        replay=cache if cache.exists() else None,
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
    run_dirs: Annotated[list[Path], typer.Argument(help="one run directory, or several to compare")],
    out: Annotated[Path | None, typer.Option(help="HTML file (default: report.html in the first run directory)")] = None,
) -> None:
    """Write one self-contained HTML report (headline table with intervals, every plot, the
    config, versions, LLM usage and failures) that opens offline; several runs side by side.
    Example: society report runs/skill-society-A runs/skill-society-B --out compare.html"""
    from sim_core.report import write_report

    print(f"report: {write_report(run_dirs, out)}")


llm_app = typer.Typer(help="The embedded local model.", no_args_is_help=True)
app.add_typer(llm_app, name="llm")


@llm_app.command("serve")
def llm_serve(port: Annotated[int | None, typer.Option(help="port on 127.0.0.1 (default: a free one)")] = None) -> None:
    """Serve the embedded local model (OpenAI-compatible) until Ctrl-C."""
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
    table = Table(title=f"{scenario}: seed {s['seed']}, {s['replicates']} replicate(s), {s['wall_time_s']:.1f} s")
    for col in ("metric", "mean", "95% CI", "replicates"):
        table.add_column(col)
    for name, m in s["metrics"].items():
        lo, hi = m["ci95"]
        table.add_row(name, f"{m['mean']:.4g}", f"[{lo:.4g}, {hi:.4g}]", str(len(m["values"])))
    console = Console()
    console.print(table)
    llm = s.get("llm")
    if llm and llm["failures"]:
        kinds = ", ".join(f"{k} {n}" for k, n in sorted(llm["failure_kinds"].items()))
        console.print(
            f"LLM calls: {llm['failures']} of {llm['requests']} requests failed ({kinds}); "
            f"{llm['fallbacks']} answered by the fallback",
            markup=False,
        )
    if s.get("stop_reason"):
        console.print(f"stopped early: {s['stop_reason']}", markup=False)
    console.print(f"status: {s['status']}")
    console.print(f"run directory: {result.run_dir}")


def _report_failures(s: dict[str, Any]) -> bool:
    """LLM failures on stderr (stdout may go to a file nobody reads); True when degraded."""
    llm = s.get("llm")
    if llm and llm["failures"]:
        kinds = ", ".join(f"{k} {n}" for k, n in sorted(llm["failure_kinds"].items()))
        print(f"warning: {llm['failures']} of {llm['requests']} LLM requests failed ({kinds})", file=sys.stderr)
    for reason in s.get("degraded", []):
        print(f"degraded: {reason}", file=sys.stderr)
    if s.get("first_failure") and (s.get("degraded") or (llm and llm["failures"])):
        print(f"first failure: {s['first_failure']}", file=sys.stderr)
    return s["status"] == "degraded"


def main(argv: list[str] | None = None) -> int:
    """Entry point: every user error becomes one line on stderr and exit status 2."""
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
    except typer.TyperException as exc:  # click-style usage errors (bad option, missing arg)
        fmt = getattr(exc, "format_message", None)
        _fail(" ".join((fmt() if fmt else str(exc)).split()))
    return rc if isinstance(rc, int) else 0


if __name__ == "__main__":
    sys.exit(main())
