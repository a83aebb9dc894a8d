"""Schelling with agents that choose: rule agents are Mesa's model, an LLM agent answering
by the same rule gives the same run, learned agents learn to move when unhappy."""

from __future__ import annotations

import json
import re

import pandas as pd

import scenarios
from society.llm.testserver import TestServer

GRID = {"width": 8, "height": 8, "density": 0.8, "homophily": 0.4, "steps": 5}


def by_the_rule(body: dict) -> str:
    """A stand-in model that reads its prompt and moves when too few neighbours are alike."""
    text = body["messages"][1]["content"]
    near, same = map(int, re.search(r"Of your (\d+) neighbours, (\d+) belong", text).groups())
    want = int(re.search(r"at least (\d+)%", text).group(1)) / 100
    return json.dumps({"choice": "move" if (same / near if near else 0.0) < want else "stay"})


def rows(result) -> pd.DataFrame:
    """The model's rows (the LLM usage rows, replicate -1, apart)."""
    m = result.metrics.query("replicate >= 0")
    return m.sort_values(["replicate", "time", "metric"]).reset_index(drop=True)


def test_llm_agents_that_follow_the_rule_give_the_rule_agents_run() -> None:
    """The world's draws do not depend on who chooses, so equal choices mean equal rows;
    empty cells are not agents and are never asked."""
    srv = TestServer(reply=by_the_rule).start_in_thread()
    try:
        llm = scenarios.run("schelling", seed=2, write=False, agents="llm",
                            llm="openai/test-model", api_base=srv.url + "/v1", **GRID)  # fmt: skip
        asked = srv.requests
    finally:
        srv.stop()
    rules = scenarios.run("schelling", seed=2, write=False, **GRID)
    assert llm.summary["status"] == "completed", llm.summary
    pd.testing.assert_frame_equal(rows(llm), rows(rules))
    residents = int(rules.metrics.query("metric == 'population'")["value"].iloc[0])
    assert 0 < asked <= residents * GRID["steps"] < 64 * GRID["steps"]


def test_learned_agents_learn_to_move_when_unhappy() -> None:
    """Learned agents start near a coin flip (a random mover makes about 0.70 of agents
    happy here against 1.0 for the rule) and are rewarded for being happy: their last five
    steps are happier than their first five. Over seeds 0-4 the gain measured 0.05-0.09; the
    test asks for a gain at all in the mean of three seeds."""
    kw = {**GRID, "width": 20, "height": 20, "steps": 30, "agents": "learned", "learning_rate": 0.1}
    gains = []
    for seed in range(3):
        r = scenarios.run("schelling", seed=seed, write=False, **kw)
        happy = r.metrics.query("metric == 'happy_fraction'").sort_values("time")["value"]
        gains.append(happy.iloc[-5:].mean() - happy.iloc[:5].mean())
    assert sum(gains) / 3 > 0.02, gains
