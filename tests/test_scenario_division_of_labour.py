"""division-of-labour: the model's rules by hand, the classic result, every kind of agent, CLI."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pandas as pd
import pytest

import scenarios
from scenarios.division_of_labour.config import DivisionOfLabourConfig
from scenarios.division_of_labour.dynamics import (
    World,
    offer,
    response_probability,
    rule_decisions,
    transition,
)
from sim_core.errors import ConfigError
from society.llm.testserver import TestServer

NAME = "division-of-labour"
LLM = {"llm": "openai/test-model"}


def params(**kw) -> DivisionOfLabourConfig:
    base = dict(
        population=4, tasks=2, delta=1.0, alpha=2.0, quit_prob=0.2, reinforcement=True, xi=10.0,
        phi=1.0, theta_min=1.0, theta_max=100.0, theta_init=50.0, average_from=0,
    )  # fmt: skip
    return DivisionOfLabourConfig(**{**base, **kw})


def f32(x) -> jax.Array:
    return jnp.asarray(x, jnp.float32)


def sorted_frame(frame: pd.DataFrame) -> pd.DataFrame:
    cols = ["metric", "replicate", "time", "task", "agent"]
    return frame.sort_values(cols).reset_index(drop=True)


# -- the rules, by hand ---------------------------------------------------------------------
def test_transition_by_hand():
    step = transition
    p = params()
    world = World(
        task=jnp.array([-1, 0, 1, -1], jnp.int32),
        theta=f32([[5.0, 95.0], [50.0, 50.0], [1.5, 100.0], [30.0, 30.0]]),
        s=f32([3.0, 0.2]),
        counts=jnp.zeros((4, 2), jnp.float32),
    )
    # Agent 0 (idle) takes task 1 it met; agent 1 quits; agent 2 keeps task 1; agent 3 stays
    # idle; the engage flags of the active agents 1 and 2 must be ignored.
    engage = jnp.array([1, 1, 0, 0])
    met = jnp.array([1, 0, 0, 0])
    quit = jnp.array([False, True, False, False])
    new = step(p, world, engage, met, quit, 0)
    np.testing.assert_array_equal(new.task, [1, -1, 1, -1])
    # n = (0, 2) of N = 4: s_0 = 3 + 1 - 0 = 4; s_1 = max(0.2 + 1 - 2 * 2/4, 0) = 0.2.
    np.testing.assert_allclose(new.s, [4.0, 0.2], rtol=1e-6)
    # Doing j: theta - 10; not doing it: theta + 1; clipped to [1, 100].
    np.testing.assert_allclose(
        new.theta, [[6.0, 85.0], [51.0, 51.0], [2.5, 90.0], [31.0, 31.0]], rtol=1e-6
    )
    np.testing.assert_array_equal(new.counts, [[0, 1], [0, 0], [0, 1], [0, 0]])
    # Without learning thresholds stay; acts before average_from are not counted.
    frozen = step(params(reinforcement=False, average_from=5), world, engage, met, quit, 4)
    np.testing.assert_array_equal(frozen.theta, world.theta)
    assert float(frozen.counts.sum()) == 0.0
    # Stimuli never go below 0.
    crowd = step(params(alpha=100.0), world, engage, met, quit, 0)
    np.testing.assert_allclose(crowd.s, [4.0, 0.0])


def test_response_probability_by_hand():
    s = f32([2.0, 4.0, 0.0, 3.0, 0.0, 1.0])
    theta = f32([2.0, 2.0, 5.0, 0.0, 0.0, 3.0])
    # s^2 / (s^2 + theta^2): 1/2, 16/20, 0, 1, 1 (both 0), 1/10.
    np.testing.assert_allclose(response_probability(s, theta), [0.5, 0.8, 0, 1, 1, 0.1], atol=1e-6)


def test_rule_decisions_follow_the_response_probability():
    n = 20_000
    ids = jnp.arange(n, dtype=jnp.int32)
    stim, theta = jnp.full(n, 4.0), jnp.full(n, 2.0)  # p = 0.8
    share = float(jax.jit(rule_decisions)(stim, theta, jax.random.key(3), ids).mean())
    # Binomial sd sqrt(0.8 * 0.2 / 20000) = 0.0028: 5 sd.
    assert abs(share - 0.8) < 0.014


def test_offer_draws_tasks_uniformly_and_quits_at_quit_prob():
    n, m = 20_000, 4
    p = params(population=n, tasks=m, quit_prob=0.3)
    task = jnp.where(jnp.arange(n) < n // 2, 2, -1).astype(jnp.int32)  # half active
    theta = jax.random.uniform(jax.random.key(0), (n, m)) * 100
    world = World(task=task, theta=theta, s=f32([1.0, 2.0, 3.0, 4.0]), counts=jnp.zeros((n, m)))
    met, quit, stim, th = offer(p, world, jax.random.key(1), 7)
    met, quit = np.asarray(met), np.asarray(quit)
    # Idle agents never quit; active ones at 0.3 (sd sqrt(.3 * .7 / 10000) = 0.0046: 5 sd).
    assert not quit[n // 2 :].any()
    assert abs(quit[: n // 2].mean() - 0.3) < 0.023
    # Each task met with probability 1/4 (sd 0.0031: 5 sd).
    assert np.abs(np.bincount(met, minlength=m) / n - 0.25).max() < 0.016
    # What an agent sees: the stimulus of the task it met and its own threshold for it.
    np.testing.assert_array_equal(stim, np.asarray(world.s)[met])
    np.testing.assert_array_equal(th, np.asarray(theta)[np.arange(n), met])


# -- the classic result -----------------------------------------------------------------------
def test_specialists_emerge_with_threshold_learning_and_not_without():
    """Theraulaz, Bonabeau & Deneubourg (1998): reinforcement splits a colony of identical
    agents into specialists; fixed identical thresholds do not."""
    kw = dict(seed=7, replicates=4, write=False, population=50, steps=1500, average_from=750)
    learn = scenarios.run(NAME, reinforcement=True, **kw).summary["metrics"]
    fixed = scenarios.run(NAME, reinforcement=False, **kw).summary["metrics"]
    # With learning, I/H(task) was 0.51-0.75 over these replicates (0.61-0.73 at 100
    # agents): every replicate above 0.3 leaves a wide margin for the between-run spread.
    assert min(learn["dol_index"]["values"]) > 0.3
    assert learn["dol_index"]["mean"] > 0.4
    assert learn["task_entropy"]["mean"] < 0.6
    # Without learning the agents are exchangeable: I is only the sampling bias, about
    # (N-1)(m-1) / (2 n_eff) nats with n_eff ~ 25000 acts / 5 (runs of mean length
    # 1/quit_prob), i.e. I/H ~ 0.007 (0.011-0.022 observed): 0.1 is a wide margin.
    assert max(fixed["dol_index"]["values"]) < 0.1
    assert min(fixed["task_entropy"]["values"]) > 0.9


# -- the engines agree, whatever the batching -------------------------------------------------
def test_rule_engine_equals_the_population_engine_and_ignores_batching():
    kw = dict(seed=3, replicates=2, write=False, population=8, steps=80, average_from=20)
    kw |= dict(record_every=5, theta_init=20.0, theta_max=100.0)
    fast = scenarios.run(NAME, **kw)
    one_by_one = scenarios.run(NAME, batch_replicates=1, **kw)
    pop = scenarios.run(NAME, agents="mixed", split="rules:1", **kw)
    assert fast.summary["metrics"] == one_by_one.summary["metrics"]
    assert fast.summary["metrics"] == pop.summary["metrics"]
    pd.testing.assert_frame_equal(sorted_frame(fast.metrics), sorted_frame(pop.metrics))
    assert np.isfinite(fast.summary["metrics"]["dol_index"]["values"]).all()
    acts = fast.metrics[fast.metrics["metric"] == "acts"]
    assert acts["value"].sum() > 0 and set(acts["cohort"]) == {"rules"}


# -- the port onto the study contract ---------------------------------------------------------
# Means and standard deviations over 20 replicates (seed 5, one replicate per batch) of the
# model before it was a Study (its hand-written engines, commit 0ca8b3f). The port draws other
# numbers (the world holds the coming step's draws; a replicate's learned agents learn from
# it alone, where the old population engine let one policy learn from a whole batch: hence
# one replicate per batch here), so the values agree only in distribution.
BEFORE = {
    "rules": ({"population": 50, "steps": 400, "average_from": 200},
              {"dol_index": (0.4333, 0.0477), "task_entropy": (0.6183, 0.0395)}),
    "mixed": ({"population": 30, "steps": 60, "agents": "mixed", "split": "rules:1,learned:1",
               "learning_rate": 0.1, "average_from": 20},
              {"dol_index": (0.4959, 0.199), "task_entropy": (0.2664, 0.1284)}),
}  # fmt: skip


@pytest.mark.parametrize("case", sorted(BEFORE))
def test_the_study_is_statistically_the_model_it_replaced(case):
    cfg, before = BEFORE[case]
    got = scenarios.run(NAME, seed=5, replicates=20, write=False, **cfg).summary["metrics"]
    for metric, (mean, sd) in before.items():
        v = np.asarray(got[metric]["values"])
        # Welch's two-sample z at 3 standard errors of the difference of means: a false alarm
        # about 1 time in 370; it catches a shift of 0.04 (rules, about 10% of dol_index) or
        # 0.18 (mixed, whose learned agents make replicates spread widely) in either metric.
        se = np.sqrt((sd**2 + v.var(ddof=1)) / 20)
        assert abs(v.mean() - mean) < 3 * se, (metric, v.mean(), mean, se)


# -- learned agents ---------------------------------------------------------------------------
def test_learned_agents_learn_to_work_when_demand_exceeds_their_threshold():
    res = scenarios.run(
        NAME, seed=1, write=False, population=16, agents="learned", reinforcement=False,
        theta_init=50.0, theta_max=100.0, steps=400, average_from=200, learning_rate=0.2,
    )  # fmt: skip
    m = res.metrics
    late = m[(m["metric"] == "stimulus") & (m["time"] >= 200)]["value"].mean()
    # Taking a task pays (s - theta) / theta_max, so the learned policy works when s > theta
    # and the stimulus settles near theta = 50 (43-70 over seeds 0-3). Policies that never
    # work let s grow by delta per step (mean ~300 over steps 200-400); any policy working
    # whenever idle drives it to 0 (0.42 of the agents per task exceed delta / alpha = 1/3).
    # The band [20, 120] separates these outcomes.
    assert 20.0 < late < 120.0
    assert m[m["metric"] == "acts"]["value"].sum() > 0


# -- LLM agents -------------------------------------------------------------------------------
def _user(body: dict) -> str:
    return body["messages"][-1]["content"]


def llm_requests(frame: pd.DataFrame) -> float:
    """The run's total of requests made by LLM agents (before deduplication)."""
    rows = frame[
        (frame["metric"] == "llm_requests") & frame["cohort"].isna() & frame["agent"].isna()
    ]
    assert rows["replicate"].tolist() == [-1]
    return float(rows["value"].iloc[0])


