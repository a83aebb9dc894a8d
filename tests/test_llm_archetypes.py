"""Archetypes: a large population driven by one call per distinct profile."""

from __future__ import annotations

import json

import numpy as np
import pytest
from pydantic import BaseModel

from society.llm import Archetypes, LLMClient, LLMConfig
from society.llm.testserver import TestServer


class Choice(BaseModel):
    option: int


def test_grouping_is_by_profile_and_sample():
    profiles = np.array([[0, 1], [2, 3], [0, 1], [0, 1], [2, 3]])
    arch = Archetypes.from_profiles(profiles)
    assert arch.n_groups == 2 and arch.n_agents == 5
    np.testing.assert_array_equal(arch.group_of, [0, 1, 0, 0, 1])
    np.testing.assert_array_equal(arch.members(0), [0, 2, 3])
    spread = Archetypes.from_profiles(np.zeros(1000, dtype=int), n_samples=4, seed=0)
    assert spread.n_groups == 4 and set(spread.group_sample.tolist()) == {0, 1, 2, 3}
    again = Archetypes.from_profiles(np.zeros(1000, dtype=int), n_samples=4, seed=0)
    np.testing.assert_array_equal(spread.group_of, again.group_of)  # seeded


def test_an_agents_sample_depends_on_seed_and_id_only():
    # Two replicates of 6 agents (ids 0-5 and 6-11) with the same profiles: replicate 1's
    # samples must be the same whether it is grouped alone or in a batch with replicate 0
    # (or in another order); before, they were drawn by position in the call.
    profiles = np.array([3, 1, 3, 3, 1, 3] * 2)
    ids = np.arange(12)

    def samples(arch):
        return arch.group_sample[arch.group_of]

    both = samples(Archetypes.from_profiles(profiles, n_samples=3, seed=7, agents=ids))
    alone = samples(Archetypes.from_profiles(profiles[6:], n_samples=3, seed=7, agents=ids[6:]))
    np.testing.assert_array_equal(both[6:], alone)
    order = np.random.default_rng(0).permutation(12)
    shuffled = samples(
        Archetypes.from_profiles(profiles[order], n_samples=3, seed=7, agents=ids[order])
    )
    np.testing.assert_array_equal(shuffled, both[order])
    # Still a draw: the samples vary over agents and with the seed, roughly evenly (4000
    # agents over 4 samples: each count is 1000 +- 27.4 sd; 150 is over 5 sd).
    many = np.arange(4000)
    a = samples(Archetypes.from_profiles(np.zeros(4000, int), n_samples=4, seed=1, agents=many))
    b = samples(Archetypes.from_profiles(np.zeros(4000, int), n_samples=4, seed=2, agents=many))
    assert (np.abs(np.bincount(a, minlength=4) - 1000) < 150).all()
    assert (a != b).mean() > 0.6  # independent draws differ with probability 3/4


def test_bad_profiles_raise_clear_errors():
    with pytest.raises(ValueError, match="profiles must be a non-empty"):
        Archetypes.from_profiles([])
    with pytest.raises(TypeError, match="numbers or strings"):
        Archetypes.from_profiles([{"a": 1}, {"b": 2}])
    with pytest.raises(ValueError, match="n_samples must be an int >= 1"):
        Archetypes.from_profiles([1, 2], n_samples=0)
    with pytest.raises(ValueError, match="agents must be a 1-D integer array"):
        Archetypes.from_profiles([1, 2], n_samples=2, agents=[0])


async def test_a_large_population_costs_one_call_per_profile():
    n_agents, n_profiles, n_samples = 200_000, 40, 3
    rng = np.random.default_rng(0)
    profile_of = rng.integers(0, n_profiles, size=n_agents)
    arch = Archetypes.from_profiles(profile_of, n_samples=n_samples, seed=1)

    def reply(body: dict) -> str:
        profile = int(body["messages"][0]["content"].split()[-1])
        return json.dumps({"option": profile * 10})

    def render(profile) -> list[dict]:
        return [{"role": "user", "content": f"choose for profile {int(profile)}"}]

    async with TestServer(reply=reply) as srv:
        config = LLMConfig(model="openai/m", api_base=srv.url + "/v1", temperature=1.0)
        async with LLMClient(config) as client:
            requests = arch.requests(render, schema=Choice, cohort="crowd")
            completions = await client.complete_many(requests)
        rows = client.usage.rows()
    # Samples of one profile share a call (n=3): one call per distinct profile.
    assert len(requests) == n_profiles * n_samples and srv.requests == n_profiles
    assert {b["n"] for b in srv.bodies} == {n_samples}
    options = arch.fan_out(np.array([c.parsed.option for c in completions]))
    assert options.shape == (n_agents,)
    np.testing.assert_array_equal(options, profile_of * 10)  # each agent got its profile's reply
    per_agent = arch.fan_out(completions)
    assert per_agent.dtype == object and per_agent[0] is completions[arch.group_of[0]]
    saved = [r["value"] for r in rows if r["metric"] == "llm_dedupe_saved" and len(r) == 2]
    assert saved == [n_profiles * (n_samples - 1)]
