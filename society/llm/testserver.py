"""A scriptable OpenAI-compatible chat server on 127.0.0.1, for tests, benchmarks and demos.

It answers ``POST /v1/chat/completions`` and ``GET /v1/models`` like an OpenAI-compatible
server (vLLM, llama.cpp, Ollama), with scripted or rule-based replies, a configurable latency
and injected faults, so the LLM client can be exercised end to end with real HTTP calls and no
model. It counts what it receives (requests, arrival times, peak concurrency) so tests can
check dedupe, concurrency and retry behaviour from the server's side.

    async with TestServer(reply="hi", latency=0.1) as srv:
        url = srv.url            # http://127.0.0.1:PORT ; api_base is srv.url + "/v1"

    srv = TestServer().start_in_thread()   # for synchronous code
    ...
    srv.stop()

Run one by hand: ``python -m society.llm.testserver --port 8000 --latency 0.2``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from aiohttp import web

FAULT_KINDS = ("429", "500", "400", "400-key", "401", "403", "timeout", "malformed", "empty")
# Faults a flaky but working server shows; the default for faults drawn at a rate.
TRANSIENT_FAULTS = ("429", "500", "timeout", "malformed", "empty")

Reply = str | Sequence[str] | Callable[[dict[str, Any]], str] | None


@dataclass(frozen=True)
class FaultPlan:
    """Which requests fail, and how.

    ``script`` gives the fault (a kind from FAULT_KINDS, or None for a normal reply) of the
    first requests in arrival order; after it, each request fails with probability ``rate``
    with a kind drawn uniformly from ``kinds``, from a generator seeded with ``seed``.
    A "timeout" holds the request for ``hang_s`` seconds (past the client's timeout); "401"
    refuses the key and quotes it back, as some providers do; "403" refuses it without;
    "400-key" is a bad request that quotes the key (as a provider that answers an invalid key
    with 400 does).
    ``delay_s`` holds every faulty reply that long (beside the server's latency) first.
    """

    rate: float = 0.0
    kinds: tuple[str, ...] = TRANSIENT_FAULTS
    seed: int = 0
    script: tuple[str | None, ...] = ()
    retry_after_s: float = 0.1
    hang_s: float = 30.0
    delay_s: float = 0.0

    def __post_init__(self) -> None:
        if not 0.0 <= self.rate <= 1.0:
            raise ValueError(f"rate must be in [0, 1], got {self.rate!r}")
        bad = [k for k in (*self.kinds, *self.script) if k is not None and k not in FAULT_KINDS]
        if bad:
            raise ValueError(f"unknown fault kind {bad[0]!r}; accepted: {', '.join(FAULT_KINDS)}")
        if self.rate > 0 and not self.kinds:
            raise ValueError("kinds must name at least one fault kind when rate > 0")
        if self.retry_after_s < 0 or self.hang_s < 0 or self.delay_s < 0:
            raise ValueError("retry_after_s, hang_s and delay_s must be >= 0")


def count_tokens(text: str) -> int:
    """Whitespace word count: a deterministic stand-in for a tokenizer."""
    return len(text.split())


def example_from_schema(schema: dict[str, Any], root: dict[str, Any] | None = None) -> Any:
    """A simple instance of a JSON schema (defaults, first enum value, lower bounds).

    Good enough for the flat pydantic models that actions are; lets the default reply
    satisfy whatever schema the client sends.
    """
    root = schema if root is None else root
    if "$ref" in schema:
        name = schema["$ref"].rsplit("/", 1)[-1]
        return example_from_schema(root.get("$defs", {}).get(name, {}), root)
    if "default" in schema:
        return schema["default"]
    if "const" in schema:
        return schema["const"]
    if "enum" in schema:
        return schema["enum"][0]
    for alt in ("anyOf", "oneOf", "allOf"):
        if alt in schema:
            return example_from_schema(schema[alt][0], root)
    kind = schema.get("type", "object")
    if isinstance(kind, list):
        kind = kind[0]
    if kind == "object":
        props = schema.get("properties", {})
        return {k: example_from_schema(v, root) for k, v in props.items()}
    if kind == "array":
        n = schema.get("minItems", 0)
        return [example_from_schema(schema.get("items", {}), root) for _ in range(n)]
    if kind in ("integer", "number"):
        lo = schema.get("minimum", schema.get("exclusiveMinimum", 0))
        value = lo + (1 if "exclusiveMinimum" in schema else 0)
        if "maximum" in schema:
            value = min(value, schema["maximum"])
        return int(value) if kind == "integer" else float(value)
    if kind == "boolean":
        return False
    if kind == "null":
        return None
    return "x" * max(1, schema.get("minLength", 1))


def _content_text(content: Any) -> str:
    return content if isinstance(content, str) else json.dumps(content)


def default_reply(body: dict[str, Any]) -> str:
    """Rule-based reply: an instance of the requested schema, else an echo of the last message."""
    fmt = body.get("response_format") or {}
    schema = fmt.get("schema") or (fmt.get("json_schema") or {}).get("schema")
    if schema:
        return json.dumps(example_from_schema(schema))
    messages = body.get("messages") or [{}]
    return "echo: " + _content_text(messages[-1].get("content", ""))


class TestServer:
    """OpenAI-compatible chat server with scripted replies, latency and injected faults."""

    __test__ = False  # not a pytest test class

    def __init__(
        self,
        reply: Reply = None,
        *,
        latency: float = 0.0,
        faults: FaultPlan | None = None,
        port: int = 0,
        model_name: str = "test-model",
        max_n: int | None = None,
        api_key: str | None = None,
    ) -> None:
        if latency < 0:
            raise ValueError(f"latency must be >= 0 seconds, got {latency!r}")
        if not (reply is None or isinstance(reply, str) or callable(reply)):
            if isinstance(reply, Sequence) and len(reply) > 0:
                reply = tuple(reply)
            else:
                raise TypeError("reply must be None, a str, a non-empty list of str or a callable")
        self.reply = reply
        self.latency = latency
        self.faults = faults or FaultPlan()
        self.port = port
        self.model_name = model_name
        self.max_n = max_n  # cap on choices per reply: llama.cpp's server ignores n, like max_n=1
        self.api_key = api_key  # when set, a request without "Bearer <api_key>" gets 401
        self.url = ""
        # What the server saw; read these in tests.
        self.requests = 0
        self.in_flight = 0
        self.max_in_flight = 0
        self.arrivals: list[float] = []
        self.bodies: list[dict[str, Any]] = []
        self.authorizations: list[str | None] = []
        self.faults_injected: Counter[str] = Counter()
        self._rng = random.Random(self.faults.seed)
        self._script_pos = 0
        self._reply_pos = 0
        self._runner: web.AppRunner | None = None
        self._closing: asyncio.Event | None = None
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    # -- lifecycle -------------------------------------------------------------------------
    async def start(self) -> TestServer:
        app = web.Application(client_max_size=64 * 1024**2)
        app.router.add_post("/v1/chat/completions", self._chat)
        app.router.add_post("/chat/completions", self._chat)
        app.router.add_get("/v1/models", self._models)
        self._closing = asyncio.Event()
        self._runner = web.AppRunner(app, access_log=None, shutdown_timeout=0.5)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", self.port, backlog=2048)
        await site.start()
        self.port = self._runner.addresses[0][1]
        self.url = f"http://127.0.0.1:{self.port}"
        return self

    async def close(self) -> None:
        if self._closing is not None:
            self._closing.set()
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def __aenter__(self) -> TestServer:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    def start_in_thread(self) -> TestServer:
        """Serve from a background thread with its own event loop (for synchronous code)."""
        started = threading.Event()
        errors: list[BaseException] = []

        def run() -> None:
            loop = asyncio.new_event_loop()
            self._loop = loop
            try:
                loop.run_until_complete(self.start())
            except BaseException as e:  # reported to the caller below
                errors.append(e)
                started.set()
                return
            started.set()
            loop.run_forever()
            loop.run_until_complete(self.close())
            loop.close()

        self._thread = threading.Thread(target=run, name="llm-testserver", daemon=True)
        self._thread.start()
        started.wait()
        if errors:
            raise errors[0]
        return self

    def stop(self) -> None:
        """Stop a server started with start_in_thread()."""
        if self._thread is None or self._loop is None:
            return
        loop = self._loop
        if self._closing is not None:
            loop.call_soon_threadsafe(self._closing.set)
        loop.call_soon_threadsafe(loop.stop)
        self._thread.join()
        self._thread = None
        self._loop = None

    # -- handlers --------------------------------------------------------------------------
    def _next_fault(self) -> str | None:
        plan = self.faults
        if self._script_pos < len(plan.script):
            self._script_pos += 1
            return plan.script[self._script_pos - 1]
        if plan.rate > 0 and self._rng.random() < plan.rate:
            return plan.kinds[self._rng.randrange(len(plan.kinds))]
        return None

    def _reply_text(self, body: dict[str, Any]) -> str:
        reply = self.reply
        if reply is None:
            return default_reply(body)
        if isinstance(reply, str):
            return reply
        if callable(reply):
            return reply(body)
        index = min(self._reply_pos, len(reply) - 1)  # the last scripted reply repeats
        self._reply_pos += 1
        return reply[index]

    async def _models(self, request: web.Request) -> web.Response:
        data = [{"id": self.model_name, "object": "model", "owned_by": "society-sim"}]
        return web.json_response({"object": "list", "data": data})

    async def _chat(self, request: web.Request) -> web.StreamResponse:
        self.requests += 1
        self.arrivals.append(time.monotonic())
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            self.authorizations.append(request.headers.get("Authorization"))
            try:
                body = await request.json()
            except ValueError:
                return _error(400, "request body is not JSON", "invalid_request_error")
            self.bodies.append(body)
            if self.api_key is not None and self.authorizations[-1] != f"Bearer {self.api_key}":
                return _error(401, "invalid or missing API key", "authentication_error")
            fault = self._next_fault()
            if fault is not None:
                self.faults_injected[fault] += 1
            if self.latency > 0:
                await asyncio.sleep(self.latency)
            if fault is not None and self.faults.delay_s > 0:
                await asyncio.sleep(self.faults.delay_s)
            if fault == "timeout":
                assert self._closing is not None
                try:
                    await asyncio.wait_for(self._closing.wait(), self.faults.hang_s)
                except TimeoutError:
                    pass
            elif fault == "429":
                resp = _error(429, "injected rate limit", "rate_limit_error")
                resp.headers["Retry-After"] = f"{self.faults.retry_after_s:g}"
                return resp
            elif fault == "500":
                return _error(500, "injected server error", "server_error")
            elif fault == "400":
                return _error(400, "injected bad request", "invalid_request_error")
            elif fault in ("401", "400-key"):
                key = (self.authorizations[-1] or "").removeprefix("Bearer ")
                status = int(fault[:3])
                return _error(status, f"Incorrect API key provided: {key}", "authentication_error")
            elif fault == "403":
                return _error(403, "injected permission denied", "permission_error")
            elif fault == "malformed":
                return web.Response(
                    text='{"choices": [{"message": ', content_type="application/json"
                )
            n = int(body.get("n") or 1)
            n = n if self.max_n is None else min(n, self.max_n)
            texts = ["" if fault == "empty" else self._reply_text(body) for _ in range(n)]
            prompt = " ".join(_content_text(m.get("content", "")) for m in body.get("messages", []))
            prompt_tokens = count_tokens(prompt)
            completion_tokens = sum(count_tokens(t) for t in texts)
            return web.json_response(
                {
                    "id": f"chatcmpl-test-{self.requests}",
                    "object": "chat.completion",
                    "created": int(time.time()),
                    "model": body.get("model", self.model_name),
                    "choices": [
                        {
                            "index": i,
                            "message": {"role": "assistant", "content": t},
                            "finish_reason": "stop",
                        }
                        for i, t in enumerate(texts)
                    ],
                    "usage": {
                        "prompt_tokens": prompt_tokens,
                        "completion_tokens": completion_tokens,
                        "total_tokens": prompt_tokens + completion_tokens,
                    },
                }
            )
        finally:
            self.in_flight -= 1


def _error(status: int, message: str, kind: str) -> web.Response:
    return web.json_response(
        {"error": {"message": message, "type": kind, "code": status}}, status=status
    )


def parse_args(
    argv: Sequence[str] | None = None,
) -> tuple[argparse.Namespace, FaultPlan, str | None]:
    """The command line's options, its fault plan and the key it requires (None: any)."""
    p = argparse.ArgumentParser(prog="python -m society.llm.testserver", description=__doc__)
    p.add_argument("--port", type=int, default=8000)
    p.add_argument("--latency", type=float, default=0.0, help="seconds per reply")
    p.add_argument("--reply", default=None, help="constant reply text (default: rule-based)")
    p.add_argument("--fault-rate", type=float, default=0.0, help="share of requests that fail")
    p.add_argument(
        "--fault-kinds",
        default=",".join(TRANSIENT_FAULTS),
        help=f"comma-separated kinds drawn for failing requests, of: {', '.join(FAULT_KINDS)}",
    )
    p.add_argument("--hang-s", type=float, default=30.0, help="seconds a 'timeout' fault hangs")
    p.add_argument("--retry-after", type=float, default=0.1, help="Retry-After of a '429' fault")
    p.add_argument("--fault-delay", type=float, default=0.0, help="seconds before a fault's reply")
    p.add_argument(
        "--api-key-env", default=None, help="refuse (401) requests without the key in this variable"
    )
    p.add_argument("--seed", type=int, default=0)
    a = p.parse_args(argv)
    kinds = tuple(k.strip() for k in a.fault_kinds.split(",") if k.strip())
    try:
        faults = FaultPlan(
            rate=a.fault_rate, kinds=kinds, seed=a.seed, hang_s=a.hang_s,
            retry_after_s=a.retry_after, delay_s=a.fault_delay,
        )  # fmt: skip
    except ValueError as exc:
        p.error(str(exc))
    key = os.environ.get(a.api_key_env) if a.api_key_env else None
    if a.api_key_env and not key:
        p.error(f"--api-key-env {a.api_key_env}: the environment variable is not set")
    return a, faults, key


def main(argv: Sequence[str] | None = None) -> None:
    """Serve until interrupted: ``python -m society.llm.testserver --port 8000``."""
    a, faults, key = parse_args(argv)

    async def serve() -> None:
        async with TestServer(
            a.reply, latency=a.latency, faults=faults, port=a.port, api_key=key
        ) as srv:
            print(f"serving on {srv.url}/v1", flush=True)
            await asyncio.Event().wait()

    try:
        asyncio.run(serve())
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
