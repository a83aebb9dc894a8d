"""Learning-aware IPD (scenarios/learning_aware_ipd): Foerster et al. 2018 (LOLA), exact values.

Published (sec. 4, the IPD with exact values; the setup of the authors' code, alshedivat/lola
scripts/run_lola.py --exact: gamma 0.96, learning rates 1 and 1, 200 updates, initial logits
N(0, 1)): naive learners end in mutual defection, an average reward per
step near -2; LOLA learners reach mutual cooperation near -1, with tit-for-tat-like policies
(cooperate after mutual cooperation, defect after being defected against).

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


def test_a_population_paired_at_random_learns_the_same() -> None:
    for learning, want in (("naive", -2.0), ("lola", -1.0)):
        r = scenarios.run(
            "learning-aware-ipd", seed=1, replicates=2, write=False, learning=learning, learners=20
        )
        assert r.summary["metrics"]["reward_per_step"]["values"] == pytest.approx(
            [want] * 2, abs=0.05
        )
