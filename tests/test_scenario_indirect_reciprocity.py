"""indirect-reciprocity: rules on hand-computed cases, classic results, each kind of agent, CLI."""

from __future__ import annotations

import json
import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import scenarios
from scenarios.indirect_reciprocity.config import IndirectReciprocityConfig
from scenarios.indirect_reciprocity.dynamics import (
    NORM_TABLES,
    assess,
    donor_views,
    draw_recipients,
    make_game,
)
from scenarios.indirect_reciprocity.dynamics import settle as settle_one
from sim_core.errors import ConfigError
from society.llm.testserver import TestServer
from society.population import kinds_of

settle = jax.jit(settle_one)  # one compilation per kind of game, not one per primitive and shape

N, R = 100, 4  # most runs share these shapes, so they share compilations


def run(**kw):
    seed = kw.pop("seed", 1)
    replicates = kw.pop("replicates", R)
    kw.setdefault("population", N)
    return scenarios.run(
        "indirect-reciprocity", seed=seed, replicates=replicates, write=False, **kw
    )


def headline(res, name):
    return np.asarray(res.summary["metrics"][name]["values"])


def final(res, metric, strategy):
    """Per replicate, the metric's row of the last round (give_if_*: over the averaged rounds)."""
    f = res.metrics
    f = f[(f.metric == metric) & (f.strategy == strategy)]
    return f[f.time == f.time.max()].sort_values("replicate")["value"].to_numpy()


# -- rules on small cases computed by hand ------------------------------------------------------
def test_norm_tables_by_hand():
    gave = jnp.array([1, 0, 1, 0])
    good = jnp.array([1, 1, 0, 0])  # give/refuse a good recipient, give/refuse a bad one
    table = {
        norm: assess(jnp.asarray(t, jnp.int8), gave, good).tolist()
        for norm, t in NORM_TABLES.items()
    }
    assert table == {
        "image-scoring": [1, 0, 1, 0],  # only the act counts
        "standing": [1, 0, 1, 1],  # refusing a bad recipient is justified
        "stern-judging": [1, 0, 0, 1],  # helping a bad recipient is bad too
    }


def test_public_round_by_hand():
    # Donors 0, 1, 2 meet recipients 1, 2, 0; 0 and 2 give, 1 refuses; agent 1 starts bad.
    rep = jnp.array([1, 0, 1], jnp.int8)
    j = jnp.array([1, 2, 0])
    a = jnp.array([1, 0, 1])
    key = jax.random.key(0)
    expected = {"image-scoring": [1, 0, 1], "standing": [1, 0, 1], "stern-judging": [0, 0, 1]}
    for norm, want in expected.items():
        game = make_game(norm, private=False, q=1.0, b=2.0, c=0.5)
        new, gave, pay = settle(game, rep, j, a, key)
        assert new.tolist() == want, norm
        assert gave.tolist() == [1, 0, 1]
        assert pay.tolist() == [-0.5 + 2.0, 2.0, -0.5]  # 0 gives and receives from 2
    unseen = make_game("stern-judging", private=False, q=0.0, b=2.0, c=0.5)
    assert settle(unseen, rep, j, a, key)[0].tolist() == [1, 0, 1]  # nobody observed
    clumsy = make_game("standing", private=False, q=1.0, b=2.0, c=0.5, execution_error=1.0)
    new, gave, pay = settle(clumsy, rep, j, a, key)
    # Every gift fails: nobody pays or receives; donors 1 and 2 refused good recipients (bad),
    # donor 0 refused agent 1, who is bad: justified under standing (good).
    assert gave.tolist() == [0, 0, 0] and pay.tolist() == [0.0, 0.0, 0.0]
    assert new.tolist() == [1, 0, 0]
    liar = make_game("image-scoring", private=False, q=1.0, b=2.0, c=0.5, assessment_error=1.0)
    assert settle(liar, rep, j, a, key)[0].tolist() == [0, 1, 0]  # every judgement inverted