def test_llm_agents_who_always_work_keep_their_first_task():
    srv = TestServer(reply='{"work": true}').start_in_thread()
    try:
        res = scenarios.run(
            NAME, seed=2, replicates=2, write=False, api_base=srv.url + "/v1", **LLM,
            population=6, steps=12, average_from=2, quit_prob=0.0, agents="llm", record_every=1,
        )  # fmt: skip
        requests = srv.requests
    finally:
        srv.stop()
    # Everyone is idle only at step 0, takes the task it meets and never quits. (Identical
    # prompts of one moment reach the server once: the agents differ only by the task met;
    # the study contract steps LLM replicates one at a time, so at most 2 per replicate.)
    m = res.metrics
    assert llm_requests(m) == 6 * 2 and 1 <= requests <= 2 * 2
    acts = m[m["metric"] == "acts"].pivot_table(
        index=["replicate", "agent"], columns="task", values="value"
    )
    counts = acts.to_numpy()
    np.testing.assert_array_equal(np.sort(counts, axis=1), np.tile([0.0, 10.0], (12, 1)))
    # One task per agent: I/H(task) = 1 and every agent's entropy 0 (where both tasks occur).
    both = acts.groupby(level=0).apply(lambda a: (a.to_numpy() > 0).any(axis=0).all())
    dol = np.asarray(res.summary["metrics"]["dol_index"]["values"])
    np.testing.assert_allclose(dol[both.to_numpy()], 1.0)
    assert res.summary["metrics"]["task_entropy"]["values"] == [0.0, 0.0]
    # Stimuli by hand: s_j <- max(s_j + 1 - 3 n_j / 6, 0) with n_j fixed from step 0.
    for rep in (0, 1):
        n_on = (acts.loc[rep].to_numpy() > 0).sum(axis=0)
        s, expected = np.zeros(2), []
        for _ in range(12):
            s = np.maximum(s + 1.0 - 3.0 * n_on / 6, 0.0)
            expected.append(s.copy())
        got = m[(m["metric"] == "stimulus") & (m["replicate"] == rep) & (m["time"] > 0)]
        got = got.pivot_table(index="time", columns="task", values="value").to_numpy()
        np.testing.assert_allclose(got, np.array(expected), rtol=1e-5)


