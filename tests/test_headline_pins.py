"""Headline metrics pinned for a fixed seed, one small mixed (rules + learned) run per scenario.

These guard refactors that must not change behaviour (one vocabulary, one driver, the
scheduler as the clock): the values were recorded before them. A deliberate change of a
scenario's dynamics updates its pin here, in the same commit, and says why.
"""

import json
import math
import os
import subprocess
import sys

import pytest
from conftest import TEST_XLA_FLAGS

import scenarios

CASES = {  # names as renamed by issue 14 (one vocabulary); the values were pinned before
    "network-game": {
        "population": 100,
        "steps": 20,
        "graph": "random-regular",
        "degree": 4,
        "agents": "mixed",
        "split": "rules:3,learned:1",
        "learning_rate": 0.1,
    },
    "division-of-labour": {
        "population": 30,
        "steps": 60,
        "agents": "mixed",
        "split": "rules:1,learned:1",
        "learning_rate": 0.1,
        "average_from": 20,
    },
    "donor-game": {
        "agents": "mixed",
        "split": "rules:1,learned:1",
        "population": 12,
        "generations": 3,
        "steps": 4,
        "learning_rate": 0.1,
    },
    "epidemic": {
        "agents": "mixed",
        "split": "rules:1,learned:1",
        "population": 200,
        "steps": 20,
        "learning_rate": 0.1,
    },
    "indirect-reciprocity": {
        "agents": "mixed",
        "split": "rules:1,learned:1",
        "population": 30,
        "steps": 300,
        "average_from": 100,
    },
    "market": {
        "agents": "mixed",
        "split": "rules:1,learned:1",
        "population": 4,
        "consumers": 20,
        "steps": 10,
        "learning_rate": 0.1,
    },
    "public-goods": {
        "agents": "mixed",
        "split": "rules:1,learned:1",
        "population": 16,
        "steps": 5,
        "learning_rate": 0.1,
    },
    "commons": {
        "agents": "mixed",
        "split": "rules:1,learned:1",
        "population": 5,
        "steps": 6,
        "learning_rate": 0.1,
    },
    "skill-society": {
        "agents": "mixed",
        "split": "rules:1,learned:1",
        "population": 40,
        "steps": 10,
        "generations": 1,
        "learning_rate": 0.1,
    },
}

