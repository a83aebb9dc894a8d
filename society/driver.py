"""The one driver beneath every scenario: replicate batches, the LLM session, budget stops
and usage rows, written once.

A scenario's ``run`` is then its own rules only::

    def run(self, cfg, ctx):
        async def batch(reps, client):          # one vectorised batch of replicates
            ...                                  # build the world, step it on a Scheduler
            return {"cooperation": values}, end  # headline per replicate, last moment
        return drive(cfg, ctx, batch, llm=uses_llm(cfg))

``cfg`` carries the shared LLM fields (society.fields.LLMFields). A batch that spends the
run's LLM budget stops through :func:`budget_reached`, which words the stop the same way in
every scenario; later batches are then not started.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import numpy as np

from sim_core.experiment import RunContext
from society.llm.client import LLMClient
from society.llm.session import open_client, record_usage

Batch = Callable[[np.ndarray, LLMClient | None], Awaitable[tuple[Mapping[str, Any], float]]]
"""``batch(replicates, client) -> (headline values per replicate, last moment reached)``."""


def drive(cfg: Any, ctx: RunContext, batch: Batch, **options: Any) -> dict[str, np.ndarray]:
    """:func:`adrive` in its own event loop: what a scenario's (synchronous) ``run`` calls."""
    return asyncio.run(adrive(cfg, ctx, batch, **options))


async def adrive(
    cfg: Any,
    ctx: RunContext,
    batch: Batch,
    *,
    llm: bool,
    agents_per_replicate: int | None = None,
    batches: list[np.ndarray] | None = None,
) -> dict[str, np.ndarray]:
    """Run ``batch`` over the run's replicate batches (in order, stopping after a batch that
    set ``ctx.stop_reason``) inside one LLM session when ``llm``; return every headline
    metric with one value per replicate (NaN for replicates never run). Usage rows are
    recorded at the last moment reached (per agent when ``agents_per_replicate`` is given).
    ``batches`` replaces the run's replicate batches (e.g. smaller ones to fit memory)."""
    out: dict[str, np.ndarray] = {}
    end = 0.0
    session = open_client(
        ctx.options,
        run_dir=ctx.run_dir,
        needed=llm,
        max_tokens=cfg.llm_max_tokens,
        temperature=cfg.llm_temperature,
        budget_tokens=cfg.llm_budget_tokens,
    )
    async with session as client:
        if client is not None and ctx.checkpoints is not None:  # a resumed run counts on

            def put_usage(saved: dict[str, Any]) -> None:
                client.usage.load_state_dict(saved)
                client.check_budget()

            ctx.checkpoints.keep("llm_usage", client.usage.state_dict, put_usage)
        for reps in ctx.replicate_batches() if batches is None else batches:
            values, last = await batch(reps, client)
            for k, v in values.items():
                out.setdefault(k, np.full(ctx.replicates, np.nan))[reps] = v
            end = max(end, float(last))
            # (a resumed run whose budget was spent before the kill stops here too)
            if ctx.stop_reason or budget_reached(client, ctx):
                break
        if client is not None:
            record_usage(ctx.recorder, client, end, agents_per_replicate=agents_per_replicate)
    return out


def budget_reached(client: LLMClient | None, ctx: RunContext, sim: Any = None) -> bool:
    """True once the run's LLM budget is spent: then the run's stop reason is set (one
    message for every scenario) and ``sim`` (a Scheduler), if given, stops."""
    if client is None or not client.budget_exhausted:
        return False
    ctx.stop_reason = ctx.stop_reason or client.budget_message or "LLM budget reached"
    if sim is not None:
        sim.stop(ctx.stop_reason)
    return True
