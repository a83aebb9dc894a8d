"""Every built-in study on the model contract resumes exactly, with no checkpoint code of its
own: killed after a checkpoint (in process, the moment's rows written and then lost), the
resumed run ends with the uninterrupted run's rows and headline. Rule agents only (compiled
chunks) for every study; rule, learned and LLM agents together (one moment per step, LLM
agents against a scripted server) for every study whose agents choose."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
from conftest import SEED, killed_in_process, same_run

import scenarios
from society.llm.testserver import TestServer
from society.study import Study

SMALL = {  # a few steps of a small world each (what the test is about is the framework's part)
    "boid-flockers": {"population_size": 12, "width": 20, "height": 20, "steps": 4},
    "boltzmann-wealth": {"n": 20, "width": 5, "height": 5, "steps": 4},
    "commons": {"population": 5, "steps": 3, "episodes": 2},
    "conformity": {"population": 12, "steps": 4},
    "division-of-labour": {"population": 12, "steps": 4, "average_from": 1},
    "donor-game": {"agents": "rules", "population": 4, "steps": 4, "generations": 2},
    "epidemic": {
        "population": 30,
        "steps": 4,
        "model": "SEIR",
        "periods": "drawn",
        "graph": "random-regular",
        "degree": 4,
        "initial_infected": 3,
    },  # fmt: skip
    "elo-league": {"league": 4, "games": 2, "eval_games": 4, "steps": 4},
    "indirect-reciprocity": {"population": 12, "steps": 4, "strategies": "disc:2,random:1"},
    "learning-aware-ipd": {"learners": 4, "steps": 4},
    "market": {"population": 3, "consumers": 20, "steps": 4},
    "network-game": {"population": 12, "steps": 4},
    "public-goods": {
        "population": 5,
        "steps": 3,
        "punishment": True,
        "reward": True,
        "strategies": "conditional,punisher,rewarder",
    },  # fmt: skip
    "schelling": {"width": 6, "height": 6, "steps": 4},
    "skill-society": {"population": 9, "steps": 4, "eval_every": 2, "llm_eval_tasks": 1},
    "social-network": {"population": 40, "steps": 4},
    "wolf-sheep": {"width": 8, "height": 8, "initial_sheep": 10, "initial_wolves": 4, "steps": 4},
}
STUDIES = sorted(n for n in scenarios.names() if issubclass(scenarios.get(n), Study))
CHOOSE = [n for n in STUDIES if scenarios.get(n).actions is not None]


def test_every_study_is_checked() -> None:
    assert sorted(SMALL) == STUDIES  # a new study adds its small world above


def varied_reply(body: dict) -> str:
    """A valid answer that depends on the prompt (a constant reply to distinct prompts would
    be counted as degenerate): the first field of the schema, chosen by the prompt's hash."""
    fmt = body.get("response_format") or {}
    schema = (fmt.get("json_schema") or {}).get("schema") or fmt.get("schema") or {}
    h = int(hashlib.sha256(body["messages"][-1]["content"].encode()).hexdigest(), 16)
    answer = {}
    for name, field in schema.get("properties", {}).items():
        if "enum" in field:
            answer[name] = field["enum"][h % len(field["enum"])]
        elif field.get("type") == "boolean":
            answer[name] = bool(h % 2)
        elif field.get("type") in ("number", "integer"):
            lo, hi = field.get("minimum", 0), field.get("maximum", 10)
            answer[name] = lo + (h % 1000) * (hi - lo) / 1000
        else:
            answer[name] = f"note {h % 97}"
    return json.dumps(answer)


def _killed_and_resumed(tmp_path: Path, monkeypatch, name: str, config: dict, **kw) -> None:
    # the reference keeps checkpoints too: the run it stands for is the one killed, and its
    # compiled steps are those the killed and resumed runs reuse (not a whole-run compile more)
    reference = scenarios.run(
        name, seed=SEED, replicates=2, out=tmp_path / "reference", checkpoint_every=1,
        config=config, plots=True, **kw,
    )  # fmt: skip
    assert reference.summary["status"] == "completed", reference.summary
    assert list((tmp_path / "reference" / "plots").glob("*.png"))  # every study draws
    out = tmp_path / "run"
    killed_in_process(monkeypatch, name, 1, out, config, replicates=2, **kw)
    resumed = scenarios.run(name, seed=SEED, replicates=2, resume=out, config=config, **kw)
    same_run(resumed, reference, out)


@pytest.mark.parametrize("name", STUDIES)
def test_a_killed_rule_run_resumes_to_the_same_rows(tmp_path: Path, monkeypatch, name: str) -> None:
    rules = {"agents": "rules"} if "agents" in scenarios.get(name).Params.model_fields else {}
    _killed_and_resumed(tmp_path, monkeypatch, name, {**SMALL[name], **rules})


@pytest.mark.parametrize("name", CHOOSE)
def test_a_killed_run_of_every_kind_resumes_to_the_same_rows(
    tmp_path: Path, monkeypatch, name: str
) -> None:
    config = {**SMALL[name], "agents": "mixed", "split": "rules:1,learned:1,llm:1"}
    srv = TestServer(reply=varied_reply).start_in_thread()
    try:
        kw = {"llm": "openai/test-model", "api_base": srv.url + "/v1"}
        _killed_and_resumed(tmp_path, monkeypatch, name, config, **kw)
    finally:
        srv.stop()