def test_llm_prompts_carry_the_demand_and_threshold_they_decide_on():
    seen: list[str] = []

    def reply(body: dict) -> str:
        text = _user(body)
        seen.append(text)
        demand, threshold = map(float, re.search(r"demand is (\d+\.\d) and your threshold for it is (\d+\.\d)", text).groups())  # fmt: skip
        return json.dumps({"work": demand > threshold})

    srv = TestServer(reply=reply).start_in_thread()
    try:
        res = scenarios.run(
            NAME, seed=0, write=False, api_base=srv.url + "/v1", **LLM, population=4, steps=6,
            average_from=0, reinforcement=False, theta_init=2.5, agents="llm", record_every=1,
            quit_prob=0.0,
        )  # fmt: skip
    finally:
        srv.stop()
    # Demand rises 0, 1, 2, 3: nobody works until step 3, when every idle agent does.
    m = res.metrics
    share = m[m["metric"] == "active_share"].groupby("time")["value"].sum()
    np.testing.assert_allclose(share.loc[[1.0, 2.0, 3.0, 4.0]], [0.0, 0.0, 0.0, 1.0], atol=1e-6)
    assert llm_requests(m) == 4 * 4  # four idle agents at steps 0-3, then all keep working
    assert "stop with probability 0." in seen[0] and "between 1 and 1000" in seen[0]


