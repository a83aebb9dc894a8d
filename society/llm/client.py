"""The one LLM client of the framework: concurrent, cached, budgeted and replayable calls.

A moment's LLM requests go to ``complete_many`` together: identical requests are merged into
one call (several samples of one prompt into one call with ``n``), everything is in flight at
once under a global and a per-model limit, failures are retried with backoff and finally turn
into the request's fallback, structured replies are validated (with one repair request), and
tokens and cost are accounted per agent, cohort and run against an optional budget.

Accounting counts a cached reply at its recorded usage, so a replay of a run (same requests,
cache only) produces the same metric rows and stops at the same moment as the original.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import random
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, ValidationError

from sim_core.errors import RunError
from sim_core.experiment import current_run
from society.llm.cache import CacheEntry, ResponseCache, request_key
from society.llm.config import Endpoint, LLMConfig
from society.llm.degenerate import RepeatTracker, classify
from society.llm.transports import FastTransport, LiteLLMTransport, RawReply, TransportError


class ReplayMissError(RunError, LookupError):
    """A replay needed a reply that the cache does not hold."""


@dataclass(frozen=True)
class Request:
    """One agent's (or archetype's) request in a moment."""

    messages: list[dict[str, Any]]
    schema: type[BaseModel] | None = None
    fallback: BaseModel | dict[str, Any] | None = None
    sample: int = 0
    agent: int | None = None
    cohort: str | None = None


@dataclass(frozen=True)
class Completion:
    """The outcome of a request; ``ok`` is False when the fallback (or nothing) stands in."""

    text: str
    parsed: BaseModel | None
    ok: bool
    used_fallback: bool = False
    error: str | None = None
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0
    cached: bool = False
    latency_s: float = 0.0
    budget_stopped: bool = False
    repaired: bool = False
    degenerate: str | None = None  # a valid reply that says nothing (society.llm.degenerate)


# Metrics of the trajectory: identical in a replay. "requests", "failures", "fallbacks",
# "degenerate" and "budget_stopped" count requests; tokens and cost are shared equally among
# the requests one call served; "dedupe_saved" counts requests served by a call made for
# another request.
LOGICAL_METRICS = (
    "requests",
    "prompts",
    "dedupe_saved",
    "prompt_tokens",
    "completion_tokens",
    "tokens",
    "cost_usd",
    "repairs",
    "failures",
    "fallbacks",
    "degenerate",
    "budget_stopped",
    "unpriced",
)
AGENT_METRICS = ("requests", "tokens", "cost_usd", "failures", "fallbacks")
# Metrics of this execution (they differ between a run and its replay).
IO_METRICS = ("network_calls", "cache_hits", "retries", "network_cost_usd", "latency_s")


# A quoted key cut short by a length limit still gives most of it away: a start of a key at
# least this long is scrubbed too (shorter ones say too little to be worth the false matches).
_KEY_PART_MIN = 12

_KIND_PREFIXES = (
    ("connection error", "connection"),
    ("timeout", "timeout"),
    ("malformed reply", "malformed"),
    ("empty reply", "empty"),
    ("invalid reply", "invalid"),
)


def failure_kind(error: str) -> str:
    """What kind of failure an error message (as kept in a Completion and the cache) is:
    connection, timeout, http_<status>, malformed, empty, invalid (after one repair) or
    other. Read from the message, so a replay from the cache counts the same kinds."""
    error = error.removeprefix("repair failed: ")  # the repair call failed: count its cause
    status = re.match(r"HTTP (\d{3})\b", error)
    if status:
        return f"http_{status.group(1)}"
    for prefix, kind in _KIND_PREFIXES:
        if error.startswith(prefix):
            return kind
    return "other"


class Usage:
    """Accounting of LLM use per agent, per cohort and in total."""

    def __init__(self) -> None:
        self.total: dict[str, float] = dict.fromkeys(LOGICAL_METRICS + IO_METRICS, 0)
        self.by_agent: dict[int, dict[str, float]] = {}
        self.by_cohort: dict[str, dict[str, float]] = {}
        # Failed requests by kind (failure_kind), and the first failure's message: what a
        # user needs to see when a run's LLM agents mostly fell back.
        self.failure_kinds: dict[str, int] = {}
        self.first_error: str | None = None
        # Valid replies that say nothing, by kind, and the first one's text (quoted in a
        # degraded run's reason); ``repeats`` remembers replies to tell "repeated" ones.
        self.degenerate_kinds: dict[str, int] = {}
        self.first_degenerate: str | None = None
        self.repeats = RepeatTracker()

    def state_dict(self) -> dict[str, Any]:
        """The counts as plain data: a run checkpoint keeps them, so a resumed run's usage
        (and its budget) continues from the checkpoint instead of from zero."""
        return {
            "total": dict(self.total), "by_agent": {a: dict(m) for a, m in self.by_agent.items()},
            "by_cohort": {c: dict(m) for c, m in self.by_cohort.items()},
            "failure_kinds": dict(self.failure_kinds), "first_error": self.first_error,
            "degenerate_kinds": dict(self.degenerate_kinds), "first_degenerate": self.first_degenerate,
            "repeats": self.repeats.state_dict(),
        }  # fmt: skip

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.total.update(state["total"])
        self.by_agent = {int(a): dict(m) for a, m in state["by_agent"].items()}
        blank = dict.fromkeys(LOGICAL_METRICS, 0)  # a metric added since the checkpoint
        self.by_cohort = {c: {**blank, **m} for c, m in state["by_cohort"].items()}
        self.failure_kinds = dict(state["failure_kinds"])
        self.first_error = state["first_error"]
        self.degenerate_kinds = dict(state.get("degenerate_kinds", {}))
        self.first_degenerate = state.get("first_degenerate")
        self.repeats.load_state_dict(state.get("repeats", {}))

    def add_failure(self, error: str) -> None:
        """Count one failed request by its kind; keep the first message."""
        kind = failure_kind(error)
        self.failure_kinds[kind] = self.failure_kinds.get(kind, 0) + 1
        if self.first_error is None:
            self.first_error = error

    def add_degenerate(self, kind: str, text: str) -> None:
        """Count one degenerate reply by its kind; keep the first one's text."""
        self.degenerate_kinds[kind] = self.degenerate_kinds.get(kind, 0) + 1
        if self.first_degenerate is None:
            self.first_degenerate = text[:200]

    def add(
        self, metric: str, value: float, *, agent: int | None = None, cohort: str | None = None
    ) -> None:
        self.total[metric] += value
        if agent is not None and metric in AGENT_METRICS:
            self.by_agent.setdefault(agent, dict.fromkeys(AGENT_METRICS, 0))[metric] += value
        if cohort is not None and metric in LOGICAL_METRICS:
            self.by_cohort.setdefault(cohort, dict.fromkeys(LOGICAL_METRICS, 0))[metric] += value

    def rows(self, *, include_io: bool = False) -> list[dict[str, Any]]:
        """Tidy rows ``{"metric", "value"[, "agent"][, "cohort"]}``, metric names prefixed llm_.

        Without ``include_io`` the rows depend only on the requests and their replies, so a
        replay from the cache reproduces them exactly.
        """
        names = LOGICAL_METRICS + (IO_METRICS if include_io else ())
        out: list[dict[str, Any]] = [
            {"metric": f"llm_{m}", "value": float(self.total[m])} for m in names
        ]
        out += [
            {"metric": f"llm_failures.{kind}", "value": float(n)}
            for kind, n in sorted(self.failure_kinds.items())
        ]
        out += [
            {"metric": f"llm_degenerate.{kind}", "value": float(n)}
            for kind, n in sorted(self.degenerate_kinds.items())
        ]
        for cohort in sorted(self.by_cohort):
            values = self.by_cohort[cohort]
            out += [
                {"metric": f"llm_{m}", "value": float(values[m]), "cohort": cohort}
                for m in LOGICAL_METRICS
            ]
        for agent in sorted(self.by_agent):
            values = self.by_agent[agent]
            out += [
                {"metric": f"llm_{m}", "value": float(values[m]), "agent": agent}
                for m in AGENT_METRICS
            ]
        return out