# Recorded with seed 7, two replicates.
PINS = {
    "network-game": {  # re-pinned: a Study on the contract (new draws: kinds, policies,
        # imitation); statistically equal to the old model: test_network_game.py::
        # test_the_study_agrees_with_the_old_model
        "cooperation.learned": [0.550484299659729, 0.45673713088035583],
        "cooperation.rules": [0.0, 0.0],
        "cooperator_fraction": [0.13762107491493225, 0.11418428272008896],
    },
    "division-of-labour": {  # re-pinned: a Study on the contract (new draws, replicates
        # learn apart); statistically equal to the old model: test_scenario_division_of_labour
        "dol_index": [0.6291044354438782, 0.5070690512657166],
        "task_entropy": [0.2097756266593933, 0.2579403519630432],
    },
    "donor-game": {  # re-pinned: a Study on the contract (new draws: halves, kinds, policies,
        # mutation); statistically equal to the old model: test_scenario_donor_game
        "mean_resources": [19.238994598388672, 28.634552001953125],
        "donation_fraction": [0.30523285269737244, 0.5022779703140259],
        "punishment_rate": [0.0, 0.0],
    },
    "epidemic": {  # re-pinned: a Study on the contract (new draws: seeds, behaviours, kinds
        # and learned policies per replicate); statistically equal to the old model over 20
        # seeds x 2 replicates: test_scenario_epidemic.py::test_the_study_agrees_with_the_old_model
        "attack_rate": [0.5199999809265137, 0.41499999165534973],
        "peak_prevalence": [0.1899999976158142, 0.1899999976158142],
        "peak_day": [19.0, 19.0],
        "mean_contact": [0.7827804684638977, 0.785066545009613],
        "attack_rate.rules": [0.5699999928474426, 0.49000000953674316],
        "mean_contact.rules": [1.0, 1.0],
        "attack_rate.learned": [0.4699999988079071, 0.3400000035762787],
        "mean_contact.learned": [0.5655609369277954, 0.5701330900192261],
        "attack_rate.llm": [math.nan, math.nan],
        "mean_contact.llm": [math.nan, math.nan],
    },
    "indirect-reciprocity": {  # re-pinned: a Study on the contract (new draws); statistically
        # equal to the old model: test_scenario_indirect_reciprocity
        "cooperation_rate": [0.8218334317207336, 0.8018339276313782],
        "payoff.disc": [0.799566388130188, 0.7882998585700989],
        "payoff.learned": [0.6797333359718323, 0.6549999117851257],
    },
    "market": {  # re-pinned: a Study on the contract (new draws, replicates learn apart);
        # statistically equal to the old model: test_scenario_market
        "price_volatility": [0.2601374685764313, 0.3093964159488678],
        "consumer_welfare": [0.7977149486541748, 1.325505256652832],
        "fraud_rate": [0.0, 0.0],
        "crash_rate": [0.30000001192092896, 0.20000000298023224],
        "price.rules": [1.4774999618530273, 1.376549482345581],
        "profit.rules": [2.080000162124634, 0.4050000309944153],
        "price.learned": [3.035707950592041, 1.9883756637573242],
        "profit.learned": [-1.6098724603652954, -3.430572271347046],
        "price.llm": [math.nan, math.nan],
        "profit.llm": [math.nan, math.nan],
    },
    "public-goods": {  # re-pinned twice: a Study on the contract (new draws: kinds, rule types'
        # seats, groups, learned policies), then groups from sim_core.rng.shuffle; each time
        # statistically equal to the old model over 20 seeds:
        # test_scenario_public_goods.py::test_the_study_agrees_with_the_old_model
        "contribution_rate": [0.44566312432289124, 0.5141698718070984],
        "welfare": [25.347957611083984, 26.1700382232666],
        "grouped_share": [1.0, 1.0],
        "contribution_rate.rules": [0.4703642427921295, 0.469364732503891],
        "welfare.rules": [24.39588165283203, 26.667306900024414],
        "contribution_rate.learned": [0.42096200585365295, 0.5589750409126282],
        "welfare.learned": [26.300033569335938, 25.672771453857422],
    },
    "commons": {  # re-pinned: a Study on the contract (new draws: agents' kinds, learned
        # policies and their noise per replicate); statistically equal to the old model over 40
        # seeds: test_scenario_commons.py::test_the_study_agrees_with_the_old_model
        "survival_time": [6.0, 6.0],
        "sustainability": [0.8333333134651184, 0.8666666746139526],
        "gini_harvest": [0.11472511291503906, 0.037412405014038086],
        "survived": [1.0, 1.0],
        "efficiency": [0.906150758266449, 0.9412290453910828],
        "catch_per_agent": [54.36904525756836, 56.4737434387207],
        "sustainability.rules": [1.0, 1.0],
        "catch_per_agent.rules": [59.99900817871094, 59.63065719604492],
        "sustainability.learned": [0.5833333730697632, 0.6666666269302368],
        "catch_per_agent.learned": [45.924110412597656, 51.738365173339844],
    },
    "skill-society": {  # re-pinned: a Study on the contract (new draws: kinds, rule choices,
        # policies); agreement with the old model: test_scenario_skill_society.py
        "heldout_gain": [0.2644537687301636, 0.2695976495742798],
        "ood_gain": [0.06436880677938461, 0.06563851982355118],
        "train_gain": [0.3254493474960327, 0.3298293650150299],
        "transfer_ratio": [0.812580406665802, 0.817385196685791],
        "artifact_reuse_rate": [0.42500001192092896, 0.41999998688697815],
        "plasticity": [0.6611344218254089, 0.6739941239356995],
        "forgetting": [-0.2644536793231964, -0.269597589969635],
        "dol_index": [0.21879710257053375, 0.2526933252811432],
        "niches": [3.0, 3.0],
        "train_gain.rules": [0.3390834331512451, 0.3432618975639343],
        "heldout_gain.rules": [0.27499425411224365, 0.2796759605407715],
        "ood_gain.rules": [0.06703386455774307, 0.06818579137325287],
        "train_gain.learned": [0.31181520223617554, 0.3163967728614807],
        "heldout_gain.learned": [0.2539132237434387, 0.2595192790031433],
        "ood_gain.learned": [0.06170375645160675, 0.0630912333726883],
        "solved.rules": [0.29770269989967346, 0.30104008316993713],
        "solved.learned": [0.2798095941543579, 0.28366798162460327],
    },
}


def headline(name: str) -> dict[str, list[float]]:
    result = scenarios.run(name, seed=7, replicates=2, write=False, **CASES[name])
    return {k: v["values"] for k, v in result.summary["metrics"].items()}


@pytest.mark.parametrize("name", sorted(CASES))
def test_headline_metrics_are_pinned(name):
    assert_pinned(name, headline(name))


def assert_pinned(name: str, got: dict[str, list[float]]) -> None:
    assert sorted(got) == sorted(PINS[name])
    for metric, want in PINS[name].items():
        # 1e-5 relative: the same computation on another CPU may reorder float sums
        # (vector width), which moves the last digits of float32 results, not more.
        assert got[metric] == pytest.approx(want, rel=1e-5, abs=1e-7, nan_ok=True), metric


DEFAULTS = ["network-game", "epidemic", "skill-society"]  # learned agents, float-heavy rules


def test_jaxs_default_compile_options_give_the_same_pins():
    """The suite compiles with conftest's TEST_XLA_FLAGS (faster compiles); users get JAX's
    defaults. Three studies run in an interpreter with the defaults meet the same pins."""
    assert TEST_XLA_FLAGS in os.environ["XLA_FLAGS"]  # this process compiles with them
    script = (  # not importing this file: its conftest would set the flags again
        "import json, sys\n"
        "import scenarios\n"
        "runs = {n: scenarios.run(n, seed=7, replicates=2, write=False, **c)\n"
        "        for n, c in json.loads(sys.argv[1]).items()}\n"
        "print(json.dumps({n: {k: v['values'] for k, v in r.summary['metrics'].items()}\n"
        "                  for n, r in runs.items()}))\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}
    if own := os.environ["XLA_FLAGS"].replace(TEST_XLA_FLAGS, "").strip():
        env["XLA_FLAGS"] = own  # a user's own flags, kept
    cases = json.dumps({name: CASES[name] for name in DEFAULTS})
    done = subprocess.run(
        [sys.executable, "-c", script, cases], env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr[-3000:]
    got = json.loads(done.stdout.splitlines()[-1])
    for name in DEFAULTS:
        assert_pinned(name, got[name])
