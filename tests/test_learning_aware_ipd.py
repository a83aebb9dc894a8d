"""Learning-aware IPD (scenarios/learning_aware_ipd): Foerster et al. 2018 (LOLA), exact values.

Published (sec. 4, the IPD with exact values; the setup of the authors' code, alshedivat/lola
scripts/run_lola.py --exact: gamma 0.96, learning rates 1 and 1, 200 updates, initial logits
N(0, 1)): naive learners end in mutual defection, an average reward per
step near -2; LOLA learners reach mutual cooperation near -1, with tit-for-tat-like policies
(cooperate after mutual cooperation, defect after being defected against).

In-context learners (Weis et al. 2026: sequence models trained naively against a diverse
population learn to cooperate, through their in-context learning, which also makes them
extortable): here the in-context step is given (a naive gradient step after each phase of an
episode) and the slow weights learn naively across episodes.

Tolerances: the values are exact (no sampling), so only the seeds' initial logits vary the end.
Mutual defection is worth exactly -2 and mutual cooperation -1; 200 updates leave a learner
within 0.05 of either when it has converged, so we allow 0.05. Naive learners started near
cooperation can stay there (1 of our 10 seeds), so we ask it of 8 in 10 seeds and of the mean
within 0.25; LOLA of every seed.
"""

from __future__ import annotations

import numpy as np
import pytest
from conftest import lines_of_code

import scenarios

RUN = {"seed": 0, "replicates": 10, "write": False}  # 10 seeds of initial logits


def test_the_study_is_at_most_80_lines() -> None:
    paths = ("scenarios/learning_aware_ipd/config.py", "scenarios/learning_aware_ipd/model.py")
    assert lines_of_code(*paths) <= 80


@pytest.fixture(scope="module", params=["naive", "lola"])
def run(request):
    return request.param, scenarios.run("learning-aware-ipd", learning=request.param, **RUN)


def policies(result) -> dict[str, float]:
    """The typical learner's final P(cooperate) by state: the median over learners and seeds
    (a state that cooperation never visits, e.g. CD, may keep its initial logit in a few)."""
    rows = result.metrics[result.metrics.metric.str.startswith("p_cooperate_")]
    return rows.groupby("metric").value.median().to_dict()


def test_naive_learners_defect_and_lola_learners_cooperate(run) -> None:
    learning, result = run
    reward = np.array(result.summary["metrics"]["reward_per_step"]["values"])
    if learning == "naive":
        assert (np.abs(reward + 2) < 0.05).mean() >= 0.8, reward
        assert reward.mean() == pytest.approx(-2, abs=0.25)
    else:
        assert np.abs(reward + 1).max() < 0.05, reward
        assert min(result.summary["metrics"]["mutual_cooperation"]["values"]) > 0.9


def test_lola_learns_tit_for_tat(run) -> None:
    learning, result = run
    p = policies(result)
    if learning == "lola":  # cooperate after CC and after DC (the other cooperated), punish CD
        assert (
            p["p_cooperate_cc"] > 0.95 and p["p_cooperate_dc"] > 0.8 and p["p_cooperate_cd"] < 0.1
        ), p
    else:  # naive: defect whatever happened
        assert max(p.values()) < 0.5, p


def test_a_population_paired_at_random_learns_the_same(population) -> None:
    for learning, want in (("naive", -2.0), ("lola", -1.0)):
        assert population[learning][0] == pytest.approx([want] * 5, abs=0.05)


@pytest.fixture(scope="module")
def population():
    """20 learners of each kind paired at random, 5 seeds each; in-context ones also against
    a population where a quarter of the co-players are fixed random policies."""
    runs = {k: {"learning": k} for k in ("naive", "lola", "in-context")}
    runs["diverse"] = {"learning": "in-context", "tabular": 0.25}
    out = {}
    for name, cfg in runs.items():
        r = scenarios.run(
            "learning-aware-ipd", seed=2, replicates=5, write=False, learners=20, **cfg
        )
        m = r.metrics[r.metrics.metric == "extorted"]
        out[name] = (
            np.array(r.summary["metrics"]["reward_per_step"]["values"]),
            m[m.time == m.time.max()].value.to_numpy(),
        )
    return out


def test_in_context_learners_cooperate_without_a_lola_term(population) -> None:
    """Exact values: every seed ends within 0.05 of mutual cooperation (-1), as LOLA's do
    (20 other seeds: at most 0.014 away, 0.006 with fixed co-players, LOLA 0.001)."""
    for name in ("in-context", "diverse", "lola"):
        assert np.abs(population[name][0] + 1).max() < 0.05, (name, population[name][0])


def test_in_context_learners_are_the_most_extortable(population) -> None:
    """What a Press-Dyson extortioner gains per step over a learner, measured over 20 other
    seeds: in-context 0.53-0.68 (mean 0.62), LOLA 0.25-0.44 (0.36), naive defectors -0.10 (it
    loses), in-context trained with a quarter of fixed random co-players 0.09-0.46 (0.15).
    The bounds: the in-context minimum, and gaps between means of a third of the measured ones
    (5 seeds' means vary by about 0.05)."""
    gain = {k: v[1] for k, v in population.items()}
    assert gain["in-context"].min() > 0.45 and gain["naive"].max() < 0, gain
    assert gain["in-context"].mean() > gain["lola"].mean() + 0.1, gain
    assert gain["diverse"].mean() < gain["in-context"].mean() - 0.15, gain