def test_private_round_by_hand():
    # views[o, i]: observer o's view of i. Observer 1 thinks 2 is bad; observer 2 thinks 1 is bad.
    views = jnp.array([[1, 1, 1], [1, 1, 0], [1, 0, 1]], jnp.int8)
    j = jnp.array([1, 2, 0])
    a = jnp.array([1, 0, 1])  # 0 gives to 1, 1 refuses 2, 2 gives to 0
    game = make_game("stern-judging", private=True, q=1.0, b=1.0, c=0.1)
    new, _, _ = settle(game, views, j, a, jax.random.key(0))
    # Column i is everyone's new view of donor i, judged against their own view of i's recipient:
    # donor 0 gave to 1: good for observers 0, 1 (1 good to them), bad for 2 (1 bad to 2).
    # donor 1 refused 2: bad for 0 and 2 (2 good to them), good for 1 (2 bad to 1).
    # donor 2 gave to 0: everyone sees 0 as good, so good.
    assert new.tolist() == [[1, 0, 1], [1, 1, 1], [0, 0, 1]]
    # Donors decide from their own row: donor 1 sees its recipient 2 as bad.
    assert donor_views(game, views, j).tolist() == [1, 0, 1]
    unseen = make_game("stern-judging", private=True, q=0.0, b=1.0, c=0.1)
    assert settle(unseen, views, j, a, jax.random.key(0))[0].tolist() == views.tolist()


def test_recipients_uniform_over_others():
    n, draws = 5, 4000
    keys = jax.random.split(jax.random.key(3), draws)
    j = np.asarray(jax.vmap(lambda k: draw_recipients(k, n))(keys))
    assert (j != np.arange(n)).all()
    counts = np.stack([np.bincount(j[:, i], minlength=n) for i in range(n)])
    # Each donor's 4 possible recipients have probability 1/4: 1000 expected of 4000, binomial
    # sd sqrt(4000 * 1/4 * 3/4) = 27; 5 sd = 137 bounds all 20 counts with room to spare.
    off = counts[~np.eye(n, dtype=bool)]
    assert np.abs(off - draws / (n - 1)).max() < 137


def test_error_free_discriminators_cooperate_fully():
    res = run(strategies="disc", norm="stern-judging", steps=30)
    # Everyone stays good, so every donor gives: exactly N gifts of b at cost c per round.
    assert headline(res, "cooperation_rate").tolist() == [1.0] * R
    # The mean payoff is float32 sums over agents and rounds, summed in an order that depends
    # on the CPU's vector width (1.2e-6 off on an AVX2 machine): 1e-5 is ~100 float32 ulps,
    # while one gift fewer in the whole run would be 1 / (100 agents x 30 rounds) = 3e-4 off.
    np.testing.assert_allclose(headline(res, "payoff.disc"), 1.0 - 0.1, rtol=1e-5)
    assert set(res.summary["metrics"]) == {"cooperation_rate", "payoff.disc"}


def test_unconditional_payoffs():
    b, c, enc = 1.0, 0.1, 200
    res = run(strategies="allc:1,alld:1", b=b, c=c, steps=enc)
    allc, alld = headline(res, "payoff.allc"), headline(res, "payoff.alld")
    # Exactly: 50 gifts of b at cost c per round among 50 + 50 agents, so allc + alld = b - c.
    np.testing.assert_allclose(allc + alld, b - c, rtol=1e-5)
    # Each cooperator gives to one of the 99 others at random: a cooperator receives from each
    # of the 49 other cooperators with chance 1/99 (E = 49/99 b, minus c), a defector from 50.
    # Receipts per agent-round are ~Binomial(49, 1/99) (sd 0.7 b): the mean over 50 agents x
    # 200 rounds has sd 0.007 b per replicate, 0.0035 b over 4; 0.02 is > 5 sd.
    assert abs(allc.mean() - (49 / 99 * b - c)) < 0.02
    assert abs(alld.mean() - 50 / 99 * b) < 0.02
    assert headline(res, "cooperation_rate").tolist() == [0.5] * R


def test_config_errors():
    with pytest.raises(ConfigError, match="strategies.*'tft'.*accepted: allc, alld, disc"):
        run(strategies="disc:3,tft:1")
    with pytest.raises(ConfigError, match="split"):
        run(agents="mixed")
    with pytest.raises(ConfigError, match="split applies only to agents=mixed"):
        run(split="rules:1,llm:1")
    with pytest.raises(ConfigError, match="split.*'humans'"):
        run(agents="mixed", split="rules:1,humans:1")
    with pytest.raises(ConfigError, match="average_from"):
        run(steps=10, average_from=10)
    with pytest.raises(ConfigError, match="'norm'"):
        run(norm="golden-rule")
    with pytest.raises(ConfigError, match="population must be <= 8192"):
        run(assessment="private", population=10_000)
    with pytest.raises(ConfigError, match="'q'"):
        run(q=1.5)
    assert set(kinds_of(IndirectReciprocityConfig(), 0)) == {"rules"}  # the default: rules only


