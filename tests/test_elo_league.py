"""Elo league (scenarios/elo_league): Elo ratings track strength, the league's best beats the
held-out rules, and Elo matchmaking learns faster than random matching at the same games.

Measured at the defaults (16 agents, 200 steps of 4 games per pairing: 800 games each), seed 0,
8 replicates (8 leagues, each with its own initial policies and learning rates; the same 8 for
both matchmakings, so the comparison is paired).

Tolerances. Each agent's held-out win rate is measured over 3 rules x 64 games = 192 games of
16 rounds (standard error at most 0.036); the league's agents spread from about 0.3 to 1.0, so
ranks mix only among near neighbours and Spearman's rho stays near 0.97 (observed 0.95-1.0); we
ask 0.9 of every league, as the target. The best agent (highest rating) wins 99.5-100% of 192
games against the rules: we ask more than 0.9, a margin of 0.4 over a coin flip (11 standard
errors of a 192-game win rate near 0.5). The league's mean held-out win rate is a mean of 3,072
games (standard error 0.009; of a paired difference 0.013); leagues differ more than that, so
we compare each league with itself: Elo-matched minus randomly matched was +0.04 to +0.07 in
every one of the 8 (mean +0.052; seed 1: +0.04 to +0.07 too). The gain is the matchmaking's: with
pairing noise of +-4,000 points (explore=2000, Elo pairing in name only) it is -0.01 to +0.01. We ask a mean gain over 0.02 (above 3 standard errors of
the paired mean from evaluation noise alone, 0.005) and a gain in at least 7 of 8 leagues.
"""

from __future__ import annotations

import numpy as np
import pytest
from conftest import lines_of_code

import scenarios

RUN = {"seed": 0, "replicates": 8, "write": False}


def test_the_study_is_at_most_80_lines() -> None:
    paths = ("scenarios/elo_league/config.py", "scenarios/elo_league/model.py")
    assert lines_of_code(*paths) <= 80


@pytest.fixture(scope="module")
def leagues() -> dict[str, dict[str, np.ndarray]]:
    out = {}
    for matchmaking in ("elo", "random"):
        r = scenarios.run("elo-league", matchmaking=matchmaking, **RUN)
        assert r.summary["status"] == "completed", r.summary
        out[matchmaking] = {k: np.array(v["values"]) for k, v in r.summary["metrics"].items()}
    return out


def test_elo_ratings_track_strength_against_held_out_rules(leagues) -> None:
    for matchmaking in ("elo", "random"):
        rho = leagues[matchmaking]["rating_rank_correlation"]
        assert rho.min() >= 0.9, (matchmaking, rho)


def test_the_best_agent_beats_the_rule_baselines(leagues) -> None:
    best = leagues["elo"]["best_vs_rules"]
    assert best.min() > 0.9, best


def test_elo_matchmaking_beats_random_matching_at_the_same_games(leagues) -> None:
    gain = leagues["elo"]["mean_vs_rules"] - leagues["random"]["mean_vs_rules"]
    print("held-out win rate, elo minus random, per league:", np.round(gain, 3))
    assert gain.mean() > 0.02 and (gain > 0).sum() >= 7, gain
