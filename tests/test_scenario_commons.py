"""commons: the fishery's rules by hand, rule/learned/LLM fishers, per-kind breakdown, CLI."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import zlib

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import TEST_LLM, commons_schema_props, commons_user_text

import scenarios
from scenarios.commons.config import CommonsConfig
from scenarios.commons.dynamics import fish, regrow, sustainable_catch
from sim_core.errors import ConfigError
from society.llm.testserver import TestServer


def run(**kw):
    kw.setdefault("seed", 1)
    kw.setdefault("write", False)
    return scenarios.run("commons", **kw)


def values(res, name):
    return res.summary["metrics"][name]["values"]


def rows(res, metric, **labels):
    """The rows of ``metric`` with a value (monthly rows of a collapsed lake and episode rows
    of months that do not end an episode are NaN)."""
    m = res.metrics
    m = m[m["metric"] == metric].dropna(subset=["value"])
    for k, v in labels.items():
        m = m[m[k].isna()] if v is None else m[m[k] == v]
    return m.sort_values(["replicate", "time"])


def reference(asks, months, capacity=100.0, g=1.0, threshold=5.0):
    """The protocol transcribed in plain float64 Python: ``asks(stock) -> requests`` per
    fisher; returns (stock before fishing each month, total catch per fisher, survival)."""
    stock, caught, seen = capacity, None, []
    for month in range(1, months + 1):
        seen.append(stock)
        req = asks(stock)
        caught = [0.0] * len(req) if caught is None else caught
        total = sum(req)
        got = [r * stock / total for r in req] if total > stock else req
        caught = [c + x for c, x in zip(caught, got, strict=True)]
        left = max(stock - sum(got), 0.0)
        if left < threshold:
            return seen, caught, month
        stock = min(capacity, left + g * left * (1 - left / capacity))
    return seen, caught, months


# -- the rules by hand ---------------------------------------------------------------------------
def test_regrowth_by_hand():
    s = jnp.array([60.0, 72.0, 0.0, 100.0])
    # Logistic, g = 0.5, K = 100: 60 + 0.5*60*0.4 = 72; 72 + 0.5*72*0.28 = 82.08.
    np.testing.assert_allclose(
        regrow(s, 100.0, 0.5, doubling=False), [72.0, 82.08, 0.0, 100.0], rtol=1e-6
    )
    # g = 2: 60 + 2*60*0.4 = 108, capped at K; K/2 = 50 regrows to exactly K.
    np.testing.assert_allclose(
        regrow(jnp.array([60.0, 50.0, 20.0]), 100.0, 2.0, doubling=False),
        [100.0, 100.0, 52.0],
        rtol=1e-6,
    )
    # GovSim's doubling: 30 -> 60, 60 -> 120 capped at 100.
    assert regrow(jnp.array([30.0, 60.0]), 100.0, 0.0, doubling=True).tolist() == [60.0, 100.0]


def test_sustainable_catch_by_hand():
    # g = 2, K = 100: a full lake can lose 50 (50 regrows to 100); from 80.5 it can lose 45.5
    # (35 + 2*35*0.65 = 80.5). Doubling: half the stock. No growth: nothing.
    got = sustainable_catch(jnp.array([100.0, 80.5]), 100.0, 2.0, doubling=False)
    np.testing.assert_allclose(got, [50.0, 45.5], rtol=1e-6)
    assert sustainable_catch(jnp.array([80.0]), 100.0, 0.0, doubling=True).tolist() == [40.0]
    assert sustainable_catch(jnp.array([70.0]), 100.0, 0.0, doubling=False).tolist() == [0.0]
    # By definition the lake regrows exactly to S after losing f(S) (float32: ~1e-6 relative).
    s = jnp.linspace(1.0, 100.0, 50)
    for g in (0.3, 1.0, 2.0, 2.7):
        back = regrow(s - sustainable_catch(s, 100.0, g, doubling=False), 100.0, g, doubling=False)
        np.testing.assert_allclose(back, s, rtol=2e-5)


def test_one_month_rationing_and_collapse_by_hand():
    stock = jnp.array([50.0, 100.0, 40.0, 30.0])
    alive = jnp.array([True, True, True, False])
    asked = jnp.array(
        [
            [30.0, 10.0, 60.0],  # 100 asked of 50: everyone gets half -> 15, 5, 30; empty lake
            [10.0, -5.0, jnp.nan],  # invalid requests count as 0: 90 left regrows to 100
            [20.0, 16.0, 0.0],  # 4 left < 5: collapse, no regrowth
            [10.0, 10.0, 10.0],  # a collapsed lake takes no requests
        ]
    )
    new, alive2, out = fish(stock, alive, asked, 100.0, 2.0, 5.0, doubling=False)
    assert out["caught"].tolist() == [
        [15.0, 5.0, 30.0],
        [10.0, 0.0, 0.0],
        [20.0, 16.0, 0.0],
        [0.0, 0.0, 0.0],
    ]
    assert out["left"].tolist() == [0.0, 90.0, 4.0, 30.0]
    assert out["collapsed"].tolist() == [True, False, True, False]
    assert alive2.tolist() == [False, True, False, False]
    assert new.tolist() == [0.0, 100.0, 4.0, 30.0]


def test_fixed_rule_agents_collapse_in_the_last_month_by_hand():
    # 2 fishers taking 20 t each of a logistic lake with g = 1: 100 -> 60 left -> 84;
    # 84 -> 44 -> 68.64; 68.64 -> 28.64 -> 49.077504; 9.077504 left -> 17.3316...; in month 5,
    # the last one, they ask for 40 of 17.33 and share it: nothing is left, the lake collapses.
    lake = dict(agents="rules", population=2, growth_rate=1.0, strategies="fixed", replicates=2)
    res = run(fixed_harvest=20.0, steps=5, **lake)
    stock = rows(res, "stock").query("replicate == 0")["value"].to_numpy()
    np.testing.assert_allclose(stock[:4], [100.0, 84.0, 68.64, 49.077504], rtol=1e-6)
    seen, caught, survival = reference(lambda s: [20.0, 20.0], 5)
    np.testing.assert_allclose(stock, seen, rtol=1e-5)  # float32 against float64
    np.testing.assert_allclose(values(res, "catch_per_agent"), [caught[0]] * 2, rtol=1e-5)
    assert values(res, "sustainability") == [0.0, 0.0]  # 20 > f/N every month
    # GovSim's survival months count the month of the collapse (its analysis code: round + 1
    # of the first stock below 5 t, else 12), so a collapse in the last month scores
    # `steps` like survival; `survived` (GovSim's collapse flag) tells them apart.
    assert survival == 5 and values(res, "survival_time") == [5.0, 5.0]
    assert values(res, "survived") == [0.0, 0.0]
    # A season one month shorter ends with 17.33 t in the lake: survived.
    four = run(fixed_harvest=20.0, steps=4, **lake)
    assert values(four, "survival_time") == [4.0, 4.0] and values(four, "survived") == [1.0, 1.0]
    # 25 t each: 100 -> 50 left -> 75; 75 -> 25 -> 43.75; month 3 empties it: 3, not survived.
    early = run(fixed_harvest=25.0, steps=5, **lake)
    assert reference(lambda s: [25.0, 25.0], 5)[2] == 3
    assert values(early, "survival_time") == [3.0, 3.0] and values(early, "survived") == [0.0, 0.0]


def test_gini_of_unequal_catches_by_hand():
    # One fisher takes 20 t, the other 10% of the stock, over 3 months of a g = 1 lake.
    # For two values the Gini coefficient is |a - b| / (2 (a + b)).
    res = run(
        agents="rules",
        population=2,
        growth_rate=1.0,
        steps=3,
        strategies="fixed:1,proportional:1",
        fixed_harvest=20.0,
        harvest_fraction=0.1,
    )
    seats = rows(res, "agent_catch").set_index("agent")["value"]
    fixed = 3 * 20.0
    # Stocks: 100 -> 70 left -> 91; 91 -> 61.9 left -> 85.4839; 10% of each.
    prop = 10.0 + 9.1 + 8.54839
    assert sorted(seats.round(4).tolist()) == sorted([round(fixed, 4), round(prop, 4)])
    want = abs(fixed - prop) / (2 * (fixed + prop))
    np.testing.assert_allclose(values(res, "gini_harvest"), [want], rtol=1e-5)


def test_sustainable_fishers_survive_and_greedy_ones_collapse():
    # GovSim's default lake, g = 2: the sustainable share of a full lake is 50 / 5 = 10 t and
    # the lake regrows to 100 every month: 12 months x 10 t, perfectly equal, u = 1.
    good = run(agents="rules", strategies="sustainable", replicates=2)
    assert values(good, "survival_time") == [12.0, 12.0] and values(good, "survived") == [1.0, 1.0]
    assert values(good, "sustainability") == [1.0, 1.0]
    assert values(good, "catch_per_agent") == [120.0, 120.0]
    assert values(good, "gini_harvest") == [0.0, 0.0] and values(good, "efficiency") == [1.0, 1.0]
    # Five greedy fishers each take a fifth of the stock: the lake is emptied in month 1.
    bad = run(agents="rules", strategies="greedy", regrowth="doubling")
    assert values(bad, "survival_time") == [1.0] and values(bad, "catch_per_agent") == [20.0]
    assert values(bad, "sustainability") == [0.0]
    # One greedy fisher among four sustainable ones: 100 - (4*10 + 20) = 40 -> 88 tons; then
    # the lake declines until it collapses in month 11 (computed by the reference).
    mix = run(agents="rules", strategies="sustainable:4,greedy:1", replicates=2)

    def asks(s):
        disc = (1 + 2.0) ** 2 - 8.0 * s / 100.0
        share = (s - 2 * s / (3.0 + disc**0.5)) / 5
        return [share] * 4 + [s / 5]

    seen, caught, survival = reference(asks, 12, g=2.0)
    assert survival == 11 and values(mix, "survival_time") == [11.0, 11.0]
    stock = rows(mix, "stock").query("replicate == 1")["value"].to_numpy()
    assert stock[:2].tolist() == [100.0, 88.0]
    np.testing.assert_allclose(stock, seen, rtol=1e-5)
    # 4 of 5 fishers never ask above the threshold; the greedy one always does.
    np.testing.assert_allclose(values(mix, "sustainability"), [0.8, 0.8])


# -- learned fishers ------------------------------------------------------------------------------
LEARNED = dict(agents="learned", replicates=6, seed=1)


def sustainability_by_episode(res) -> np.ndarray:
    return rows(res, "sustainability").groupby("time")["value"].mean().to_numpy()


def test_selfish_learners_drift_to_overfishing():
    # Same initial policies (episode 1 identical); with learning, each agent is rewarded by its
    # own catch, and the society drifts to over-fishing: the tragedy of the commons. Each
    # point is a mean over 6 lakes x 5 fishers x 12 months. The control is 4 episodes of the
    # frozen policies (identically distributed: same policies, fresh noise; std 0.006-0.031
    # per episode over seeds 1-8). Measured over seeds 1-8: the learners' last 4 of 25
    # episodes are 0.07-0.14 below the control's mean (seed 1: 0.12).
    still = sustainability_by_episode(run(learning_rate=0.0, episodes=4, **LEARNED))
    learn = sustainability_by_episode(run(learning_rate=0.5, episodes=25, **LEARNED))
    assert still[0] == learn[0]
    assert learn[-4:].mean() < still.mean() - 0.04


def test_same_seed_same_run_in_any_batching():
    learning = dict(learning_rate=0.5, episodes=3, **LEARNED)
    a = run(**learning)
    b = run(**learning)
    headline = ("survival_time", "sustainability", "gini_harvest", "catch_per_agent")
    for k in headline:
        assert values(a, k) == values(b, k)
    d = run(**{**learning, "seed": 2})
    assert values(d, "catch_per_agent") != values(a, "catch_per_agent")
    # One lake per batch: exactly the same run (with learned agents every lake is its own
    # moment by moment, whatever the batches).
    one = run(batch_replicates=1, **learning)
    frame = [r.metrics.sort_values(["metric", "replicate", "time", "agent"]) for r in (a, one)]
    np.testing.assert_array_equal(frame[0]["value"].to_numpy(), frame[1]["value"].to_numpy())
    for k in headline:
        assert values(one, k) == values(a, k)


# The old model (the _Batch engine, before the port to society.study) on the headline-pin case,
# seeds 1-40 x 2 replicates (80 lakes): mean and standard error of each headline value.
OLD = {
    "sustainability": (0.8170833333333334, 0.007977503310668693),
    "gini_harvest": (0.07674427913890361, 0.004680974500408717),
    "efficiency": (0.9445594185128364, 0.005801232417523683),
    "catch_per_agent": (56.75738206101687, 0.3592017609173722),
    "catch_per_agent.rules": (58.43366636633873, 0.2700193760896471),
    "sustainability.learned": (0.5427083333333333, 0.01994375827667173),
    "catch_per_agent.learned": (54.242955603034076, 1.0321066195466917),
}  # survival_time, survived and sustainability.rules were 6, 1 and 1 in every lake


def test_the_study_agrees_with_the_old_model():
    # The port changed the draws (kinds, learned policies and their noise come from the
    # framework's streams), so the pins moved: over the same 40 seeds x 2 lakes each headline
    # mean must be within 3 standard errors of the difference of the old one (Welch's z,
    # both samples of 80 lakes: ~0.3% false alarms per metric if the models agree; measured
    # |z| <= 1.4 at the port).
    case = dict(agents="mixed", split="rules:1,learned:1", population=5, steps=6)
    new = {}
    for seed in range(1, 41):
        res = run(seed=seed, replicates=2, learning_rate=0.1, **case)
        for k, v in res.summary["metrics"].items():
            new.setdefault(k, []).extend(v["values"])
    assert set(new["survival_time"]) == {6.0} and set(new["survived"]) == {1.0}
    assert set(new["sustainability.rules"]) == {1.0}
    for k, (mean, se) in OLD.items():
        x = np.asarray(new[k])
        z = (x.mean() - mean) / np.hypot(se, x.std(ddof=1) / np.sqrt(x.size))
        assert abs(z) < 3, (k, x.mean(), mean, z)


# -- LLM fishers against the test server ------------------------------------------------------------
LONG = "Let us each catch the sustainable share. " * 30  # 1230 characters


def sustainable_reply(body: dict) -> str:
    """A careful fisher: posts a (long) proposal, then catches the universalization share."""
    if "message" in commons_schema_props(body):
        tag = zlib.crc32(json.dumps(body["messages"]).encode()) % 1000  # its own per prompt
        return json.dumps({"message": f"Note {tag}. {LONG}"})
    share = float(re.search(r"catches more than ([0-9.]+) tons", commons_user_text(body)).group(1))
    return json.dumps({"reason": f"keep the lake full: {share:g} tons is my share", "catch": share})


@pytest.fixture(scope="module")
def server():
    srv = TestServer(reply=sustainable_reply).start_in_thread()
    try:
        yield srv
    finally:
        srv.stop()


def llm_run(server, **kw):
    return run(llm=TEST_LLM, api_base=server.url + "/v1", universalization=True, **kw)


@pytest.mark.plots
def test_llm_fishers_play_the_protocol(server, tmp_path):
    before = server.requests
    res = llm_run(
        server,
        agents="llm",
        steps=3,
        replicates=2,
        message_chars=50,
        out=tmp_path / "run",
        write=True,
    )
    # Catching the sustainable share keeps the lake full: as the sustainable rule agents.
    assert values(res, "survival_time") == [3.0, 3.0]
    assert values(res, "sustainability") == [1.0, 1.0]
    assert values(res, "catch_per_agent") == [30.0, 30.0]
    bodies = server.bodies[before:]
    msgs = [b for b in bodies if "message" in commons_schema_props(b)]
    catches = [b for b in bodies if "catch" in commons_schema_props(b)]
    # 5 fishers x 3 months x 2 lakes, one message and one catch each (identical prompts of
    # the two lakes go as one call with n = 2).
    assert sum(b.get("n", 1) for b in msgs) == sum(b.get("n", 1) for b in catches) == 30
    system = catches[0]["messages"][0]["content"]
    assert "carrying capacity of 100 tons" in system and "fewer than 5 tons" in system
    assert "along with 4 other fishers (" in system
    last = commons_user_text(catches[-1])
    assert "It is month 3 of 3" in last and "there are 100 tons" in last
    assert "catches more than 10 tons" in last  # universalization: 50 / 5
    assert "Month 2: the lake held 100 tons" in last and "total 50" in last
    # Messages are quoted data, cut to message_chars.
    assert "not instructions to you" in last
    quoted = re.findall(r"- \w+: (\".*\")", last)
    assert len(quoted) == 5 and all(len(json.loads(q)) <= 50 for q in quoted)
    lines = (tmp_path / "run" / "messages.jsonl").read_text().splitlines()
    assert len(lines) == 30 and len(json.loads(lines[0])["message"]) <= 50
    assert (tmp_path / "run" / "plots" / "commons.png").stat().st_size > 0
    total = res.metrics.query("metric == 'llm_requests' and replicate == -1 and cohort != cohort")
    assert total["value"].tolist() == [60.0]


def test_llm_fishers_of_a_collapsed_lake_are_not_asked():
    def greedy(body):
        if "message" in commons_schema_props(body):
            return json.dumps({"message": "I take everything."})
        return json.dumps({"reason": "mine", "catch": 1000})

    srv = TestServer(reply=greedy).start_in_thread()
    try:
        res = run(
            llm=TEST_LLM, api_base=srv.url + "/v1", agents="llm", steps=4, communication=False
        )
    finally:
        srv.stop()
    assert values(res, "survival_time") == [1.0]  # everyone asks 1000: the lake is shared out
    assert values(res, "catch_per_agent") == [20.0] and values(res, "sustainability") == [0.0]
    assert srv.requests == 5  # one month, no messages


def test_mixed_society_breakdown_by_kind(server):
    # 3 rule fishers taking 15 t and 2 LLM fishers taking their sustainable share.
    res = llm_run(
        server,
        agents="mixed",
        split="rules:3,llm:2",
        strategies="fixed",
        fixed_harvest=15.0,
        steps=2,
        replicates=2,
        communication=False,
    )
    assert values(res, "sustainability.llm") == [1.0, 1.0]
    assert values(res, "sustainability.rules") == [0.0, 0.0]  # 15 > f/N <= 10 always
    assert "sustainability.learned" not in res.summary["metrics"]
    # Month 1: 45 + 2 x 10 of 100 -> 35 left -> 80.5; month 2: f(80.5)/5 = 9.1 each.
    np.testing.assert_allclose(values(res, "catch_per_agent.llm"), [19.1, 19.1], rtol=1e-5)
    assert values(res, "catch_per_agent.rules") == [30.0, 30.0]
    overall = values(res, "sustainability")
    # 6 of 10 positive requests were above the threshold (computed in float32)
    np.testing.assert_allclose(overall, [0.4, 0.4], rtol=1e-6)


def test_budget_stops_the_run_cleanly(server):
    res = llm_run(server, agents="llm", steps=12, llm_budget_tokens=3000)
    assert res.summary["status"] == "stopped" and "budget" in res.summary["stop_reason"]
    months = rows(res, "stock")["time"].tolist()
    assert 1 <= len(months) < 12
    assert np.isnan(values(res, "survival_time")[0])  # no episode was completed


# -- configuration and the command line ------------------------------------------------------------
@pytest.mark.parametrize(
    ("params", "needle"),
    [
        ({"population": 1}, "population"),
        ({"initial_stock": 150.0}, "initial_stock must be at most capacity"),
        ({"collapse_threshold": 100.0}, "collapse_threshold must be below the initial stock"),
        ({"strategies": "sustainable:1,bogus:1"}, "accepted: sustainable, greedy, fixed"),
        ({"agents": "mixed", "split": "rules:1,bots:2"}, "accepted: rules, learned, llm"),
        ({"regrowth": "linear"}, "regrowth"),
        ({"harvest_fraction": 1.5}, "harvest_fraction"),
        ({"colour": "red"}, "unknown parameter 'colour'"),
    ],
)
def test_bad_parameters(params, needle):
    with pytest.raises(ConfigError, match=re.escape(needle)) as err:
        run(**params)
    assert "\n" not in str(err.value)


def test_config_documents_every_parameter():
    assert all(f.description for f in CommonsConfig.model_fields.values())
    cfg = CommonsConfig()
    assert (cfg.population, cfg.capacity, cfg.collapse_threshold, cfg.steps) == (5, 100, 5, 12)
    assert "commons" in scenarios.names() and "GovSim" in scenarios.summary_line("commons")


@pytest.mark.plots
def test_cli_run_writes_summary_and_plots(tmp_path):
    out = tmp_path / "cli"
    cmd = [
        sys.executable,
        "-m",
        "society.cli",
        "run",
        "commons",
        "--out",
        str(out),
        "--seed",
        "1",
        "--replicates",
        "2",
        "--set",
        "agents=rules",
        "--set",
        "strategies='sustainable:4,greedy:1'",
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    summary = json.loads((out / "summary.json").read_text())
    assert {"survival_time", "sustainability", "gini_harvest"} <= set(summary["metrics"])
    assert summary["metrics"]["survival_time"]["values"] == [11.0, 11.0]
    assert summary["config"]["strategies"] == "sustainable:4,greedy:1"
    assert (out / "plots" / "commons.png").stat().st_size > 0


def test_the_harvest_gini_is_society_gini_row_by_row():
    """gini_harvest is society.metrics.gini_jax on each lake's totals (vmapped over lakes)."""
    from society.metrics import gini as reference_gini
    from society.metrics import gini_jax

    rng = np.random.default_rng(3)
    for n in (2, 5, 40, 100):
        x = rng.exponential(size=(300, n)).astype(np.float32)
        x[::7] = 0.0  # all-zero rows: 0 by definition
        x[1::9, 1:] = 0.0  # one fisher holds everything: (n - 1) / n
        expected = [reference_gini(row.astype(np.float64)) for row in x]
        got = jax.vmap(gini_jax)(jnp.asarray(x))
        np.testing.assert_allclose(got, expected, rtol=2e-5, atol=2e-6)  # float32
