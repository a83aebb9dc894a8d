"""litellm is imported lazily, offline and quietly (each check in a fresh interpreter)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

LITELLM_ENV = (
    "LITELLM_LOCAL_MODEL_COST_MAP",
    "LITELLM_OFFLINE_MODE",
    "LITELLM_LOCAL_ANTHROPIC_BETA_HEADERS",
    "LITELLM_TELEMETRY_DISABLED",
    "LITELLM_LOG",
)


def run_python(code: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in LITELLM_ENV}
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120
    )


def test_importing_the_package_and_the_fast_path_does_not_import_litellm():
    code = """
import sys
from society.llm import LLMClient, LLMConfig
client = LLMClient(LLMConfig(model="openai/m", api_base="http://127.0.0.1:9/v1"))
print("litellm" in sys.modules, "aiohttp" in sys.modules)
"""
    done = run_python(code)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["False", "True"]
    bare = run_python("import sys, society.llm; print('litellm' in sys.modules)")
    assert bare.stdout.strip() == "False", bare.stderr


# Refuses every connection that does not go to 127.0.0.1 and records it; then imports
# litellm through the client, makes a good call and a failing one, and prints the record.
QUIET_RUN = """
import asyncio, json, socket
attempts = []
_connect = socket.socket.connect
_getaddrinfo = socket.getaddrinfo
def connect(self, address):
    if isinstance(address, tuple) and address[0] not in ("127.0.0.1", "::1", "localhost"):
        attempts.append(repr(address))
        raise OSError("network disabled by the test")
    return _connect(self, address)
def getaddrinfo(host, *args, **kwargs):
    if host not in ("127.0.0.1", "::1", "localhost"):
        attempts.append(str(host))
        raise socket.gaierror("name resolution disabled by the test")
    return _getaddrinfo(host, *args, **kwargs)
socket.socket.connect = connect
socket.getaddrinfo = getaddrinfo

from society.llm import LLMClient, LLMConfig
from society.llm.testserver import FaultPlan, TestServer

async def main():
    async with TestServer(faults=FaultPlan(script=(None, "400"))) as srv:
        config = LLMConfig(model="openai/gpt-4o-mini", api_base=srv.url + "/v1", fast_path=False)
        async with LLMClient(config) as client:
            good = await client.complete([{"role": "user", "content": "hi"}])
            bad = await client.complete([{"role": "user", "content": "hi again"}])
    return good.ok, bad.ok, good.cost_usd > 0

good, bad, priced = asyncio.run(main())
print(json.dumps({"attempts": attempts, "good": good, "bad": bad, "priced": priced}))
"""


def test_litellm_is_imported_offline_and_quietly():
    done = run_python(QUIET_RUN)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.strip().splitlines()
    assert len(lines) == 1, done.stdout  # nothing printed but the result
    assert done.stderr == ""  # no warnings, no log lines, no "Give Feedback" banner
    result = json.loads(lines[0])
    assert result["attempts"] == []  # no price-table fetch or any other internet access
    assert result == {"attempts": [], "good": True, "bad": False, "priced": True}
