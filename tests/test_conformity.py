"""Conformity (scenarios/conformity): Asch's curve from Social Impact Theory rule agents, and
LLM and learned subjects answering through the same contract.

Published figures (share of critical responses that followed the majority's wrong answer):
Asch 1955 (Scientific American), by the size of a unanimous majority: 1: 3.6%, 2: 13.6%,
3: 31.8%, 4: 35.1%, 8: 32.0%, 16: 31.2%. Asch 1956 (Psychological Monographs 70(9), 123
subjects facing 7-9 confederates): 36.8%, 24% of subjects never yielded; control subjects
judging alone erred on fewer than 1% of trials; one truthful partner cut errors to about a
quarter (5-10% in the replications quoted by textbooks).

Tolerances: ours are exact expectations up to simulation noise (2,000 subjects x 12 critical
trials: standard error about 0.01 with the subjects' spread of susceptibility), so the
tolerance is the published figure's own sampling error. Subjects differ widely (Asch 1956:
24% never yield, 27% yield on 8-12 of 12 trials), so a share over n subjects has a standard
error near 0.33 / sqrt(n): about 0.03 for Asch 1956's 123 subjects, more for the 1955 group-size
conditions of a few dozen subjects or fewer. We allow 0.06 (two standard errors of the 1956
figure) around every figure, and the ally's band 3-12% around the quoted 5-10%.
"""

from __future__ import annotations

import json
import re

import pytest
from conftest import lines_of_code

import scenarios
from society.llm.testserver import TestServer

ASCH_1955 = {1: 0.036, 2: 0.136, 3: 0.318, 4: 0.351, 8: 0.320, 16: 0.312}
ASCH_1956 = {"unanimous": 0.368, "independent": 0.24}
TOLERANCE = 0.06
SUBJECTS = {"seed": 1, "write": False, "population": 2000}  # steps: Asch's 18 trials, 12 critical


def test_the_study_is_at_most_80_lines() -> None:
    assert lines_of_code("scenarios/conformity/config.py", "scenarios/conformity/model.py") <= 80


def rate(**params) -> dict[str, float]:
    metrics = scenarios.run("conformity", **SUBJECTS, **params).summary["metrics"]
    return {k: metrics[k]["mean"] for k in ("conformity_rate", "independent")}


@pytest.fixture(scope="module")
def curve() -> dict[int, float]:
    return {n: rate(majority=n)["conformity_rate"] for n in ASCH_1955}


@pytest.mark.parametrize("majority", sorted(ASCH_1955))
def test_conformity_grows_with_the_majority_as_asch_found(curve, majority) -> None:
    assert curve[majority] == pytest.approx(ASCH_1955[majority], abs=TOLERANCE), curve


def test_little_with_one_or_two_then_a_plateau_from_three(curve) -> None:
    assert curve[1] < 0.06 and curve[2] < 0.2 < curve[3]
    plateau = [curve[n] for n in (3, 4, 8, 16)]
    assert max(plateau) - min(plateau) < TOLERANCE, curve  # Asch: 31.2-35.1%, no trend


def test_a_unanimous_majority_of_eight_and_its_independents() -> None:
    got = rate(majority=8)
    assert got["conformity_rate"] == pytest.approx(ASCH_1956["unanimous"], abs=TOLERANCE)
    assert got["independent"] == pytest.approx(ASCH_1956["independent"], abs=TOLERANCE)


def test_one_ally_breaks_the_majority_and_alone_there_is_no_error() -> None:
    assert 0.03 < rate(majority=7, ally=True)["conformity_rate"] < 0.12
    assert rate(majority=0)["conformity_rate"] < 0.01  # Asch's control: under 1% errors


def subject(body: dict) -> str:
    """A scripted subject: the line nearest the reference, unless three or more others
    unanimously said another."""
    text = body["messages"][1]["content"]
    ref = float(re.search(r"reference line is ([\d.]+)", text).group(1))
    lines = [float(x) for x in re.findall(r"line \d is ([\d.]+) inches", text)]
    n, said, allies = (
        int(x) for x in re.search(r"(\d+) of them said line (\d), and (\d+)", text).groups()
    )
    nearest = min(range(3), key=lambda i: abs(lines[i] - ref)) + 1
    return json.dumps({"choice": str(said if n >= 3 and allies == 0 else nearest)})


def test_llm_subjects_answer_the_prompt_without_fallbacks() -> None:
    """The scripted subject yields to three confederates on every critical trial."""
    srv = TestServer(reply=subject).start_in_thread()
    try:
        kw = {
            "llm": "openai/test-model",
            "api_base": srv.url + "/v1",
            "write": False,
            "agents": "llm",
        }
        r = scenarios.run("conformity", seed=2, population=3, steps=6, majority=3, **kw)
        assert r.summary["status"] == "completed", r.summary
        assert r.summary["fallbacks"]["llm"]["fallbacks"] == 0
        assert r.summary["fallbacks"]["llm"]["decisions"] == 3 * 6
        assert r.summary["metrics"]["conformity_rate"]["mean"] == 1.0
        correct = r.metrics[r.metrics.metric == "correct"].sort_values("time").value.to_numpy()
        assert list(correct) == [1, 0, 0] * 2  # trials 0 and 3 are neutral: the majority is right
    finally:
        srv.stop()


def test_learned_subjects_answer_through_the_same_contract() -> None:
    r = scenarios.run("conformity", seed=3, write=False, agents="learned", population=4, steps=3)
    assert (
        r.summary["status"] == "completed"
        and 0 <= r.summary["metrics"]["conformity_rate"]["mean"] <= 1
    )
