"""The main job says what each kind of agent achieved: evaluation tasks solved and held-out
gain per kind, and, when the LLM agents solved nothing but replied validly, one line saying
so, why, and the command to rerun with a capable model; the run still completes."""

from __future__ import annotations

import json
import re

import numpy as np

import scenarios
from scenarios.skill_society.config import SkillSocietyConfig
from scenarios.skill_society.model import achievements
from sim_core.experiment import RunContext
from society.llm.testserver import TestServer


def _wrong_but_valid(body: dict) -> str:
    """A weak model: a different wrong guess for every task, notes that state no rule."""
    user = body["messages"][-1]["content"]
    query = re.search(r"What is the output for: (.+)", user).group(1)
    if '"note"' in user:
        return json.dumps({"note": f"no rule fits {query!r} yet"})
    return json.dumps({"answer": query + "?"})


def test_a_weak_model_that_solves_nothing_completes_and_says_so(tmp_path):
    srv = TestServer(reply=_wrong_but_valid).start_in_thread()
    try:
        res = scenarios.run(
            "skill-society", seed=2, out=tmp_path / "run", llm="openai/test-model",
            api_base=srv.url + "/v1", agents="mixed", split="learned:18,llm:2", population=20,
            steps=6, eval_every=3, sharing="broadcast", llm_eval_tasks=2,
        )  # fmt: skip
    finally:
        srv.stop()
    s = res.summary
    assert s["status"] == "completed" and s["fallbacks"]["llm"]["fallbacks"] == 0
    assert "degenerate" not in s["fallbacks"]["llm"]
    assert s["metrics"]["solved.llm"]["mean"] == 0 and s["metrics"]["solved.learned"]["mean"] > 0
    learned, llm, why = s["notes"]
    assert learned.startswith("learned agents: solved ") and "held-out gain +" in learned
    assert llm == "llm agents: solved 0% of evaluation tasks at the end, held-out gain +0.000"
    assert why.startswith("LLM agents solved no evaluation task: model openai/test-model did not")
    assert why.endswith(
        "rerun with a capable model: society run skill-society --seed 2 --set agents=mixed "
        "--set split=learned:18,llm:2 --set population=20 --set steps=6 --set eval_every=3 "
        "--set sharing=broadcast --llm <litellm model> [--api-base URL]"
    )
    assert json.loads((res.run_dir / "summary.json").read_text())["notes"] == s["notes"]


def test_the_embedded_model_is_named_as_a_small_base_model_for_plumbing():
    ctx = RunContext(seed=1, replicates=1, rng=None, recorder=None, run_dir=None)
    cfg = SkillSocietyConfig(agents="mixed", split="learned:98,llm:2", population=100)
    out = {
        "solved.learned": np.array([0.4]), "heldout_gain.learned": np.array([0.2]),
        "solved.llm": np.array([0.0]), "heldout_gain.llm": np.array([0.0]),
    }  # fmt: skip
    *_, why = achievements(cfg, ctx, out)
    assert "the embedded model (local/gemma3-270m) is a small base model" in why
    assert "--llm <litellm model> [--api-base URL]" in why
    out["solved.llm"] = np.array([0.25])
    assert len(achievements(cfg, ctx, out)) == 2  # no excuse when they solved some