# -- classic results ----------------------------------------------------------------------------
def test_second_order_norms_survive_errors_image_scoring_does_not():
    """With execution errors e among discriminators, standing and stern judging keep a share
    1/(1+e) of good reputations and a cooperation rate (1-e)/(1+e): a good recipient gets
    help unless the gift fails, and refusing a bad one restores the donor's standing, so
    g' = g(1-e) + (1-g) (Ohtsuki & Iwasa 2004; Panchanathan & Boyd 2003). Under image scoring
    every refusal is bad, so g' = g(1-e) and cooperation dies out."""
    e = 0.05
    for norm in ("standing", "stern-judging"):
        res = run(strategies="disc", norm=norm, execution_error=e, steps=300, average_from=50)
        # The round-to-round process is linear in expectation, so the long-run mean is exact;
        # the per-round rate over 100 agents has sd ~0.03, averaged over 250 rounds and 4
        # replicates (weakly autocorrelated) ~0.002: 0.01 is > 4 sd.
        coop = headline(res, "cooperation_rate")
        assert abs(coop.mean() - (1 - e) / (1 + e)) < 0.01, (norm, coop)
    res = run(
        strategies="disc", norm="image-scoring", execution_error=e, steps=300, average_from=50
    )
    # (1 - e)^50 = 0.08 of good reputations left at round 50, and 0.95^300 ~ 2e-7 at the end.
    assert headline(res, "cooperation_rate").max() < 0.05


def test_private_image_scoring_follows_its_exact_decay():
    """Image scoring judges the act alone, so each round keeps, in expectation, a share
    (1 - q e) of good views, private or public: E[g_t+1 | g_t] = (1 - q e) g_t exactly (a
    donor's view of a random other is good with chance g_t; each observer sees the act with
    chance q). Checks the private machinery (who observes, whose view) against that law."""
    q, e = 0.5, 0.2
    res = run(
        strategies="disc",
        norm="image-scoring",
        assessment="private",
        q=q,
        execution_error=e,
        steps=12,
    )
    f = res.metrics
    g = f[f.metric == "good_share"].pivot(index="replicate", columns="time", values="value")
    g = np.concatenate([np.ones((R, 1)), g.to_numpy()], axis=1)  # everyone starts good
    # One-step ratio estimate of the decay factor: only each round's own sampling noise enters
    # (not the noise accumulated along a trajectory). Over 12 seeds it gave 0.8995 +- 0.0062;
    # 0.025 is 4 sd, and a wrong law (1 - e = 0.8, or no decay) is off by 0.1.
    ratio = g[:, 1:].sum() / g[:, :-1].sum()
    assert abs(ratio - (1 - q * e)) < 0.025, ratio


def test_justified_defection_hurts_discriminators_only_under_image_scoring():
    """Refusing a defector costs a discriminator its image score, so under image scoring
    unconditional cooperators out-earn discriminators; under standing and stern judging the
    refusal is justified and discriminators earn more (Leimar & Hammerstein 2001; Panchanathan
    & Boyd 2003; Ohtsuki & Iwasa 2004)."""
    c = 0.3
    mix = dict(strategies="disc:6,allc:2,alld:2", b=1.0, c=c, steps=250, average_from=50)
    diff = {}
    for norm in ("image-scoring", "standing", "stern-judging"):
        res = run(norm=norm, **mix)
        diff[norm] = (headline(res, "payoff.disc") - headline(res, "payoff.allc")).mean()
        assert (headline(res, "payoff.disc") > headline(res, "payoff.alld")).all()
    # Standing: disc and allc are always good, so they receive alike and disc saves c on the
    # recipients that are bad defectors (20% of agents, bad ~85% of the time): E[diff] ~ 0.05.
    # Simulated: image scoring ~ -0.15, stern judging (which also condemns allc for helping
    # bad defectors) ~ +0.2. A difference of per-agent payoff means over 20-60 agents x 200
    # rounds has sd ~0.015 per replicate, ~0.008 over 4: each bound is > 3.5 sd from them.
    assert diff["image-scoring"] < -0.08, diff
    assert 0.02 < diff["standing"] < 0.08, diff
    assert diff["stern-judging"] > 0.1, diff


def test_private_assessment_breaks_stern_judging():
    """With private, incomplete observation (q < 1) opinions diverge; stern judging condemns
    helping anyone the observer thinks bad, so disagreement spreads and views of each agent
    become coin flips: cooperation ~ (1 - e)/2. Standing only condemns refusals and stays
    cooperative (Uchida & Sasaki 2013; Hilbe et al. 2018, PNAS 115:12241)."""
    kw = dict(
        strategies="disc",
        assessment="private",
        q=0.5,
        execution_error=0.02,
        steps=200,
        average_from=100,
    )
    sj = headline(run(norm="stern-judging", **kw), "cooperation_rate")
    st = headline(run(norm="standing", **kw), "cooperation_rate")
    # Simulated: SJ 0.49, standing 0.92 (per-replicate sd < 0.01 over 100 averaged rounds).
    assert (np.abs(sj - 0.49) < 0.06).all(), sj
    assert (st > 0.85).all(), st


