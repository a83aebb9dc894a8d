"""donor-game: the protocol's rules by hand, its resource arithmetic exactly, each kind of agent."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import jax.numpy as jnp
import numpy as np
import pytest
from conftest import (
    TEST_LLM,
    donor_game_half_reply,
    donor_game_is_strategy_request,
    donor_game_user_text,
)

import scenarios
from scenarios.donor_game.config import DonorGameConfig
from scenarios.donor_game.dynamics import (
    DONATED,
    EMPTY,
    INVALID,
    NO_HISTORY,
    PUNISHED,
    fresh_trace,
    pairs,
    play,
)
from scenarios.donor_game.model import units_to_share
from sim_core.errors import ConfigError
from society.llm.testserver import TestServer


def reference_mean_resources(
    n: int, rounds: int, share: float, endowment: float, mult: float
) -> float:
    """The authors' schedule and arithmetic, transcribed independently in plain Python
    (bipartiteRoundRobin + extendRounds; the second game with every pair reversed), for a
    population that all gives ``share``. The mean does not depend on who is in which half."""
    a, b = list(range(n // 2)), list(range(n // 2, n))
    first, toggle = [], False
    for i in range(n // 2):
        rot = b[-i:] + b[:-i] if i else b
        first.append(list(zip(rot, a, strict=True)) if toggle else list(zip(a, rot, strict=True)))
        toggle = not toggle
    game1 = first + [[(r, d) for d, r in rnd] for rnd in first]
    assert len(game1) == rounds
    game2 = [[(r, d) for d, r in rnd] for rnd in game1]
    finals = []
    for game in (game1, game2):
        res = [endowment] * n
        for rnd in game:
            for d, r in rnd:
                x = share * res[d]
                res[d] -= x
                res[r] += mult * x
        finals += res
    return sum(finals) / len(finals)


def llm_run(reply, **params):
    srv = TestServer(reply=reply).start_in_thread()
    try:
        res = scenarios.run("donor-game", llm=TEST_LLM, api_base=srv.url + "/v1", **params)
    finally:
        srv.stop()
    return res, srv


def rows(result, metric):
    m = result.metrics
    return m[m["metric"] == metric].sort_values(["replicate", "time"])


# -- the rules by hand --------------------------------------------------------------------------
def schedule(order, rounds):
    """(donor, recipient) pairs of each round of both games, from dynamics.pairs."""
    games = []
    for game in (0, 1):
        for rnd in range(rounds):
            partner, donor = pairs(jnp.asarray(order), jnp.int32(rnd), jnp.int32(game), rounds)
            d = np.flatnonzero(np.asarray(donor))
            games.append(sorted(zip(d.tolist(), np.asarray(partner)[d].tolist(), strict=True)))
    return games


def test_pairings_by_hand_for_four_agents():
    got = schedule(np.array([0, 1, 2, 3]), 4)
    # a0,a1 give to b0,b1; b rotated gives to a; then both rounds with the roles reversed.
    assert got[:4] == [[(0, 2), (1, 3)], [(2, 1), (3, 0)], [(2, 0), (3, 1)], [(0, 3), (1, 2)]]
    # The second game swaps donors and recipients.
    assert got[4:] == [sorted((r, d) for d, r in rnd) for rnd in got[:4]]


def test_pairings_of_the_default_protocol():
    rng = np.random.default_rng(0)
    for _ in range(3):
        perm = rng.permutation(12)
        got = schedule(perm, 12)
        a = set(perm[:6].tolist())
        for rnd in got:  # every agent plays once per round
            assert sorted(x for pair in rnd for x in pair) == list(range(12))
        # The donor side alternates over the first 6 rounds.
        assert [{d for d, _ in rnd} == a for rnd in got[:6]] == [True, False] * 3
        gives = np.bincount([d for rnd in got[:12] for d, _ in rnd], minlength=12)
        assert (gives == 6).all()  # each agent donates in 6 of the 12 rounds
        # Each cross pair meets exactly twice, once in each role (the same 6 pairs reversed).
        pairs_ = [pair for rnd in got[:12] for pair in rnd]
        assert len(set(pairs_)) == 72
        assert set(pairs_) == {(y, x) for x, y in pairs_}
        assert all((x in a) != (y in a) for x, y in pairs_)


def play_by_hand(res, trace, donors, recipients, shares, rnd, punishment):
    n = res.shape[0]
    partner, donor, a = np.arange(n), np.zeros(n, bool), np.zeros(n, np.float32)
    partner[donors], partner[recipients], donor[donors], a[donors] = (
        recipients,
        donors,
        True,
        shares,
    )
    return play(
        res,
        trace,
        jnp.asarray(partner),
        jnp.asarray(donor),
        jnp.asarray(a),
        rnd,
        2.0,
        2.0,
        punishment,
    )


def test_play_round_by_hand():
    res, trace = jnp.array([10.0, 3.0, 8.0, 4.0]), fresh_trace(4, 2)
    # Agent 0 gives 25% to 1; agent 2 punishes 3 by spending half (4 units -> 3 loses 8, floored at 0).
    res, trace2, out = play_by_hand(res, trace, [0, 2], [1, 3], [0.25, -0.5], 1, True)
    assert res.tolist() == [7.5, 8.0, 4.0, 0.0]
    assert out["given"].tolist() == [2.5, 0.0, 0.0, 0.0]
    assert out["punished"].tolist() == [False, False, True, False]
    # Donors' traces: their own action first, then the recipient's trace (cut to depth 2).
    kind = trace2[..., 0].tolist()
    assert kind == [
        [DONATED, NO_HISTORY],
        [NO_HISTORY, EMPTY],
        [PUNISHED, NO_HISTORY],
        [NO_HISTORY, EMPTY],
    ]
    assert trace2[0, :, 2].tolist() == [0, 1] and trace2[0, 0, 3] == 1
    assert trace2[2, 0, 4] == 0.5 and trace2[2, 0, 5] == 4.0
    # Round 2: 1 gives everything to 0; 3 makes a negative offer without punishment: invalid.
    res3, trace3, out = play_by_hand(res, trace2, [1, 3], [0, 2], [1.0, -0.5], 2, False)
    assert res3.tolist() == [23.5, 0.0, 4.0, 0.0]
    assert out["invalid"].tolist() == [False, False, False, True]
    assert trace3[1, :, 0].tolist() == [DONATED, DONATED] and trace3[3, :, 0].tolist() == [
        INVALID,
        PUNISHED,
    ]
    assert trace3[1, :, 1].tolist() == [2, 1]
    # More than everything is invalid too: nothing changes hands.
    res4, _, out = play_by_hand(res3, trace3, [0, 2], [1, 3], [1.5, np.nan], 3, True)
    assert res4.tolist() == res3.tolist()
    assert out["invalid"].tolist() == [True, False, True, False]


def test_llm_units_become_shares():
    share = units_to_share(
        np.array([5.0, 10.004, 10.5, -2.0, 0.0, 1.0]), np.array([10.0, 10.0, 10.0, 8.0, 0.0, 0.0])
    )
    # Half; all of it (within the two-decimal display); too much (invalid); a punishment;
    # nothing from nothing; something from nothing (invalid).
    assert share.tolist() == [0.5, 1.0, np.inf, -0.25, 0.0, np.inf]


# -- the protocol's resource arithmetic, exactly --------------------------------------------------
def test_rule_agents_resource_arithmetic_by_hand():
    # 4 agents, 4 rounds, half of everything: 28.75 per agent per game (worked out by hand in
    # the scenario notes: finals 17.5, 17.5, 40, 40 in each game), every generation.
    res = scenarios.run(
        "donor-game",
        write=False,
        agents="rules",
        population=4,
        steps=4,
        generations=2,
        give_fraction=0.5,
    )
    assert rows(res, "mean_resources")["value"].tolist() == [28.75, 28.75]
    assert rows(res, "mean_resources")["time"].tolist() == [1.0, 2.0]  # time = generation
    assert rows(res, "donation_fraction")["value"].tolist() == [0.5, 0.5]
    assert rows(res, "punishment_rate")["value"].tolist() == [0.0, 0.0]
    assert res.summary["metrics"]["mean_resources"]["values"] == [28.75]


@pytest.mark.parametrize("share", [0.0, 0.5, 0.3, 1.0])
def test_rule_agents_match_the_authors_protocol(share):
    res = scenarios.run(
        "donor-game",
        seed=2,
        replicates=2,
        write=False,
        agents="rules",
        generations=2,
        give_fraction=share,
    )
    want = reference_mean_resources(12, 12, share, 10.0, 2.0)
    got = rows(res, "mean_resources")["value"].to_numpy()
    if share in (0.0, 0.5, 1.0):  # dyadic arithmetic: float32 is exact here
        assert (got == want).all()
    else:  # float32 against float64: a few ulps over 24 transfers
        np.testing.assert_allclose(got, want, rtol=1e-5)
    assert share == 0.0 or np.allclose(rows(res, "donation_fraction")["value"], share)


# -- LLM agents against the test server -----------------------------------------------------------
def test_llm_agents_play_the_protocol(tmp_path):
    res, srv = llm_run(
        donor_game_half_reply,
        seed=1,
        out=tmp_path / "run",
        agents="llm",
        population=4,
        steps=4,
        generations=2,
    )
    # LLM donors giving half reproduce the rule agents' arithmetic exactly.
    assert rows(res, "mean_resources")["value"].tolist() == [28.75, 28.75]
    assert rows(res, "donation_fraction")["value"].tolist() == [0.5, 0.5]
    strategies = [b for b in srv.bodies if donor_game_is_strategy_request(b)]
    donors = [b for b in srv.bodies if not donor_game_is_strategy_request(b)]
    assert len(strategies) == 4 + 2 and len(donors) == 2 * 4 * 2 * 2  # 4 agents, then 2 newcomers
    # Generation 1 writes strategies from the rules alone; newcomers from the survivors' advice.
    assert all("advice" not in donor_game_user_text(b) for b in strategies[:4])
    later = donor_game_user_text(strategies[-1])
    assert "best-performing 50%" in later and "final score" in later
    assert later.count("My strategy will be to give half, says 1_") == 2  # both survivors, quoted
    # A donor sees its own strategy, the round, the recipient's resources and trace.
    first = donor_game_user_text(donors[0])
    assert "Your name is 1_" in first and "My strategy will be to give half, says 1_" in first
    assert "It is now round 1" in first and "did not have any previous interactions" in first
    assert any("donated 50.00% of their resources" in donor_game_user_text(b) for b in donors)
    assert "2x the number of units" in donors[0]["messages"][0]["content"]
    # The client's accounting is recorded.
    total = res.metrics.query("metric == 'llm_requests' and cohort != cohort and agent != agent")
    assert total["value"].tolist() == [len(srv.bodies)]
    assert (tmp_path / "run" / "llm-cache.sqlite").exists()


def test_llm_punishment_and_invalid_offers_by_hand():
    def reply(body):
        if donor_game_is_strategy_request(body):
            return json.dumps(
                {"reasoning": "r", "strategy": "My strategy will be to punish first."}
            )
        if "It is now round 1." in donor_game_user_text(body):
            return json.dumps({"reasoning": "p", "action": "punish", "amount": 2})
        return json.dumps({"reasoning": "d", "action": "donate", "amount": 50})  # more than held

    res, _ = llm_run(
        reply,
        write=False,
        agents="llm",
        population=2,
        steps=2,
        generations=1,
        punishment=True,
    )
    # Round 1: the donor pays 2 (10 -> 8) to take 4 from the recipient (10 -> 6); round 2: an
    # invalid offer moves nothing. Same in the second game with the roles swapped: mean 7.
    m = res.summary["metrics"]
    assert m["mean_resources"]["values"] == [7.0]
    assert m["punishment_rate"]["values"] == [0.5]
    assert m["donation_fraction"]["values"] == [0.0]
    assert rows(res, "invalid_rate")["value"].tolist() == [0.5]


def test_selection_favours_defectors_over_unconditional_givers():
    # Rule agents give everything; LLM agents keep everything. Keepers end each game with
    # their endowment plus all they received, so they fill the top half: after one round of
    # selection the keepers' strategy is everyone's (checked in each of 2 replicates).
    def reply(body):
        if donor_game_is_strategy_request(body):
            return json.dumps(
                {"reasoning": "r", "strategy": "My strategy will be to keep everything."}
            )
        return json.dumps({"reasoning": "keep", "amount": 0})

    res, srv = llm_run(
        reply,
        seed=3,
        replicates=2,
        write=False,
        agents="mixed",
        split="rules:1,llm:1",
        give_fraction=1.0,
        generations=2,
    )
    assert rows(res, "share.llm")["value"].tolist() == [0.5, 1.0, 0.5, 1.0]
    keep = rows(res, "mean_resources.llm").query("time == 1")["value"].to_numpy()
    give = rows(res, "mean_resources.rules").query("time == 1")["value"].to_numpy()
    assert (keep > give).all()
    # The 6 newcomers of each replicate are LLM agents writing strategies from the survivors'.
    # (Identical prompts of the two replicates go as one call with n = 2: independent samples.)
    asked = sum(b.get("n", 1) for b in srv.bodies if donor_game_is_strategy_request(b))
    assert asked == 2 * (6 + 6)


def test_budget_stops_the_run_cleanly():
    # About 450 tokens a request here (the test server counts words): the budget runs out in
    # generation 2, and the summary reports generation 1, the last one completed.
    res, srv = llm_run(
        donor_game_half_reply,
        write=False,
        agents="llm",
        population=4,
        steps=4,
        generations=3,
        llm_budget_tokens=12000,
    )
    assert res.summary["status"] == "stopped"
    assert "budget" in res.summary["stop_reason"]
    # Generation 1 (4 strategies, 16 donations), 2 newcomers' strategies, then part of the 16
    # donations of generation 2; a full run makes 4 + 3 * 16 + 2 * 2 = 56 requests.
    assert 22 < srv.requests < 38
    assert rows(res, "mean_resources")["time"].tolist() == [1.0]
    assert res.summary["metrics"]["mean_resources"]["values"] == [28.75]
    spent = res.metrics.query("metric == 'llm_tokens' and cohort != cohort and agent != agent")
    assert spent["value"].item() >= 12000


# -- learned agents, determinism ------------------------------------------------------------------
def test_learned_agents_same_seed_same_run_whatever_the_batching():
    params = dict(agents="learned", population=4, steps=4, generations=2, multiplier=3.0)
    a = scenarios.run("donor-game", seed=5, replicates=2, write=False, **params)
    b = scenarios.run("donor-game", seed=5, replicates=2, write=False, batch_replicates=1, **params)
    for k in ("mean_resources", "donation_fraction", "punishment_rate"):
        assert a.summary["metrics"][k]["values"] == b.summary["metrics"][k]["values"]
    c = scenarios.run("donor-game", seed=6, replicates=2, write=False, **params)
    assert (
        c.summary["metrics"]["mean_resources"]["values"]
        != a.summary["metrics"]["mean_resources"]["values"]
    )
    fr = rows(a, "donation_fraction")["value"].to_numpy()
    assert ((fr > 0) & (fr < 1)).all()  # policies give a share in (0, 1)
    # Without punishment every unit given adds (multiplier - 1) units to the total, so
    # mean final resources = endowment + (m - 1) x units given per agent per game.
    mean = rows(a, "mean_resources")["value"].to_numpy()
    given = rows(a, "given_per_agent")["value"].to_numpy()
    assert (given > 0).all()
    np.testing.assert_allclose(mean, 10.0 + 2.0 * given, rtol=1e-5)  # float32 sums


# The port to the model contract changed the draws (the halves, the kinds' placement, learned
# policies and their mutation come from the framework's streams; learned agents learn from a
# game's whole return, not from each donation's return to the game's end), so the pins moved.
# The old model's headline over seeds 1-30 x 2 replicates (mean, standard error), as
# measured at the port (rules:1,learned:1 and learned agents, 12 agents, 3 generations of 4
# rounds, learning rate 0.1):
OLD = {
    "mixed": {"mean_resources": (26.0876, 0.7262), "donation_fraction": (0.45330, 0.01376)},
    "learned": {"mean_resources": (25.1479, 0.9249), "donation_fraction": (0.44860, 0.01751)},
}


@pytest.mark.parametrize("case", OLD)
def test_the_study_agrees_with_the_old_model(case):
    # Over seeds 1-20 x 2 replicates, each headline mean must be within 3 standard errors of
    # the difference of the old one (Welch's z: ~0.3% false alarms per metric if the models
    # agree; measured |z| <= 0.7 over 30 seeds at the port).
    kinds = (
        {"agents": "mixed", "split": "rules:1,learned:1"}
        if case == "mixed"
        else {"agents": "learned"}
    )
    new = {}
    for seed in range(1, 21):
        res = scenarios.run("donor-game", seed=seed, replicates=2, write=False, population=12,
                            generations=3, steps=4, learning_rate=0.1, **kinds)  # fmt: skip
        for k, v in res.summary["metrics"].items():
            new.setdefault(k, []).extend(v["values"])
    assert set(new["punishment_rate"]) == {0.0}
    for k, (mean, se) in OLD[case].items():
        x = np.asarray(new[k])
        z = (x.mean() - mean) / np.hypot(se, x.std(ddof=1) / np.sqrt(x.size))
        assert abs(z) < 3, (k, x.mean(), mean, z)


# -- configuration and the command line ------------------------------------------------------------
@pytest.mark.parametrize(
    ("params", "needle"),
    [
        ({"population": 7}, "population must be even"),
        ({"steps": 5}, "steps must be even"),
        ({"agents": "mixed", "split": "rules:1,bots:2"}, "accepted: rules, learned, llm"),
        ({"split": "rules:-1"}, "must be >= 0"),
        ({"split": "rules:0,llm:0"}, "must not all be 0"),
        ({"give_fraction": 1.5}, "give_fraction"),
        ({"agents": "humans"}, "agents"),
        ({"colour": "red"}, "unknown parameter 'colour'"),
    ],
)
def test_bad_parameters(params, needle):
    with pytest.raises(ConfigError, match=re.escape(needle)):
        scenarios.run("donor-game", write=False, **params)


def test_config_documents_every_parameter():
    assert all(f.description for f in DonorGameConfig.model_fields.values())
    assert DonorGameConfig().population == 12 and DonorGameConfig().steps == 12
    assert "donor-game" in scenarios.names()


@pytest.mark.plots
def test_cli_run_writes_summary_and_plots(tmp_path):
    out = tmp_path / "cli"
    cmd = [
        sys.executable,
        "-m",
        "society.cli",
        "run",
        "donor-game",
        "--out",
        str(out),
        "--seed",
        "1",
    ]
    for kv in (
        "agents=rules",
        "population=4",
        "steps=4",
        "generations=3",
        "give_fraction=0.5",
    ):
        cmd += ["--set", kv]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    summary = json.loads((out / "summary.json").read_text())
    assert set(summary["metrics"]) == {"mean_resources", "donation_fraction", "punishment_rate"}
    assert summary["metrics"]["mean_resources"]["mean"] == 28.75
    assert summary["config"]["population"] == 4
    assert (out / "plots" / "mean_resources.png").stat().st_size > 0