@dataclass
class _Prepared:
    """A request turned into wire parameters and a cache key."""

    key: str
    params: dict[str, Any]
    schema: type[BaseModel] | None
    fallback: BaseModel | None
    fallback_text: str


@dataclass
class _Outcome:
    """What one (request key, sample) came to, shared by every request it served."""

    text: str = ""
    parsed: BaseModel | None = None
    error: str | None = None
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0
    unpriced: int = 0
    repairs: int = 0
    cached: bool = True
    latency_s: float = 0.0
    new_entries: list[tuple[str, int, CacheEntry]] = field(default_factory=list)

    def charge(self, entry: CacheEntry) -> None:
        self.prompt_tokens += entry.prompt_tokens
        self.completion_tokens += entry.completion_tokens
        self.cost_usd += entry.cost_usd
        self.unpriced += int(not entry.priced and entry.error is None)


class LLMClient:
    """Every LLM call of a run goes through one of these.

    Use it as ``async with LLMClient(cfg) as client:`` within one event loop. Several clients
    (one per model) can share one global concurrency limit through ``global_limit``.
    Ordinary failures never raise: they give ``Completion(ok=False, ...)`` with the fallback.
    ``liveness`` (set for the embedded local model) is called after a moment in which a call
    could not connect; it raises when the server is known to be dead, so the run fails with
    that cause instead of falling back on every later request.
    """

    def __init__(
        self,
        config: LLMConfig,
        *,
        global_limit: asyncio.Semaphore | None = None,
        liveness: Callable[[], None] | None = None,
    ):
        if not isinstance(config, LLMConfig):
            raise TypeError(f"config must be an LLMConfig, got {type(config).__name__}")
        self.config = config
        self.usage = Usage()
        self.in_flight = 0  # network calls awaiting a reply now (live progress)
        self.budget_exhausted = False
        self.budget_message: str | None = None
        self._cache = ResponseCache(config.cache_path) if config.cache_path else None
        # Made now, not in the first call: importing litellm blocks for seconds. A replay makes
        # no calls, so it needs no transport (and never imports litellm).
        self._transport, self._pool = None, None
        if config.shards > 1 and not config.replay:  # the calls are made by Ray actors
            from society.llm.shards import ShardPool

            self._pool = ShardPool(config)
        elif not config.replay:
            self._transport = self._make_transport()
        self._global = global_limit or asyncio.Semaphore(config.concurrency)
        self._per_model = (
            asyncio.Semaphore(config.per_model_concurrency)
            if config.per_model_concurrency
            else None
        )
        self._jitter = random.Random(config.seed)  # backoff jitter only, never the trajectory
        self._schemas: dict[type[BaseModel], dict[str, Any]] = {}
        self._liveness = liveness
        self._closed = False

    def __repr__(self) -> str:
        path = "fast" if self.config.uses_fast_path else "litellm"
        return f"LLMClient(model={self.config.model!r}, path={path}, replay={self.config.replay})"

    async def __aenter__(self) -> LLMClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Close the HTTP session and the cache."""
        if self._transport is not None:
            await self._transport.aclose()
            self._transport = None
        if self._cache is not None:
            self._cache.close()
            self._cache = None
        if self._pool is not None:
            await self._pool.aclose()
        self._closed = True

    # -- public calls ----------------------------------------------------------------------
    async def complete(
        self,
        messages: list[dict[str, Any]],
        *,
        schema: type[BaseModel] | None = None,
        fallback: BaseModel | dict[str, Any] | None = None,
        sample: int = 0,
        agent: int | None = None,
        cohort: str | None = None,
    ) -> Completion:
        """One request; see ``complete_many`` for a moment's worth."""
        request = Request(messages, schema, fallback, sample, agent, cohort)
        return (await self.complete_many([request]))[0]

    async def complete_many(self, requests: Sequence[Request]) -> list[Completion]:
        """All requests of one moment, in flight together; completions in request order.

        Identical requests (same model, messages, parameters, schema and sample) make one
        call; requests differing only in ``sample`` make one call with ``n`` samples.
        Once the budget is exhausted every request gets its fallback, flagged budget_stopped.
        """
        if self._closed:
            raise RuntimeError("this LLMClient is closed")
        prepared = [self._prepare(r, i) for i, r in enumerate(requests)]
        if not prepared:
            return []
        if self.budget_exhausted:
            return self._budget_stopped(requests, prepared)
        # Distinct (key, sample) slots, and the samples each key needs, in first-seen order.
        samples_of: dict[str, list[int]] = {}
        first_of: dict[str, _Prepared] = {}
        for r, p in zip(requests, prepared, strict=True):
            wanted = samples_of.setdefault(p.key, [])
            first_of.setdefault(p.key, p)
            if r.sample not in wanted:
                wanted.append(r.sample)
        cached = self._lookup([(k, s) for k, ss in samples_of.items() for s in ss])
        fetched = await self._fetch_sharded(samples_of, first_of, cached)
        outcomes: dict[tuple[str, int], _Outcome] = {}
        results = await asyncio.gather(
            *(self._resolve(first_of[k], ss, cached, fetched) for k, ss in samples_of.items())
        )
        new_entries = []
        for key, per_sample in zip(samples_of, results, strict=True):
            for sample, outcome in per_sample.items():
                outcomes[(key, sample)] = outcome
                new_entries += [(k, s, self.config.model, e) for k, s, e in outcome.new_entries]
        if self._cache is not None:
            self._cache.put_many(new_entries)
        completions = self._account(requests, prepared, outcomes)
        self._report_degenerate(requests, completions)
        self.check_budget()
        if self._liveness is not None and any(
            o.error is not None and failure_kind(o.error) == "connection" for o in outcomes.values()
        ):
            self._liveness()
        return completions

    # -- preparing requests ----------------------------------------------------------------
    def _schema_json(self, schema: type[BaseModel]) -> dict[str, Any]:
        if schema not in self._schemas:
            self._schemas[schema] = schema.model_json_schema()
        return self._schemas[schema]

    def _prepare(self, r: Request, index: int) -> _Prepared:
        if not isinstance(r, Request):
            raise TypeError(f"requests[{index}] must be a Request, got {type(r).__name__}")
        if not isinstance(r.messages, list) or not r.messages:
            raise ValueError(f"requests[{index}].messages must be a non-empty list of dicts")
        if not all(isinstance(m, dict) and "role" in m for m in r.messages):
            raise ValueError(f"requests[{index}].messages must be dicts with 'role' and 'content'")
        if not isinstance(r.sample, int) or r.sample < 0:
            raise ValueError(f"requests[{index}].sample must be an int >= 0, got {r.sample!r}")
        schema = r.schema
        if schema is not None and not (isinstance(schema, type) and issubclass(schema, BaseModel)):
            raise TypeError(f"requests[{index}].schema must be a pydantic model class")
        fallback = self._fallback(r, index)
        cfg = self.config
        params: dict[str, Any] = {
            "messages": r.messages,
            "temperature": cfg.temperature,
            "max_tokens": cfg.max_tokens,
        }
        if cfg.seed is not None:
            params["seed"] = cfg.seed
        if schema is not None:
            js = self._schema_json(schema)
            if cfg.structured_output == "json_schema":
                params["response_format"] = {
                    "type": "json_schema",
                    "json_schema": {"name": schema.__name__, "schema": js},
                }
            elif cfg.structured_output == "json_object":
                params["response_format"] = {"type": "json_object", "schema": js}
            else:
                note = "Reply with only a JSON object that matches this JSON schema: "
                params["messages"] = [
                    *r.messages,
                    {"role": "system", "content": note + json.dumps(js)},
                ]
        key = request_key({"model": cfg.model, **params})
        if fallback is None:
            fallback_text = ""
        elif isinstance(fallback, BaseModel):
            fallback_text = fallback.model_dump_json()
        else:
            fallback_text = json.dumps(fallback)
        parsed_fallback = fallback if isinstance(fallback, BaseModel) else None
        return _Prepared(key, params, schema, parsed_fallback, fallback_text)

    @staticmethod
    def _fallback(r: Request, index: int) -> BaseModel | dict[str, Any] | None:
        fb = r.fallback
        if fb is None:
            return None
        if r.schema is not None:
            if isinstance(fb, r.schema):
                return fb
            if isinstance(fb, dict):
                try:
                    return r.schema.model_validate(fb)
                except ValidationError as e:
                    raise ValueError(
                        f"requests[{index}].fallback does not match schema "
                        f"{r.schema.__name__}: {e.errors()[0]['msg']}"
                    ) from e
            raise TypeError(
                f"requests[{index}].fallback must be a {r.schema.__name__} or a dict, "
                f"got {type(fb).__name__}"
            )
        if not isinstance(fb, BaseModel | dict):
            raise TypeError(f"requests[{index}].fallback must be a pydantic model or a dict")
        return fb

    # -- cache -----------------------------------------------------------------------------
    def _lookup(self, slots: list[tuple[str, int]]) -> dict[tuple[str, int], CacheEntry]:
        if self._cache is None:
            return {}
        found = self._cache.get_many(slots)
        if not self.config.replay:  # outside replay a stored failure is tried again
            found = {k: e for k, e in found.items() if e.error is None}
        elif len(found) < len(slots):
            missing = len(slots) - len(found)
            raise ReplayMissError(
                f"replay: {missing} of {len(slots)} replies are not in the cache "
                f"{self.config.cache_path}; run once without replay to record them"
            )
        return found

    # -- calling ---------------------------------------------------------------------------
    async def _fetch_sharded(
        self,
        samples_of: dict[str, list[int]],
        first_of: dict[str, _Prepared],
        cached: dict[tuple[str, int], CacheEntry],
    ) -> dict[str, tuple[dict[int, CacheEntry], float]] | None:
        """With shards: every call the moment needs, made by the actors at once; key ->
        (entries by sample, seconds taken). None without shards (``_resolve`` calls)."""
        if self._pool is None:
            return None
        missing = {k: [s for s in ss if (k, s) not in cached] for k, ss in samples_of.items()}
        keys = [k for k, ss in missing.items() if ss]
        if not keys:
            return {}
        start = time.perf_counter()
        self.in_flight += len(keys)
        try:
            got = await self._pool.fetch_many(
                [(first_of[k].params, missing[k]) for k in keys], self.usage
            )
        finally:
            self.in_flight -= len(keys)
        took = time.perf_counter() - start
        return {k: (entries, took) for k, entries in zip(keys, got, strict=True)}

    async def _resolve(
        self,
        p: _Prepared,
        samples: list[int],
        cached: dict[tuple[str, int], CacheEntry],
        sharded: dict[str, tuple[dict[int, CacheEntry], float]] | None = None,
    ) -> dict[int, _Outcome]:
        """The outcomes of some samples of one prompt: cached, or fetched in one call (by
        the shards, already, when ``sharded`` holds them)."""
        start = time.perf_counter()
        entries = {s: cached[(p.key, s)] for s in samples if (p.key, s) in cached}
        missing = [s for s in samples if s not in entries]
        if sharded is not None:
            fetched, took = sharded.get(p.key, ({}, 0.0))
            start -= took  # the latency includes the actors' calls
        else:
            fetched = await self._fetch(p.params, missing) if missing else {}
        entries.update(fetched)
        latency = time.perf_counter() - start
        if len(samples) == 1:  # the common case: no extra task per request
            s = samples[0]
            return {s: await self._finish(p, s, entries[s], s in fetched, latency)}
        outs = await asyncio.gather(
            *(self._finish(p, s, entries[s], s in fetched, latency) for s in samples)
        )
        return dict(zip(samples, outs, strict=True))

    async def _fetch(self, params: dict[str, Any], samples: list[int]) -> dict[int, CacheEntry]:
        """Call for ``samples`` of one prompt: one call with n = len(samples), topped up if
        the server returns fewer choices; a final failure is an entry with ``error``."""
        got: dict[int, CacheEntry] = {}
        remaining = list(samples)
        while remaining:
            n = len(remaining)
            try:
                reply = await self._call(params if n == 1 else {**params, "n": n})
            except TransportError as e:
                failure = CacheEntry("", 0, 0, 0.0, True, error=self._scrub(str(e)))
                got.update(dict.fromkeys(remaining, failure))
                break
            got.update(zip(remaining, _split(reply, n), strict=False))
            remaining = remaining[len(reply.texts) :]
        return got

    async def _call(self, params: dict[str, Any]) -> RawReply:
        """One logical call: retries with backoff on retryable failures, under the limits."""
        if self._pool is not None:  # a repair, made by an actor
            return await self._pool.call(params, self.usage)
        if self._transport is None:
            raise RuntimeError("no transport: the client is closed or in replay mode")
        cfg = self.config
        for attempt in range(cfg.max_retries + 1):
            async with self._per_model or contextlib.nullcontext(), self._global:
                self.usage.total["network_calls"] += 1
                self.in_flight += 1
                try:
                    reply = await self._transport.send(params)
                except TransportError as e:
                    error = e
                else:
                    self.usage.total["network_cost_usd"] += reply.cost_usd
                    return reply
                finally:
                    self.in_flight -= 1
            if not error.retryable or attempt == cfg.max_retries:
                if attempt > 0:
                    raise TransportError(
                        f"{error} (after {attempt + 1} attempts)", retryable=False
                    ) from error
                raise error
            self.usage.total["retries"] += 1
            await asyncio.sleep(self._backoff(attempt, error.retry_after))
        raise AssertionError("unreachable")

    def _scrub(self, text: str) -> str:
        """Remove API keys from an error message (a server may quote the key it refused)
        before it reaches a Completion, the cache or a log; also the start of a key that the
        transports' cut of a long message (300 characters) left behind."""
        envs = [self.config.api_key_env, "OPENAI_API_KEY"]
        envs += [fb.api_key_env for fb in self.config.fallbacks if isinstance(fb, Endpoint)]
        for env in envs:
            key = os.environ.get(env) if env else None
            if not key:
                continue
            text = text.replace(key, "[api key]")
            for n in range(len(key) - 1, _KEY_PART_MIN - 1, -1):  # longest cut-off start first
                if key[:n] in text:
                    text = text.replace(key[:n], "[api key]")
                    break
        return text

    def _backoff(self, attempt: int, retry_after: float | None) -> float:
        cfg = self.config
        if retry_after is not None:  # the server said when; capped so a run cannot stall
            return min(retry_after, cfg.backoff_max_s)
        ceiling = min(cfg.backoff_max_s, cfg.backoff_base_s * 2**attempt)
        return ceiling / 2 + self._jitter.uniform(0, ceiling / 2)  # "equal jitter"

    def _make_transport(self) -> FastTransport | LiteLLMTransport:
        if self.config.uses_fast_path:
            return FastTransport(self.config)
        return LiteLLMTransport(self.config)  # imports litellm, here and only here

    # -- structured output -----------------------------------------------------------------
    async def _finish(
        self, p: _Prepared, sample: int, entry: CacheEntry, fetched: bool, latency: float
    ) -> _Outcome:
        out = _Outcome(cached=not fetched, latency_s=latency)
        out.charge(entry)
        if fetched:
            out.new_entries.append((p.key, sample, entry))
        if entry.error is not None:
            out.error = entry.error
            return out
        out.text = entry.text
        if p.schema is None:
            return out
        parsed, problem = _parse(entry.text, p.schema)
        if parsed is not None:
            out.parsed = parsed
            return out
        # One repair request that quotes the validation error, then the fallback.
        repair_params = {
            **p.params,
            "messages": [
                *p.params["messages"],
                {"role": "assistant", "content": entry.text},
                {
                    "role": "user",
                    "content": (
                        f"Your reply was not valid: {problem}. Reply again with only a JSON "
                        f"object that matches the {p.schema.__name__} schema."
                    ),
                },
            ],
        }
        repair_key = request_key({"model": self.config.model, **repair_params})
        out.repairs = 1
        stored = self._lookup([(repair_key, sample)]).get((repair_key, sample))
        if stored is None:
            start = time.perf_counter()
            stored = (await self._fetch(repair_params, [sample]))[sample]
            out.latency_s += time.perf_counter() - start
            out.cached = False
            out.new_entries.append((repair_key, sample, stored))
        out.charge(stored)
        if stored.error is not None:
            out.error = f"repair failed: {stored.error}"
            return out
        out.text = stored.text
        parsed, problem = _parse(stored.text, p.schema)
        if parsed is None:
            out.error = f"invalid reply after one repair: {problem}"
        out.parsed = parsed
        return out

    # -- accounting ------------------------------------------------------------------------
    def _account(
        self,
        requests: Sequence[Request],
        prepared: list[_Prepared],
        outcomes: dict[tuple[str, int], _Outcome],
    ) -> list[Completion]:
        """Charge each call's usage once to the total and in equal shares to the requests it
        served; iterate in request order so float sums are identical in a replay."""
        served: dict[tuple[str, int], int] = {}
        for r, p in zip(requests, prepared, strict=True):
            served[(p.key, r.sample)] = served.get((p.key, r.sample), 0) + 1
        add = self.usage.add
        seen_keys: set[str] = set()
        seen_slots: set[tuple[str, int]] = set()
        degenerate: dict[tuple[str, int], str | None] = {}
        completions = []
        for r, p in zip(requests, prepared, strict=True):
            slot = (p.key, r.sample)
            o = outcomes[slot]
            share = 1.0 / served[slot]
            who = {"agent": r.agent, "cohort": r.cohort}
            add("requests", 1, **who)
            if p.key in seen_keys:
                add("dedupe_saved", 1, cohort=r.cohort)
            else:
                seen_keys.add(p.key)
                add("prompts", 1, cohort=r.cohort)
            tokens = o.prompt_tokens + o.completion_tokens
            if slot not in seen_slots:
                seen_slots.add(slot)
                self.usage.total["prompt_tokens"] += o.prompt_tokens
                self.usage.total["completion_tokens"] += o.completion_tokens
                self.usage.total["tokens"] += tokens
                self.usage.total["cost_usd"] += o.cost_usd
                self.usage.total["repairs"] += o.repairs
                self.usage.total["unpriced"] += o.unpriced
                self.usage.total["cache_hits"] += int(o.cached)
                self.usage.total["latency_s"] += o.latency_s
            for metric, value in (
                ("prompt_tokens", o.prompt_tokens * share),
                ("completion_tokens", o.completion_tokens * share),
                ("tokens", tokens * share),
                ("cost_usd", o.cost_usd * share),
                ("repairs", o.repairs * share),
                ("unpriced", o.unpriced * share),
            ):
                self._add_shares(metric, value, r.agent, r.cohort)
            ok = o.error is None
            if ok and slot not in degenerate:  # judged once per reply, in request order
                seen = self.usage.repeats.see
                repeated = o.parsed is not None and seen(r.cohort or "", p.key, o.parsed)
                degenerate[slot] = classify(o.parsed, o.text, r.messages, p.schema) or (
                    "repeated" if repeated else None
                )
            kind = degenerate.get(slot) if ok else None
            if kind is not None:
                add("degenerate", 1, **who)
                self.usage.add_degenerate(kind, o.text)
            if not ok:
                add("failures", 1, **who)
                self.usage.add_failure(o.error)
                if p.fallback is not None or p.fallback_text:
                    add("fallbacks", 1, **who)
            completions.append(
                Completion(
                    text=o.text if ok else p.fallback_text,
                    parsed=o.parsed if ok else p.fallback,
                    ok=ok,
                    used_fallback=not ok and bool(p.fallback_text),
                    error=o.error,
                    prompt_tokens=o.prompt_tokens,
                    completion_tokens=o.completion_tokens,
                    cost_usd=o.cost_usd,
                    cached=o.cached,
                    latency_s=o.latency_s,
                    repaired=o.repairs > 0 and ok,
                    degenerate=kind,
                )
            )
        return completions

    @staticmethod
    def _report_degenerate(requests: Sequence[Request], completions: list[Completion]) -> None:
        """Degenerate decisions of this moment, per cohort, to the run in progress (if any):
        they count beside fallbacks towards a ``degraded`` run. Reported as they happen, so
        a run checkpoint holds them with the usage they came from."""
        ctx = current_run()
        if ctx is None:
            return
        per_cohort: dict[str, dict[str, int]] = {}
        example: dict[str, str] = {}
        for r, c in zip(requests, completions, strict=True):
            if c.degenerate is not None:
                cohort = r.cohort or "(no cohort)"
                kinds = per_cohort.setdefault(cohort, {})
                kinds[c.degenerate] = kinds.get(c.degenerate, 0) + 1
                example.setdefault(cohort, c.text[:200])
        for cohort, kinds in per_cohort.items():
            ctx.count_fallbacks(cohort, 0, 0, degenerate=kinds, example=example[cohort])

    def _add_shares(self, metric: str, value: float, agent: int | None, cohort: str | None):
        """Per-agent and per-cohort shares (the total was charged once per call)."""
        usage = self.usage
        if agent is not None and metric in AGENT_METRICS:
            usage.by_agent.setdefault(agent, dict.fromkeys(AGENT_METRICS, 0))[metric] += value
        if cohort is not None:
            usage.by_cohort.setdefault(cohort, dict.fromkeys(LOGICAL_METRICS, 0))[metric] += value

    def check_budget(self) -> None:
        """Set ``budget_exhausted`` (and its message) from the usage so far."""
        cfg, total = self.config, self.usage.total
        if cfg.budget_tokens is not None and total["tokens"] >= cfg.budget_tokens:
            self.budget_message = (
                f"LLM budget reached: {int(total['tokens'])} tokens used, "
                f"budget_tokens={cfg.budget_tokens}; the run stops at this moment boundary"
            )
        elif cfg.budget_usd is not None and total["cost_usd"] >= cfg.budget_usd:
            self.budget_message = (
                f"LLM budget reached: ${total['cost_usd']:.6f} spent, "
                f"budget_usd={cfg.budget_usd}; the run stops at this moment boundary"
            )
        self.budget_exhausted = self.budget_message is not None

    def _budget_stopped(
        self, requests: Sequence[Request], prepared: list[_Prepared]
    ) -> list[Completion]:
        out = []
        for r, p in zip(requests, prepared, strict=True):
            self.usage.add("requests", 1, agent=r.agent, cohort=r.cohort)
            self.usage.add("budget_stopped", 1, agent=r.agent, cohort=r.cohort)
            if p.fallback_text:
                self.usage.add("fallbacks", 1, agent=r.agent, cohort=r.cohort)
            out.append(
                Completion(
                    text=p.fallback_text,
                    parsed=p.fallback,
                    ok=False,
                    used_fallback=bool(p.fallback_text),
                    error=self.budget_message,
                    budget_stopped=True,
                )
            )
        return out


