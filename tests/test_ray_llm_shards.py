"""An LLM population sharded over Ray actors (issue 13): each actor holds its shard's
LLMCohort and client; the cohort acts like the unsharded one, agent for agent, memories
included, from other processes."""

import asyncio
import json
import os
import re

import numpy as np
import pytest

from scenarios.network_game.model import Cooperate
from society.cohorts.llm import LLMCohort
from society.cohorts.ray_llm import ShardedLLMCohort
from society.llm.client import LLMClient
from society.llm.config import LLMConfig
from society.llm.testserver import TestServer

TEMPLATE = "Agent {agent} in round {round}. How much do you cooperate?"
KW = dict(schema=Cooperate, fallback=Cooperate(cooperate=0.0), template=TEMPLATE, memory_size=2)


def _reply(body: dict) -> str:
    """Each agent its own level; an agent that remembers a past round turns it around."""
    user = body["messages"][-1]["content"]
    level = int(re.search(r"Agent (\d+)", user).group(1)) % 5 / 4
    return json.dumps({"cooperate": 1.0 - level if "recent history" in user else level})


@pytest.fixture(scope="module")
def server():
    srv = TestServer(reply=_reply).start_in_thread()
    yield srv
    srv.stop()


def _obs(agents: np.ndarray, t: int) -> dict:
    return {"agent": agents, "round": np.full(agents.size, t)}


async def _unsharded(config: LLMConfig, agents: np.ndarray) -> list[np.ndarray]:
    async with LLMClient(config) as client:
        cohort = LLMCohort("llm", agents, client, **KW)
        out = []
        for t in range(2):
            out.append(await cohort.aact(agents, _obs(agents, t), None))
            cohort.learn(agents, {}, out[-1], np.ones(agents.size), None)
        return out


def test_sharded_cohort_acts_as_the_unsharded_one_from_other_processes(server):
    config = LLMConfig(model="openai/test-model", api_base=server.url + "/v1")
    agents = np.arange(100, 130)
    want = asyncio.run(_unsharded(config, agents))
    cohort = ShardedLLMCohort("llm", agents, config, shards=3, **KW)
    try:
        pids = cohort.pids()
        assert len(set(pids)) == 3 and os.getpid() not in pids
        got = []
        for t in range(2):
            due = agents[::-1] if t else agents  # any order, any subset: actions follow agents
            actions = asyncio.run(cohort.aact(due, _obs(due, t), None))
            got.append(actions[::-1] if t else actions)
            cohort.learn(due, {}, actions, np.ones(due.size), None)
        np.testing.assert_array_equal(got[0], want[0])
        np.testing.assert_array_equal(got[1], want[1])  # memories kept in the shards
        assert not np.array_equal(got[0], got[1])
        usage = asyncio.run(cohort.usage())
        assert usage["requests"] == 60 and usage["failures"] == 0
    finally:
        cohort.close()