def test_llm_budget_stops_the_run_cleanly(tmp_path: Path):
    srv = TestServer(reply='{"work": false}').start_in_thread()
    try:
        res = scenarios.run(
            NAME, out=tmp_path / "run", api_base=srv.url + "/v1", **LLM, population=4, steps=50,
            average_from=0, agents="llm", llm_budget_tokens=10,
        )  # fmt: skip
    finally:
        srv.stop()
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["status"] == "stopped" and "budget" in summary["stop_reason"]
    assert llm_requests(res.metrics) == 4  # the first moment spent the budget; then it stopped
    assert res.metrics[res.metrics["metric"] == "stimulus"]["time"].max() == 1.0


def test_mixed_population_each_kind_decides_for_its_agents():
    srv = TestServer(reply='{"work": false}').start_in_thread()
    try:
        res = scenarios.run(
            NAME, seed=4, write=False, api_base=srv.url + "/v1", **LLM, population=8, steps=30,
            average_from=0, theta_init=5.0, theta_max=20.0, agents="mixed",
            split="rules:2,learned:1,llm:1",
        )  # fmt: skip
    finally:
        srv.stop()
    acts = res.metrics[res.metrics["metric"] == "acts"]
    per_kind = acts.groupby("cohort")["value"].sum()
    agents = acts.groupby("cohort")["agent"].nunique()
    assert agents.to_dict() == {"learned": 2, "llm": 2, "rules": 4}
    # The LLM agents refuse every task, so they are idle and asked at every step.
    assert per_kind["llm"] == 0.0 and llm_requests(res.metrics) == 2 * 30
    assert per_kind["rules"] > 0 and per_kind["learned"] > 0


# -- configuration and the command line -------------------------------------------------------
def test_parameters_of_the_issue_are_described():
    names = {r["name"] for r in scenarios.describe(NAME)}
    issue = {"population", "tasks", "steps", "theta_init", "average_from", "delta", "alpha"}
    issue |= {"quit_prob", "reinforcement", "xi", "phi", "theta_min", "theta_max"}
    assert issue <= names
    assert "response thresholds" in scenarios.summary_line(NAME).lower()


@pytest.mark.parametrize(
    ("params", "needle"),
    [
        ({"average_from": 10, "steps": 10}, "average_from"),
        ({"theta_init": 2000.0}, "theta_init"),
        ({"theta_min": 5.0, "theta_max": 2.0, "theta_init": 3.0}, "theta_min"),
        ({"agents": "mixed"}, "split"),
        ({"agents": "mixed", "split": "rules:1,bots:1"}, "accepted: rules, learned, llm"),
        ({"agents": "mixed", "split": "rules:0"}, "must not all be 0"),
        ({"split": "rules:1"}, "split applies only to agents=mixed"),
        ({"agents": "robots"}, "agents"),
        ({"quit_prob": 1.5}, "quit_prob"),
        ({"tasks": 1}, "tasks"),
        ({"colony": 3}, "unknown parameter 'colony'"),
    ],
)
def test_bad_parameters(params, needle):
    with pytest.raises(ConfigError, match=re.escape(needle)):
        scenarios.run(NAME, write=False, **params)


@pytest.mark.plots
def test_cli_run_writes_summary_and_plot(tmp_path: Path):
    out = tmp_path / "run"
    cmd = [sys.executable, "-m", "society.cli", "run", NAME, "--set", "population=20"]
    cmd += [
        "--set",
        "steps=120",
        "--set",
        "average_from=60",
        "--replicates",
        "2",
        "--out",
        str(out),
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    summary = json.loads((out / "summary.json").read_text())
    assert set(summary["metrics"]) == {"dol_index", "task_entropy"}
    assert summary["config"]["population"] == 20 and summary["status"] == "completed"
    assert len(summary["metrics"]["dol_index"]["values"]) == 2
    png = out / "plots" / "division_of_labour.png"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