def _split(reply: RawReply, n: int) -> list[CacheEntry]:
    """One entry per choice; usage shared so that the entries sum to the call's usage."""
    texts = reply.texts[:n]
    k = len(texts)
    base, extra = divmod(reply.completion_tokens, k)
    return [
        CacheEntry(
            text=t,
            prompt_tokens=reply.prompt_tokens if i == 0 else 0,
            completion_tokens=base + (1 if i < extra else 0),
            cost_usd=reply.cost_usd / k,
            priced=reply.priced,
        )
        for i, t in enumerate(texts)
    ]


_FENCE = re.compile(r"^```(?:json)?\s*(.*?)\s*```$", re.DOTALL)


def _parse(text: str, schema: type[BaseModel]) -> tuple[BaseModel | None, str]:
    """(validated instance, "") or (None, a one-line description of what is wrong)."""
    body = text.strip()
    fenced = _FENCE.match(body)
    if fenced:
        body = fenced.group(1)
    try:
        return schema.model_validate_json(body), ""
    except ValidationError as e:
        first = e.errors()[0]
        where = ".".join(str(x) for x in first.get("loc", ())) or "reply"
        got = first.get("input")
        # The value quoted back: a bound the server's grammar ignored (llama.cpp's ignores
        # number bounds) then reads as a number to change, not a format to fix.
        if (
            first.get("type") != "missing"
            and isinstance(got, int | float | str)
            and len(str(got)) <= 60
        ):
            return None, f"{where}: {first['msg']} (got {json.dumps(got)})"
        return None, f"{where}: {first['msg']}"
