"""The run's LLM client, opened from a scenario's options (``--llm``, ``--api-base``).

Scenarios call :func:`open_client` and never build configs themselves, so every run gets
the same defaults: the embedded local model when no model is named, a response cache in
the run directory (which makes the run replayable offline), bad options reported as
one-line config errors, and, when the client closes, its failures and fallbacks reported to
the run (:func:`report_to_run`), which marks a run with too many of them ``degraded``.
"""

from __future__ import annotations

import os
import sys
from collections.abc import AsyncIterator, Mapping
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import Any

import pydantic

from sim_core.errors import ConfigError
from sim_core.experiment import RunContext, current_run
from sim_core.recorder import Recorder
from society.llm import local
from society.llm.client import LLMClient
from society.llm.config import LLMConfig

# Run options (society run's flags) that become LLMConfig fields, and the flag of each.
OPTION_FIELDS = {
    "llm": "model",
    "api_base": "api_base",
    "api_key_env": "api_key_env",
    "concurrency": "concurrency",
    "llm_shards": "shards",
}
_FLAGS = {
    "model": "--llm",
    "api_base": "--api-base",
    "api_key_env": "--api-key-env",
    "concurrency": "--concurrency",
    "shards": "--llm-shards",
}


def check_key_env(name: str | None) -> None:
    """A one-line ConfigError when ``--api-key-env NAME`` names an unset variable: every
    call would be refused, so say so before the run starts (the value is never shown)."""
    if name and not os.environ.get(name):
        raise ConfigError(
            f"--api-key-env {name}: the environment variable {name} is not set (or empty); export the API key in it"
        )


def config_from_options(
    options: Mapping[str, Any], *, run_dir: Path | None = None, **overrides: Any
) -> LLMConfig:
    """An :class:`LLMConfig` for a non-local model from run options and scenario overrides."""
    values: dict[str, Any] = {"model": options.get("llm"), "api_base": options.get("api_base")}
    values |= {
        field: options[k]
        for k, field in OPTION_FIELDS.items()
        if options.get(k) is not None and k != "llm"
    }
    values |= overrides
    if run_dir is not None and "cache_path" not in overrides:
        values["cache_path"] = Path(run_dir) / "llm-cache.sqlite"
    try:
        config = LLMConfig(**values)
    except pydantic.ValidationError as exc:
        err = exc.errors()[0]
        field = _FLAGS.get(str(err["loc"][0]) if err["loc"] else "", "llm")
        raise ConfigError(f"invalid value for '{field}': {err['msg']}") from None
    if not config.replay:
        check_key_env(options.get("api_key_env"))
    return config


@asynccontextmanager
async def open_client(
    options: Mapping[str, Any],
    *,
    run_dir: Path | None = None,
    needed: bool = True,
    **overrides: Any,
) -> AsyncIterator[LLMClient | None]:
    """Open the run's client; with no ``llm`` option (or ``llm="local"``) start the embedded
    local model for the duration and stop it afterwards. ``needed=False`` (a run without LLM
    agents) yields None and starts nothing. A local server that dies makes the next call
    that cannot connect raise :class:`local.LocalModelDied`, naming the signal."""
    if not needed:
        yield None
        return
    async with AsyncExitStack() as stack:
        model = options.get("llm") or local.LOCAL_MODEL
        liveness = None
        replay = options.get("replay")
        if replay is not None:  # answers only from a recorded run's cache: no server, no key
            if not Path(replay).is_file():
                raise ConfigError(
                    f"replay: the run's LLM cache {replay} is missing; a replay answers only from it "
                    "and never calls a model"
                )
            fixed = {**overrides, "cache_path": Path(replay), "replay": True}
            if local.is_local_model(model):
                cfg = local.local_config("http://127.0.0.1:0/v1", **fixed)
            else:  # no server, no key: nothing of the original endpoint is used
                cfg = config_from_options({"llm": options.get("llm")}, **fixed)
        elif local.is_local_model(model):
            try:
                local.require_available()
            except local.LocalModelUnavailable as exc:
                raise ConfigError(f"--llm {model}: {exc}") from None
            server = local.LocalModel()
            # Said at once: the run is silent while the model loads.
            print(
                f"starting the embedded local model ({local.LOCAL_MODEL}): usually 5-30 s, "
                f"at most {server.startup_timeout_s:g} s",
                file=sys.stderr,
                flush=True,
            )
            server = await stack.enter_async_context(server)
            extra: dict[str, Any] = (
                {"cache_path": Path(run_dir) / "llm-cache.sqlite"} if run_dir is not None else {}
            )
            for k in ("concurrency", "llm_shards"):
                if options.get(k) is not None:
                    extra[OPTION_FIELDS[k]] = options[k]
            cfg = server.config(**{**extra, **overrides})
            liveness = server.check_alive
        else:
            cfg = config_from_options(options, run_dir=run_dir, **overrides)
        client = await stack.enter_async_context(LLMClient(cfg, liveness=liveness))
        watch_progress(client)
        yield client
        report_to_run(client)