def test_discriminators_resist_defectors_unless_justified_refusals_are_condemned():
    """Discriminators among a few defectors (the `disc:49,alld:1` of Nowak & Sigmund 1998)
    keep cooperating under standing and stern judging, and defectors earn next to nothing.
    Under binary image scoring a justified refusal makes the refuser bad, other
    discriminators then refuse it in turn, and cooperation drifts down (Panchanathan & Boyd
    2003, the instability of image scoring)."""
    mix = dict(strategies="disc:49,alld:1", steps=100, average_from=20)
    for norm in ("standing", "stern-judging"):
        res = run(norm=norm, **mix)
        # Discs refuse only the 2% defectors: cooperation ~ 0.98 x 0.98 = 0.96 (sd ~0.002).
        assert (headline(res, "cooperation_rate") > 0.95).all(), norm
        assert (headline(res, "payoff.disc") > headline(res, "payoff.alld") + 0.8).all(), norm
        assert (final(res, "give_if_good", "disc") == 1).all() and (
            final(res, "give_if_bad", "disc") == 0
        ).all()
    res = run(norm="image-scoring", **mix)
    # Simulated: 0.2 to 0.6 per replicate after 100 rounds; the drift only goes down.
    assert (headline(res, "cooperation_rate") < 0.8).all()
    assert (headline(res, "payoff.disc") > headline(res, "payoff.alld")).all()


# -- the port onto the study contract -----------------------------------------------------------
# Means and standard deviations over 20 replicates (seed 5) of the model before it was a Study
# (its own population engine, commit e5355fd). The port draws other numbers (the world holds
# the coming round's recipients and the random strategy's coin; a round draws only the
# errors and observations whose chance is neither 0 nor 1; strategies are dealt to the rule
# agents in an order shuffled in the world), so the values agree only in distribution.
BEFORE = {
    "rules": ({"strategies": "disc:6,allc:2,alld:2", "norm": "stern-judging",
               "execution_error": 0.05, "population": 50, "steps": 200, "average_from": 50},
              {"cooperation_rate": (0.6261, 0.0033), "payoff.disc": (0.6623, 0.0065),
               "payoff.allc": (0.5047, 0.0184), "payoff.alld": (0.3259, 0.0135)}),
    "private": ({"strategies": "disc:8,random:1,alld:1", "assessment": "private", "q": 0.5,
                 "execution_error": 0.02, "norm": "stern-judging", "population": 50,
                 "steps": 150, "average_from": 50},
                {"cooperation_rate": (0.4377, 0.0086), "payoff.disc": (0.39, 0.0099),
                 "payoff.random": (0.3882, 0.0186), "payoff.alld": (0.4315, 0.0306)}),
    "mixed": ({"agents": "mixed", "split": "rules:1,learned:1", "population": 30, "steps": 300,
               "average_from": 100},
              {"cooperation_rate": (0.7864, 0.1337), "payoff.disc": (0.7566, 0.0927),
               "payoff.learned": (0.6588, 0.1497)}),
}  # fmt: skip


@pytest.mark.parametrize("case", sorted(BEFORE))
def test_the_study_is_statistically_the_model_it_replaced(case):
    cfg, before = BEFORE[case]
    got = scenarios.run("indirect-reciprocity", seed=5, replicates=20, write=False, **cfg)
    assert set(got.summary["metrics"]) == set(before)
    for metric, (mean, sd) in before.items():
        v = headline(got, metric)
        # Welch's two-sample z at 3 standard errors of the difference of means: a false alarm
        # about 1 time in 370; it catches a shift of 0.004 in the rules' cooperation rate, 0.01
        # in private assessment's, 0.13 with learned agents (whose replicates spread widely).
        se = np.sqrt((sd**2 + v.var(ddof=1)) / 20)
        assert abs(v.mean() - mean) < 3 * se, (metric, v.mean(), mean, se)


# -- mechanics with each kind of agent ----------------------------------------------------------
def test_batching_does_not_change_results():
    kw = dict(strategies="disc:2,random:1,alld:1", norm="stern-judging", steps=40)
    together = run(**kw)
    in_pairs = run(batch_replicates=2, **kw)
    for name in together.summary["metrics"]:
        assert headline(together, name).tolist() == headline(in_pairs, name).tolist(), name


