"""Population: mixed rule / learned / LLM cohorts acting in one world, and the lifecycle."""

from __future__ import annotations

import asyncio
import json

import jax
import networkx as nx
import numpy as np
import pytest
from pydantic import BaseModel, Field

from sim_core.scheduler import Scheduler
from society.cohorts.base import Cohort
from society.cohorts.learned import LearnedCohort
from society.cohorts.llm import LLMCohort
from society.cohorts.rules import RuleCohort
from society.llm import LLMClient, LLMConfig
from society.llm.testserver import TestServer
from society.population import Population


class Give(BaseModel):
    give: int = Field(ge=0, le=1, description="1 to give to your partner, 0 to keep")


def llm_reply(body: dict) -> str:
    """A rule-based 'model': reciprocates what the prompt says the partner did last."""
    prompt = body["messages"][-1]["content"]
    return json.dumps({"give": 0 if "partner last gave: 0" in prompt else 1})


class Counting:
    """Counts how often each cohort is asked to act, and for how many agents."""

    def __init__(self, pop: Population):
        self.calls: dict[str, list[int]] = {c.name: [] for c in pop.cohorts}
        for c in pop.cohorts:
            original = c.aact

            async def counted(agents, obs, key, _c=c, _orig=original):
                self.calls[_c.name].append(len(agents))
                return await _orig(agents, obs, key)

            c.aact = counted


