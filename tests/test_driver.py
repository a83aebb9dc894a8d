"""One driver and one population builder beneath every scenario (issue 14): society.driver
runs the replicate batches inside one LLM session and stops every scenario's budget the
same way; society.population builds cohorts from `agents` / `split`."""

import math
from pathlib import Path

import jax
import numpy as np
import pytest
from pydantic import create_model

import scenarios
from sim_core.experiment import Scenario
from society.cohorts import LLMCohort, RuleCohort
from society.driver import budget_reached, drive
from society.fields import SharedConfig
from society.llm.testserver import TestServer
from society.population import KINDS, build_population, kinds_of, uses_llm

Say = create_model("Say", give=(bool, ...))


class TalkConfig(SharedConfig):
    """Agents asked every step whether to give; nothing else."""

    split: str = "rules:1,llm:1"
    steps: int = 6


class Talk(Scenario):
    name, Config, headline = "talk", TalkConfig, ("gave",)
    labels = {"cohort": str}

    def run(self, cfg, ctx):
        async def batch(reps, client):
            r = int(reps[0])
            ids = np.arange(cfg.population)
            make = {
                "rules": lambda a: RuleCohort("rules", a, "random", params={"random": {"p": 1.0}}),
                "llm": lambda a: LLMCohort(
                    "llm", a, client, schema=Say, fallback=Say(give=False), template="Give? {x}"
                ),
            }
            pop = build_population(kinds_of(cfg, ctx.rng.numpy("split", r)), ids, make)
            gave = 0.0
            for t in range(cfg.steps):
                obs = {"x": np.full(cfg.population, t, np.float32)}
                gave += float(np.mean(await pop.act(ids, obs, jax.random.key(t)) > 0.5))
                if budget_reached(client, ctx):
                    return {"gave": [gave]}, float(t + 1)
            return {"gave": [gave]}, float(cfg.steps)

        one_each = [np.array([r]) for r in range(ctx.replicates)]
        return drive(cfg, ctx, batch, llm=uses_llm(cfg), batches=one_each)


def test_kinds_follow_agents_and_split():
    cfg = TalkConfig(agents="mixed", split="rules:3,llm:1", population=8)
    kinds = kinds_of(cfg, np.random.default_rng(0))
    assert sorted(kinds.tolist()) == ["llm"] * 2 + ["rules"] * 6
    assert kinds_of(cfg, np.random.default_rng(0)).tolist() == kinds.tolist()  # seeded
    assert uses_llm(cfg) and not uses_llm(
        TalkConfig(agents="mixed", split="rules:99,llm:1", population=8)
    )
    assert (kinds_of(TalkConfig(agents="rules"), 0) == "rules").all()


def test_one_cohort_per_kind_present_in_a_fixed_order():
    kinds = np.array(["llm", "rules", "learned", "rules"], dtype=object)
    made = []

    def maker(kind):
        return lambda ids: made.append((kind, ids.tolist())) or RuleCohort(kind, ids, "allc")

    pop = build_population(kinds, np.arange(10, 14), {k: maker(k) for k in KINDS})
    assert made == [("rules", [11, 13]), ("learned", [12]), ("llm", [10])]
    assert [c.name for c in pop.cohorts] == ["rules", "learned", "llm"]
    with pytest.raises(ValueError, match="no cohort factory for kind.* llm"):
        build_population(
            kinds, np.arange(4), {"rules": maker("rules"), "learned": maker("learned")}
        )


def test_a_budget_stop_ends_the_run_in_one_wording_and_leaves_later_replicates_unrun(
    tmp_path: Path,
):
    srv = TestServer(reply='{"give": true}').start_in_thread()
    try:
        res = scenarios.run(
            Talk, seed=1, replicates=3, out=tmp_path / "run", llm="openai/test-model", api_base=srv.url + "/v1",
            agents="mixed", population=4, llm_budget_tokens=30,
        )  # fmt: skip
    finally:
        srv.stop()
    assert res.summary["status"] == "stopped"
    assert res.summary["stop_reason"].startswith("LLM budget reached: ")
    values = res.summary["metrics"]["gave"]["values"]
    assert not math.isnan(values[0]) and all(math.isnan(v) for v in values[1:])
    usage = res.metrics.query("metric == 'llm_requests'")
    assert len(usage) and usage["value"].max() > 0  # one session's accounting, recorded once


def test_no_scenario_opens_its_own_llm_session_or_event_loop():
    root = Path(scenarios.__file__).parent
    for path in root.glob("*/*.py"):
        text = path.read_text()
        for own in ("open_client(", "asyncio.run(", "record_usage("):
            assert own not in text, (
                f"{path.relative_to(root)} calls {own}: use society.driver.drive"
            )
