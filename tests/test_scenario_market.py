"""market: clearing and Sybil welfare by hand, ratings against fraud, Bertrand, each agent kind."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import jax.numpy as jnp
import numpy as np
import pytest
from conftest import TEST_LLM, market_cost_in, market_user_text

import scenarios
from scenarios.market.config import MarketConfig
from scenarios.market.dynamics import (
    clear_market,
    crashes,
    perceived_quality,
    price_volatility,
    reenter,
)
from scenarios.market.model import HEADLINE
from sim_core.errors import ConfigError
from society.llm.testserver import TestServer

SMALL = dict(population=3, consumers=20, capacity=8, steps=6)


def rows(result, metric, **labels):
    m = result.metrics
    m = m[m["metric"] == metric]
    for k, v in labels.items():
        m = m[m[k] == v]
    return m.sort_values(["replicate", "time"])


def values(result, key):
    return result.summary["metrics"][key]["values"]


# -- the rules by hand ---------------------------------------------------------------------------
def test_clearing_by_hand_three_firms_five_consumers():
    # Prices 1.25, 1, 1.5; stocks 1, 2, 5; quality 1; consumers arrive in order 0..4.
    out = clear_market(
        jnp.array([2.0, 1.5, 3.0, 1.0, 2.5]),
        jnp.arange(5),
        jnp.ones((5, 3), bool),
        jnp.array([1.25, 1.0, 1.5]),
        jnp.ones(3),
        jnp.ones(3),
        jnp.array([1, 2, 5]),
    )
    # c0 (v=2): surpluses .75, 1, .5 -> firm 1. c1 (1.5): .25, .5, 0 -> firm 1 (now sold out).
    # c2 (3): firm 0 (1.75 > 1.5). c3 (1): nothing is positive. c4 (2.5): only firm 2 has stock.
    assert out["choice"].tolist() == [1, 1, 0, -1, 2]
    assert out["sales"].tolist() == [1, 2, 1]
    assert out["revenue"].tolist() == [1.25, 2.0, 1.5]
    assert out["surplus"].tolist() == [1.0, 0.5, 1.75, 0.0, 1.0]


def test_arrival_order_and_visibility_decide_who_gets_scarce_stock():
    v = jnp.array([2.0, 3.0])
    one = jnp.ones(2)
    # One unit of the cheap listing: the first to arrive takes it, the other pays more.
    late = clear_market(
        v,
        jnp.array([1, 0]),
        jnp.ones((2, 2), bool),
        jnp.array([1.0, 1.5]),
        one,
        one,
        jnp.array([1, 5]),
    )
    assert late["choice"].tolist() == [1, 0] and late["surplus"].tolist() == [0.5, 2.0]
    # A consumer who does not see the cheap listing buys the other one.
    hidden = jnp.array([[False, True], [True, True]])
    out = clear_market(v, jnp.arange(2), hidden, jnp.array([1.0, 1.5]), one, one, jnp.array([5, 5]))
    assert out["choice"].tolist() == [1, 0]


def test_sybil_listing_lowers_welfare_exactly():
    v = jnp.array([2.0, 3.0])
    order = jnp.arange(2)
    honest = dict(price=jnp.array([1.5]), q=jnp.array([1.0]))
    base = clear_market(
        v, order, jnp.ones((2, 1), bool), honest["price"], honest["q"], honest["q"], jnp.array([5])
    )
    assert base["surplus"].tolist() == [0.5, 1.5]  # welfare 2.0 without the Sybil
    # A Sybil listing claims quality 1 at 1.25 but delivers 0.25: both buy it and lose.
    price, claim, true = jnp.array([1.5, 1.25]), jnp.array([1.0, 1.0]), jnp.array([1.0, 0.25])
    fraud = clear_market(v, order, jnp.ones((2, 2), bool), price, claim, true, jnp.array([5, 5]))
    assert fraud["choice"].tolist() == [1, 1]
    assert fraud["surplus"].tolist() == [2 * 0.25 - 1.25, 3 * 0.25 - 1.25]  # -0.75 - 0.5
    # With one Sybil unit only the first buyer is cheated; the second buys honestly.
    one = clear_market(v, order, jnp.ones((2, 2), bool), price, claim, true, jnp.array([5, 1]))
    assert one["surplus"].tolist() == [-0.75, 1.5]
    # Ratings that already reveal quality 0.25 make the listing worthless to both.
    rated = clear_market(v, order, jnp.ones((2, 2), bool), price, true, true, jnp.array([5, 5]))
    assert rated["surplus"].tolist() == [0.5, 1.5]


def test_ratings_reentry_volatility_and_crashes_by_hand():
    # 5 pseudo-ratings at the claim 1, then 5 units delivered at 0.25: (5 + 1.25) / 10.
    q = perceived_quality(
        np.array([1.0, 1.0]), np.array([1.25, 0.0]), np.array([5.0, 0.0]), 5.0, True
    )
    assert q.tolist() == [0.625, 1.0]
    assert perceived_quality(
        np.array([1.0]), np.array([1.25]), np.array([5.0]), 5.0, False
    ).tolist() == [1.0]
    fraud = np.array([True, False])
    assert reenter(fraud, np.array([0.6, 0.1]), 0.7).tolist() == [True, False]
    assert reenter(fraud, np.array([0.6, 0.1]), None).tolist() == [False, False]
    index = np.array([[2.0], [1.0], [2.0], [0.5]])
    # log returns -ln2, +ln2, -ln4: population std.
    r = np.log([0.5, 2.0, 0.25])
    assert price_volatility(index)[0] == pytest.approx(r.std())
    # Period 1 is checked against the warm-up index: 2.0 after 2.0 is no crash, after 3.0 it is.
    assert crashes(index, np.array([2.0]), 0.2, 0.75)[:, 0].tolist() == [False, True, False, True]
    assert crashes(index, np.array([3.0]), 0.2, 0.75)[:, 0].tolist() == [True, True, False, True]


# -- classic results -------------------------------------------------------------------------------
def test_undercutting_firms_reach_cost_and_cost_plus_firms_do_not():
    common = dict(SMALL, agents="rules", steps=24, initial_price=2.0, undercut_step=0.05)
    bertrand = scenarios.run("market", seed=1, write=False, strategies="undercut", **common)
    index = rows(bertrand, "price_index")["value"].to_numpy()
    # Every firm undercuts the cheapest rival by 0.05 a period: 2.0 - 0.05 t, floored at cost.
    np.testing.assert_allclose(index, np.maximum(2.0 - 0.05 * np.arange(1, 25), 1.0), rtol=1e-6)
    assert index[-1] == 1.0 and values(bertrand, "crash_rate") == [0.0]
    fixed = scenarios.run(
        "market", seed=1, write=False, strategies="cost-plus", markup=0.5, **common
    )
    assert (rows(fixed, "price_index")["value"] == 1.5).all()
    assert values(fixed, "price_volatility") == [0.0]
    # Consumers gain from Bertrand competition: price cost instead of cost x 1.5.
    assert values(bertrand, "consumer_welfare")[0] > values(fixed, "consumer_welfare")[0]


def test_ratings_drive_fraud_down_unless_sybils_reenter():
    common = dict(
        SMALL, agents="rules", strategies="cost-plus", steps=8, sybil=1, sybil_identities=2
    )
    no_ratings = scenarios.run("market", seed=2, write=False, ratings=False, **common)
    rated = scenarios.run("market", seed=2, write=False, reentry_rating=None, **common)
    back = scenarios.run("market", seed=2, write=False, reentry_rating=0.6, **common)

    def fraud_units(res):
        share, sold = rows(res, "fraud_rate")["value"], rows(res, "units_sold")["value"]
        return np.round(share.to_numpy() * sold.to_numpy() * 20, 6)

    # The Sybils price off the LAST period's honest prices. Period 1: 0.9 x initial_price 2.0
    # = 1.8 > the cost-plus price 1.5 at the same claimed quality, and the honest firms'
    # 3 x 8 units cover all 20 consumers: the Sybils sell nothing. From period 2 they post
    # 0.9 x 1.5 = 1.35 < 1.5 and sell out: 2 x 8 units (at least 16 consumers value the good
    # above 1.35, as these runs show). Without ratings they do so every period. With ratings,
    # 8 units delivered at quality 0.2 leave a rating of (5 + 1.6) / 13 = 0.508: every
    # consumer then prefers an honest listing (v x 0.508 - 1.35 < v - 1.5 for all v > 0.31),
    # so fraud stops. An identity rated below reentry_rating = 0.6 comes back fresh and cheats
    # again. These counts are exact for any arrival order (no tolerance needed).
    assert fraud_units(no_ratings).tolist() == [0.0] + [16.0] * 7
    assert fraud_units(rated).tolist() == [0.0, 16.0] + [0.0] * 6
    assert fraud_units(back).tolist() == [0.0] + [16.0] * 7
    assert rows(back, "sybil_reentries")["value"].tolist() == [0.0] + [2.0] * 7
    assert values(no_ratings, "fraud_rate")[0] == pytest.approx(
        7 * 16 / rows(no_ratings, "units_sold")["value"].sum() / 20
    )
    assert rows(rated, "sybil_rating")["value"].iloc[-1] == pytest.approx(6.6 / 13)
    welfare = [values(r, "consumer_welfare")[0] for r in (no_ratings, back, rated)]
    assert welfare[0] == pytest.approx(welfare[1]) and welfare[2] > welfare[0]


def test_every_honest_price_is_clipped_and_a_fall_into_period_1_is_a_crash():
    common = dict(SMALL, agents="rules", strategies="cost-plus", initial_price=2.0)
    # Cost-plus with markup 4 wants 1 x 5 = 5: rule firms are held to max_price 4 too.
    high = scenarios.run("market", seed=1, write=False, markup=4.0, max_price=4.0, **common)
    assert (rows(high, "price", kind="rules")["value"] == 4.0).all()
    # Markup 0.1: the index falls from the warm-up's 2.0 to 1.1 < (1 - 0.2) x 2.0 in period 1,
    # then stays at 1.1 (>= cost): one crash in 6 periods.
    low = scenarios.run("market", seed=1, write=False, markup=0.1, crash_drop=0.2, **common)
    assert rows(low, "crash")["value"].tolist() == [1.0] + [0.0] * 5
    assert values(low, "crash_rate") == [pytest.approx(1 / 6)]


# -- each kind of agent ------------------------------------------------------------------------------
def firm_reply(body: dict) -> str:
    # A rule-based stand-in for the model: cost + 0.75, a listing naming its period; the
    # firm in period 3 answers nonsense (the fallback keeps its last price).
    period = int(re.search(r"This is period (\d+) of", market_user_text(body)).group(1))
    if period == 3:
        return "no idea"
    return json.dumps(
        {
            "reason": "markup",
            "price": market_cost_in(body) + 0.75,
            "listing": f"Fresh goods p{period}",
        }
    )


@pytest.fixture(scope="module")
def server():
    srv = TestServer(reply=firm_reply).start_in_thread()
    yield srv
    srv.stop()


def test_llm_firms_price_from_the_prompt(server, tmp_path):
    before = len(server.bodies)
    res = scenarios.run(
        "market",
        seed=3,
        out=tmp_path / "run",
        llm=TEST_LLM,
        api_base=server.url + "/v1",
        agents="llm",
        sybil=1,
        sybil_identities=1,
        visible=3,
        **SMALL,
    )
    bodies = server.bodies[before:]
    # 3 firms x 6 periods, one request each (the period-3 replies fail, the repair fails too,
    # and the fallback keeps the last price, 1.75; the next period asks again).
    prompts = [market_user_text(b) for b in bodies]
    assert sum("This is period 1 of 6" in p for p in prompts) == 3
    assert (rows(res, "price", kind="llm")["value"] == 1.75).all()
    first = next(p for p in prompts if "This is period 2 of 6" in p)
    assert "Your cost is 1.00 per unit sold" in first and "up to 8 units" in first
    assert "period 1: price 1.75" in first  # its own history
    assert '"Fresh goods p1"' in first  # rivals' listings, quoted
    assert '"Premium product' in first  # the Sybil identity's listing is shown too
    system = bodies[0]["messages"][0]["content"]
    assert "Your profit per period = (price - 1.00) x units sold" in system
    # Buyers are rules that ignore listing texts: the prompt says who reads them.
    assert "Buyers never read listing texts: they choose on price and rating only" in system
    assert "shown to the other sellers" in system
    # The client's accounting is recorded, and the cache lives in the run directory.
    total = res.metrics.query("cohort != cohort and agent != agent").set_index("metric")["value"]
    assert total["llm_requests"] == 18 and total["llm_fallbacks"] == 3  # period 3 falls back
    assert len(bodies) == 18 + 3  # one repair attempt for each bad reply
    assert (tmp_path / "run" / "llm-cache.sqlite").exists()


def test_mixed_run_compares_kinds_whatever_the_replicate_batches(server):
    # Shapes as in the LLM test above (one Sybil identity, visible=3): compilations are shared.
    params = dict(
        SMALL,
        sybil=1,
        sybil_identities=1,
        visible=3,
        agents="mixed",
        split="rules:1,learned:1,llm:1",
        strategies="cost-plus",
        markup=0.25,
    )

    def run(**kw):
        return scenarios.run(
            "market",
            seed=4,
            replicates=2,
            write=False,
            llm=TEST_LLM,
            api_base=server.url + "/v1",
            **kw,
        )

    res = run(**params)
    m = res.summary["metrics"]
    for kind in ("rules", "learned", "llm"):
        assert len(m[f"price.{kind}"]["values"]) == 2
        assert set(rows(res, "price", kind=kind)["replicate"]) == {0, 1}
    assert m["price.llm"]["values"] == [1.75, 1.75]  # the stand-in's cost + 0.75
    assert m["price.rules"]["values"] == [1.25, 1.25]  # cost-plus with markup 0.25
    learned = rows(res, "price", kind="learned")["value"]
    assert ((learned > 0) & (learned < 4.0)).all()  # a x max_price, a in (0, 1)
    # Replicates draw their own consumers, arrivals and policies.
    assert m["consumer_welfare"]["values"][0] != m["consumer_welfare"]["values"][1]
    # Every replicate draws from its own streams and every learned firm from (key, agent
    # id): neither a rerun nor the replicate batches (one per replicate) change the results.
    again, one = run(**params), run(batch_replicates=1, **params)
    for k in (*HEADLINE, "crash_rate", "price.learned", "profit.learned", "profit.rules"):
        assert values(again, k) == values(res, k), k
        assert values(one, k) == values(res, k), k


def test_rule_firms_give_identical_results_in_any_replicate_batches():
    # Same shapes as the mixed run above (compilations shared); rules are exact.
    params = dict(SMALL, sybil=1, sybil_identities=1, visible=3, agents="rules")
    a = scenarios.run("market", seed=5, replicates=2, write=False, **params)
    one = scenarios.run("market", seed=5, replicates=2, batch_replicates=1, write=False, **params)
    for k in (*HEADLINE, "crash_rate"):
        assert values(one, k) == values(a, k), k
    assert values(a, "consumer_welfare")[0] != values(a, "consumer_welfare")[1]


# -- configuration and the command line ------------------------------------------------------------
@pytest.mark.parametrize(
    ("params", "needle"),
    [
        ({"agents": "mixed", "split": "rules:1,bots:2"}, "accepted: rules, learned, llm"),
        ({"strategies": "cost-plus,greedy"}, "accepted: cost-plus, undercut, adaptive"),
        ({"value_min": 3.0, "value_max": 2.0}, "value_max (2.0) must be >= value_min (3.0)"),
        ({"visible": 9}, "visible (9) must be <= the number of listings"),
        ({"steps": 1}, "steps"),
        ({"initial_price": 5.0}, "initial_price (5.0) must be <= max_price (4.0)"),
        ({"unit_cost": 4.0}, "unit_cost (4.0) must be < max_price (4.0)"),
        ({"colour": "red"}, "unknown parameter 'colour'"),
    ],
)
def test_bad_parameters(params, needle):
    with pytest.raises(ConfigError, match=re.escape(needle)) as info:
        scenarios.run("market", write=False, **{"agents": "rules", **params})
    assert "\n" not in str(info.value)


def test_config_documents_every_parameter():
    assert all(f.description for f in MarketConfig.model_fields.values())
    assert "market" in scenarios.names()


@pytest.mark.plots
def test_cli_run_writes_summary_and_plots(tmp_path):
    out = tmp_path / "cli"
    cmd = [sys.executable, "-m", "society.cli", "run", "market", "--out", str(out), "--seed", "1"]
    for kv in ("agents=rules", "population=3", "consumers=20", "capacity=8", "steps=6", "sybil=1"):
        cmd += ["--set", kv]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    summary = json.loads((out / "summary.json").read_text())
    assert {"price_volatility", "consumer_welfare", "fraud_rate"} <= set(summary["metrics"])
    assert summary["status"] == "completed" and summary["config"]["population"] == 3
    assert (out / "plots" / "prices.png").stat().st_size > 0


def test_arrival_order_is_jax_permutation_and_stable_order_breaks_ties_by_index():
    import jax

    from scenarios.market.dynamics import arrival_order, stable_order

    # The fast arrival order must be the very permutation jax draws (same seed, same run).
    for n in (1, 2, 7, 100, 129, 1625, 1626):
        for k in jax.random.split(jax.random.key(n), 8):
            assert (arrival_order(k, n) == jax.random.permutation(k, n)).all(), n
    # Keys equal in their high bits (the packed sort's ties) and fully equal keys.
    rng = np.random.default_rng(0)
    hi = rng.integers(0, 4, (50, 300)).astype(np.uint32) << np.uint32(30)
    bits = hi + rng.integers(0, 3, (50, 300)).astype(np.uint32)
    got = np.asarray(jax.vmap(stable_order)(jnp.asarray(bits)))
    np.testing.assert_array_equal(got, np.argsort(bits, axis=1, kind="stable"))


# -- the port onto the study contract ---------------------------------------------------------
# Means and standard deviations over 80 replicates (seed 11) of the model before it was a Study
# (its hand-written engine, commit e5355fd). The port draws other numbers (consumers, arrival
# orders, strategies and kinds come from the world's and the framework's streams; a
# replicate's learned firms learn from it alone), so the values agree only in distribution.
BEFORE = {
    "rules": ({"agents": "rules", "sybil": 1, "steps": 30},
              {"price_volatility": (0.0251, 0.0018), "consumer_welfare": (0.0539, 0.175),
               "fraud_rate": (0.6077, 0.1116), "crash_rate": (0.0, 0.0)}),
    "mixed": ({"agents": "mixed", "split": "rules:1,learned:1", "population": 4, "consumers": 20,
               "steps": 10, "learning_rate": 0.1},  # the headline pin's run
              {"price_volatility": (0.2589, 0.1456), "consumer_welfare": (1.0504, 0.2622),
               "crash_rate": (0.175, 0.1268), "price.rules": (1.4145, 0.0515),
               "profit.rules": (1.3774, 1.0936), "price.learned": (2.3546, 0.5646),
               "profit.learned": (-1.9766, 1.6286)}),
}  # fmt: skip


@pytest.mark.parametrize("case", sorted(BEFORE))
def test_the_study_is_statistically_the_model_it_replaced(case):
    cfg, before = BEFORE[case]
    got = scenarios.run("market", seed=5, replicates=20, write=False, **cfg).summary["metrics"]
    for metric, (mean, sd) in before.items():
        v = np.asarray(got[metric]["values"])
        # Welch's two-sample z at 3 standard errors of the difference of means (80 replicates
        # before, 20 now): a false alarm about 1 time in 370 per metric; it catches a shift of
        # 0.0015 in the rules' price volatility (6%), 0.05 in the mixed run's rule prices.
        se = np.sqrt(sd**2 / 80 + v.var(ddof=1) / 20)
        assert abs(v.mean() - mean) <= 3 * se, (metric, v.mean(), mean, se)