async def mixed_world(n_rule=30, n_learned=8, n_llm=2, moments=4, concurrency=256, b=3.0, c=1.0):
    """Rule, learned and LLM cohorts play a giving game for a few moments."""
    n = n_rule + n_learned + n_llm
    async with TestServer(reply=llm_reply, latency=0.05) as srv:
        cfg = LLMConfig(
            model="openai/test-model",
            api_base=srv.url + "/v1",
            max_retries=0,
            concurrency=concurrency,
        )
        async with LLMClient(cfg) as client:
            rules = RuleCohort("rules", np.arange(n_rule), ["tft", "allc", "alld"] * (n_rule // 3))
            learned = LearnedCohort(
                "learned", np.arange(n_rule, n_rule + n_learned), features=["partner_last"], key=1
            )
            llm = LLMCohort(
                "llm",
                np.arange(n_rule + n_learned, n),
                client,
                schema=Give,
                fallback=Give(give=0),
                template="Round {round}. Your partner last gave: {partner_last}. Do you give?",
                personas=[f"agent number {i}" for i in range(n_llm)],
            )
            pop = Population([rules, learned, llm])
            counting = Counting(pop)
            sim = Scheduler()
            last = np.full(n, -1)  # each agent's last action
            totals = np.zeros(n)
            rng = np.random.default_rng(0)

            async def moment(t: int):
                partner = rng.permutation(n)
                obs = {"partner_last": last[partner], "my_last": last, "round": np.full(n, t)}
                key = jax.random.fold_in(jax.random.key(0), t)
                acts = await pop.act(np.arange(n), obs, key)
                gave = np.asarray(acts).round().astype(int)
                received = np.zeros(n)
                np.add.at(received, partner, gave)
                reward = b * received - c * gave
                pop.learn(np.arange(n), obs, gave, reward, key)
                last[:] = gave
                totals[:] += reward

            for t in range(moments):
                sim.at(float(t), moment, t)
            await sim.arun()
            return pop, counting, totals


def test_mixed_population_acts_each_cohort_once_per_moment():
    n_rule, n_learned, n_llm, moments = 30, 8, 2, 4
    pop, counting, totals = asyncio.run(mixed_world(n_rule, n_learned, n_llm, moments))
    # One call per cohort per moment, each for all of its due agents.
    assert counting.calls == {
        "rules": [n_rule] * moments,
        "learned": [n_learned] * moments,
        "llm": [n_llm] * moments,
    }
    llm = pop.cohort("llm")
    assert llm.calls == moments and llm.failures == 0
    # The LLM agents reciprocate: their memory records choices and rewards.
    assert all(len(m) == moments for m in llm.memory)
    assert "received" in llm.memory[0][-1]
    # ALLD agents (every third rule agent from index 2) never give; ALLC always do.
    alld = np.arange(2, n_rule, 3)
    allc = np.arange(1, n_rule, 3)
    assert totals[alld].mean() > totals[allc].mean()
    assert np.isfinite(totals).all()


def test_same_results_whatever_the_llm_concurrency_limit():
    """Calls finish in a different order with 1 or 12 in flight; the outcome must not change."""
    _, _, serial = asyncio.run(mixed_world(n_llm=12, moments=3, concurrency=1))
    _, _, parallel = asyncio.run(mixed_world(n_llm=12, moments=3, concurrency=12))
    np.testing.assert_array_equal(serial, parallel)


def test_act_rejects_dead_agents_and_cohorts_must_be_disjoint():
    a = RuleCohort("a", [0, 1], "allc")
    with pytest.raises(ValueError, match="two cohorts"):
        Population([a, RuleCohort("b", [1, 2], "alld")])
    with pytest.raises(ValueError, match="unique"):
        Population([a, RuleCohort("a", [5], "alld")])
    pop = Population([a], capacity=4)
    with pytest.raises(ValueError, match="not alive"):
        asyncio.run(pop.act(np.array([0, 3]), {"partner_last": np.zeros(2)}, jax.random.key(0)))


def test_lifecycle_keeps_lineage():
    rules = RuleCohort("rules", np.arange(6), ["allc", "alld", "tft", "wsls", "allc", "alld"])
    learned = LearnedCohort("learned", np.arange(6, 10), features=["partner_last"], key=3)
    pop = Population([rules, learned])
    key = jax.random.key(0)
    fitness = np.array([5.0, 1.0, 4.0, 0.0, 3.0, 2.0, 9.0, 8.0, 0.5, 0.2])
    dead, parents = pop.replace_worst(fitness, 0.3, key=key, time=1.0)
    # The 3 worst (slots 3, 9, 8) die; the 3 best (6, 7, 0) fork into their slots, best first.
    assert dead.tolist() == [3, 9, 8] and parents.tolist() == [6, 7, 0]
    assert pop.cohort_of[[3, 9, 8]].tolist() == [1, 1, 0]  # children join the parent's cohort
    assert rules.strategy_of(np.array([8])).tolist() == ["allc"]  # inherited from slot 0
    child, parent = learned.local(np.array([3, 6]))  # a learned child has its parent's policy
    for leaf in jax.tree_util.tree_leaves(learned.state["params"]):
        np.testing.assert_array_equal(np.asarray(leaf[child]), np.asarray(leaf[parent]))
    lin = pop.lineage()
    assert lin["op"].tolist() == ["fork"] * 3
    assert lin["parent"].tolist() == [6, 7, 0]  # initial serials equal initial slots
    assert lin["child"].tolist() == [10, 11, 12] and (lin["generation"] == 1).all()
    # A second generation: ancestors chain back through the serials.
    pop.replace_worst(np.where(np.arange(10) == 3, 100.0, -np.arange(10.0)), 0.1, key=key, time=2.0)
    newest = int(pop.lineage()["child"].iloc[-1])
    assert pop.ancestors(newest) == [10, 6]
    g = nx.DiGraph(list(zip(pop.lineage()["parent"], pop.lineage()["child"], strict=True)))
    assert nx.is_directed_acyclic_graph(g)
    state = pop.state_dict()
    assert state["next_serial"] == 14 and len(state["lineage"]["child"]) == 4
    # A population built the same way takes the state back whole (what checkpoints use).
    again = Population(
        [
            RuleCohort("rules", np.arange(6), "allc"),
            LearnedCohort("learned", np.arange(6, 10), features=["partner_last"], key=3),
        ]
    )
    again.load_state_dict(state)
    pd_equal = again.lineage().astype(str).equals(pop.lineage().astype(str))
    assert (
        pd_equal and again.next_serial == 14 and again.cohort_of.tolist() == pop.cohort_of.tolist()
    )
    live = np.flatnonzero(pop.alive)
    assert (
        again.cohort("rules").strategy_of(rules.agents).tolist()
        == rules.strategy_of(rules.agents).tolist()
    )
    obs, k = {"partner_last": np.ones(live.size, np.int32)}, jax.random.key(5)
    np.testing.assert_array_equal(
        np.asarray(asyncio.run(again.act(live, obs, k))),
        np.asarray(asyncio.run(pop.act(live, obs, k))),
    )
    with pytest.raises(ValueError, match="state has cohorts"):
        Population([RuleCohort("other", np.arange(10), "allc")]).load_state_dict(state)


def test_seed_and_prune_errors():
    rules = RuleCohort("rules", np.arange(4), "tft")
    pop = Population([rules], capacity=6)
    with pytest.raises(ValueError, match="count"):
        pop.prune(np.zeros(6), 5)
    with pytest.raises(ValueError, match="free"):
        pop.fork(np.array([0]), np.array([1]), key=jax.random.key(0))
    born = pop.seed("rules", np.array([4, 5]), key=jax.random.key(0), time=3.0)
    assert born.tolist() == [4, 5] and len(pop) == 6
    assert rules.strategy_of(np.array([4, 5])).tolist() == ["tft", "tft"]  # drawn from the pool
    lin = pop.lineage()
    assert lin["op"].tolist() == ["seed", "seed"] and (lin["parent"] == -1).all()

    class Frozen(Cohort):  # a user's cohort without a spawn hook
        def act(self, agents, obs, key):
            return np.zeros(len(agents))

    other = Population([Frozen("frozen", [0])], capacity=2)
    with pytest.raises(TypeError, match="cannot spawn"):
        other.seed("frozen", np.array([1]), key=jax.random.key(0))


def test_merge_and_free_agency():
    learned = LearnedCohort("learned", np.arange(4), features=["partner_last"], key=5)
    rules = RuleCohort("rules", np.arange(4, 8), ["allc", "alld", "tft", "wsls"])
    pop = Population([learned, rules], capacity=12)
    key = jax.random.key(1)
    child = pop.merge(np.array([0]), np.array([1]), np.array([8]), key=key, time=1.0)
    pos = learned.local(np.array([0, 1, 8]))
    for leaf in jax.tree_util.tree_leaves(learned.state["params"]):
        leaf = np.asarray(leaf)
        np.testing.assert_allclose(leaf[pos[2]], (leaf[pos[0]] + leaf[pos[1]]) / 2, rtol=1e-6)
    pop.merge(np.array([5]), np.array([6]), np.array([9]), key=key)
    assert rules.strategy_of(np.array([9])).tolist() == ["alld"]  # rules: the first parent's
    lin = pop.lineage()
    assert lin["op"].tolist() == ["merge", "merge"] and lin["second_parent"].tolist() == [1, 6]
    assert pop.parent_map()[int(child[0])] == (0, 1)
    with pytest.raises(ValueError, match="same cohort"):
        pop.merge(np.array([0]), np.array([5]), np.array([10]), key=key)

    # Free agency: newcomers 10 and 11 on probation; only one beats its incumbent.
    pop.seed("rules", np.array([10, 11]), key=key)
    fitness = np.zeros(12)
    fitness[:10] = [5, 6, 7, 8, 9, 1.0, 4, 3, 2, 6.5]  # worst incumbents: 5 (1.0), then 8 (2.0)
    fitness[10], fitness[11] = 1.5, 0.5  # 10 beats slot 5; 11 does not beat slot 8
    replaced, rejected = pop.free_agency(fitness, np.array([10, 11]), time=4.0)
    assert replaced.tolist() == [5] and rejected.tolist() == [11]
    assert not pop.alive[[5, 11]].any() and pop.alive[[8, 10]].all()
    rep = pop.replacements()
    assert rep["replaced"].tolist() == [5] and rep["time"].tolist() == [4.0]


def test_llm_templates_read_string_fields_of_any_dtype():
    """Observation fields of names (object or unicode arrays) reach the prompt as text."""
    seen: list[str] = []

    def reply(body: dict) -> str:
        seen.append(body["messages"][-1]["content"])
        return json.dumps({"give": 1})

    async def go():
        async with TestServer(reply=reply) as srv:
            cfg = LLMConfig(model="openai/test-model", api_base=srv.url + "/v1", max_retries=0)
            async with LLMClient(cfg) as client:
                llm = LLMCohort(
                    "llm",
                    np.arange(2),
                    client,
                    schema=Give,
                    fallback=Give(give=0),
                    template="Partner {partner} ({mood}), round {round}.",
                )
                obs = {
                    "partner": np.array(["ann", "bob"], dtype=object),
                    "mood": np.array(["calm", "cross"]),
                    "round": np.int64(3),
                }
                return await llm.aact(np.arange(2), obs, jax.random.key(0))

    acts = asyncio.run(go())
    assert np.asarray(acts).tolist() == [1, 1]
    assert sorted(s[s.index("Partner") :] for s in seen) == [
        "Partner ann (calm), round 3.",
        "Partner bob (cross), round 3.",
    ]