def progress_section(client: LLMClient) -> dict[str, Any]:
    """The client's part of the run's live progress: calls in flight and done, tokens, cost."""
    total = client.usage.total
    return {
        "in_flight": client.in_flight,
        "requests": int(total["requests"]),
        "network_calls": int(total["network_calls"]),
        "tokens": int(total["tokens"]),
        "cost_usd": float(total["cost_usd"]),
        "failures": int(total["failures"]),
    }


def watch_progress(client: LLMClient, ctx: RunContext | None = None) -> None:
    """Publish the client's use in the run's live progress (``llm`` section of
    progress.json, the `society run` progress bar); :func:`open_client` calls it."""
    ctx = ctx if ctx is not None else current_run()
    if ctx is not None and ctx.progress is not None:
        ctx.progress.add_source("llm", lambda: progress_section(client))


def report_to_run(client: LLMClient, ctx: RunContext | None = None) -> None:
    """Report a client's failures to the run (``ctx``, default: the current one): per
    cohort, decisions and fallbacks (requests whose call failed, budget stops excluded:
    those are a stop the user asked for) with the first failure's message, and the summary
    section ``llm``: totals and failures by kind. :func:`open_client` calls it; a
    scenario that builds its own LLMClient calls it once, before closing the client."""
    ctx = ctx if ctx is not None else current_run()
    if ctx is None:
        return
    usage = client.usage
    first = usage.first_error
    named = {"requests": 0.0, "failures": 0.0, "budget_stopped": 0.0}
    for cohort, values in sorted(usage.by_cohort.items()):
        decisions = values["requests"] - values["budget_stopped"]
        ctx.count_fallbacks(cohort, int(decisions), int(values["failures"]), first)
        for k in named:
            named[k] += values[k]
    rest = {k: usage.total[k] - v for k, v in named.items()}  # requests without a cohort
    if rest["requests"] > 0:
        decisions = rest["requests"] - rest["budget_stopped"]
        ctx.count_fallbacks("(no cohort)", int(decisions), int(rest["failures"]), first)
    section = ctx.report.setdefault(
        "llm",
        {"requests": 0, "failures": 0, "fallbacks": 0, "budget_stopped": 0, "failure_kinds": {}},
    )
    for k in ("requests", "failures", "fallbacks", "budget_stopped"):
        section[k] += int(usage.total[k])
    # Calls tried again (429, 5xx, timeouts...): an I/O count, so a summary figure and not a
    # metric row (a replay from the cache retries nothing, and its rows must be the same).
    section["retries"] = section.get("retries", 0) + int(usage.total["retries"])
    for kind, n in usage.failure_kinds.items():
        section["failure_kinds"][kind] = section["failure_kinds"].get(kind, 0) + n


def record_usage(
    recorder: Recorder, client: LLMClient, time: float, *, agents_per_replicate: int | None = None
) -> None:
    """The client's accounting as metric rows (``llm_requests``, ``llm_tokens``, ...).

    Totals and per-cohort rows are run-wide (replicate -1; label ``cohort`` on the latter).
    Scenarios that number agents ``replicate * N + seat`` pass ``agents_per_replicate=N`` to
    also record per-agent rows under their replicate with label ``agent`` = seat; otherwise
    per-agent rows stay in the client. Rows go only under labels the scenario declares
    (``agent``, ``cohort``); a study that declares neither gets the run-wide totals.
    """
    declared = recorder.labels or {}
    for row in client.usage.rows():
        if "agent" in row:
            if agents_per_replicate is not None and "agent" in declared:
                rep, seat = divmod(int(row["agent"]), agents_per_replicate)
                recorder.record(time, row["metric"], row["value"], replicate=rep, agent=seat)
        elif "cohort" in row:
            if "cohort" in declared:
                recorder.record(
                    time, row["metric"], row["value"], replicate=-1, cohort=row["cohort"]
                )
        else:
            recorder.record(time, row["metric"], row["value"], replicate=-1)