def test_learned_agents_learn_to_build_reputations_only_by_selection():
    """Among discriminators under standing, giving to good recipients pays only later, through
    the reputation it earns: selection on payoff over generations (ga) finds it, a policy
    gradient on each round's payoff (reinforce) learns to refuse."""
    kw = dict(
        agents="mixed",
        split="rules:3,learned:1",
        strategies="disc",
        norm="standing",
        b=1.0,
        c=0.3,
        steps=300,
        average_from=200,
        replicates=2,
    )
    ga = run(learning="ga", generation=10, **kw)
    rf = run(learning="reinforce", **kw)
    # Simulated at these settings: ga gives to ~88% of good recipients, reinforce to ~6%.
    assert (final(ga, "give_if_good", "learned") > 0.7).all()
    assert (final(rf, "give_if_good", "learned") < 0.3).all()
    assert (headline(ga, "payoff.learned") > headline(rf, "payoff.learned") + 0.2).all()


def reputation_reply(body: dict) -> str:
    """A rule-based 'model': a discriminator that reads the recipient's reputation."""
    prompt = body["messages"][-1]["content"]
    return json.dumps({"give": "in your eyes: good" in prompt})


def test_llm_agents_through_the_test_server(tmp_path):
    srv = TestServer(reply=reputation_reply).start_in_thread()
    try:
        res = scenarios.run(
            "indirect-reciprocity",
            seed=2,
            replicates=2,
            out=tmp_path / "run",
            agents="mixed",
            split="rules:1,llm:1",
            strategies="alld",
            population=8,
            steps=5,
            norm="stern-judging",
            llm="openai/test-model",
            api_base=srv.url + "/v1",
        )
    finally:
        srv.stop()
    assert res.summary["status"] == "completed"
    # The LLM agents gave to exactly the recipients the prompt called good.
    assert final(res, "give_if_good", "llm").tolist() == [1.0, 1.0]
    assert final(res, "give_if_bad", "llm").tolist() == [0.0, 0.0]
    assert (final(res, "give_if_good", "alld") == 0).all()
    prompt = srv.bodies[0]["messages"][-1]["content"]
    assert "giving to a bad recipient" in prompt and "Round 1 of 5" in prompt
    # 4 LLM agents x 2 replicates x 5 rounds requests, some deduplicated by the client.
    f = res.metrics
    total = f[(f.metric == "llm_requests") & (f.replicate == -1) & f.cohort.isna()]["value"]
    assert total.tolist() == [40.0]
    # The run's cache and the client's merging of calls in flight: the server is asked at
    # most once per distinct prompt.
    prompts = f[(f.metric == "llm_prompts") & (f.replicate == -1) & f.cohort.isna()]
    assert 0 < srv.requests <= prompts["value"].item()
    assert (res.run_dir / "llm-cache.sqlite").exists()


def test_llm_budget_stops_the_run_cleanly():
    srv = TestServer(reply=reputation_reply).start_in_thread()
    try:
        res = scenarios.run(
            "indirect-reciprocity",
            seed=2,
            replicates=2,
            write=False,
            agents="llm",
            population=4,
            steps=50,
            llm_budget_tokens=2000,
            llm="openai/test-model",
            api_base=srv.url + "/v1",
        )
    finally:
        srv.stop()
    assert res.summary["status"] == "stopped" and "budget" in res.summary["stop_reason"]
    rounds = res.metrics[res.metrics.metric == "cooperation_rate"]["time"].max()
    assert rounds < 49
    # The replicates of a batch step together: both stop at the round the budget ran out.
    assert np.isfinite(headline(res, "cooperation_rate")).all()
    last = res.metrics[res.metrics.metric == "cooperation_rate"].groupby("replicate")["time"]
    assert last.max().tolist() == [rounds, rounds]


@pytest.mark.plots
def test_cli_run_writes_summary_and_plots(tmp_path):
    out = tmp_path / "cli"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "society.cli",
            "run",
            "indirect-reciprocity",
            "--set",
            "strategies=disc:49,alld:1",
            "--set",
            "population=50",
            "--set",
            "steps=40",
            "--replicates",
            "2",
            "--out",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    summary = json.loads((out / "summary.json").read_text())
    assert summary["status"] == "completed"
    assert set(summary["metrics"]) == {"cooperation_rate", "payoff.disc", "payoff.alld"}
    assert summary["metrics"]["payoff.disc"]["mean"] > summary["metrics"]["payoff.alld"]["mean"]
    assert {p.name for p in (out / "plots").glob("*.png")} == {"cooperation.png", "payoff.png"}
