"""skill-society keeps checkpoints: a run SIGKILLed after a checkpoint resumes to the same
rows, headline values and (with LLM agents) artifact stores as an uninterrupted run (same
seed), with no checkpoint code of the study's (the framework saves the world, the cohorts'
state and the LLM agents' stores). The stores
are rolled back to the checkpoint's moment (their database images are in the checkpoint),
and an LLM attempt in flight (llm_latency >= 1) is saved once its replies are in."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
from conftest import SEED, kill_after_checkpoint, same_run, skill_society_scripted

import scenarios
from society.artifacts import ArtifactStore
from society.llm.testserver import TestServer

# Rule and learned agents, two generations (turnover and inherited playbooks): 120 moments.
NUMERIC = {
    "agents": "mixed", "split": "rules:1,learned:1", "population": 300, "steps": 60, "generations": 2,
    "eval_every": 10, "sharing": "broadcast",
}  # fmt: skip
# 18 learned and 2 LLM agents whose replies arrive 2 moments after they are asked.
TALKING = {
    "agents": "mixed", "split": "learned:18,llm:2", "population": 20, "steps": 30, "eval_every": 6,
    "sharing": "broadcast", "llm_eval_tasks": 2, "difficulty": 0.2, "llm_latency": 2,
}  # fmt: skip


def _stores(run_dir: Path) -> pd.DataFrame:
    with ArtifactStore(run_dir / "artifacts-r0.sqlite") as store:
        return store.to_dataframe().sort_values("id").reset_index(drop=True)


def _kill_and_resume(
    tmp_path: Path, config: dict, *extra: str, wait: float = 0.0, **options
) -> tuple:
    reference = scenarios.run(
        "skill-society", seed=SEED, out=tmp_path / "ref", config=config, **options
    )
    out = tmp_path / "run"
    # checkpoints 7 moments apart: the kill lands after store writes the checkpoint lacks
    kill_after_checkpoint(out, "skill-society", config, *extra, wait=wait, checkpoint_every=7)
    result = scenarios.run("skill-society", seed=SEED, resume=out, config=config, **options)
    same_run(result, reference, out)
    if (tmp_path / "ref" / "artifacts-r0.sqlite").exists():  # LLM agents keep a store
        pd.testing.assert_frame_equal(_stores(out), _stores(tmp_path / "ref"))
    return reference, result


def test_a_killed_numeric_run_resumes_to_the_same_rows_and_stores(tmp_path: Path) -> None:
    # its moments after the first checkpoint take ~1.4 s here (XLA_FLAGS of conftest): a kill
    # 0.3 s after it lands mid-run with room to spare on a loaded machine (1.0 s did not)
    reference, _ = _kill_and_resume(tmp_path, NUMERIC, wait=0.3)
    # numeric playbooks live in the world (and were reused); only LLM agents keep a store
    assert reference.summary["metrics"]["artifact_reuse_rate"]["mean"] > 0
    assert not list((tmp_path / "ref").glob("artifacts-r*.sqlite"))


def test_a_killed_llm_run_resumes_with_its_attempt_in_flight(tmp_path: Path) -> None:
    srv = TestServer(reply=skill_society_scripted, latency=0.02).start_in_thread()
    try:
        llm = {"llm": "openai/test-model", "api_base": srv.url + "/v1"}
        reference, result = _kill_and_resume(
            tmp_path, TALKING, "--llm", llm["llm"], "--api-base", llm["api_base"], wait=0.5, **llm
        )
    finally:
        srv.stop()
    usage = lambda r: r.metrics[r.metrics["metric"] == "llm_tokens"]["value"].tolist()  # noqa: E731
    assert (
        usage(reference) == usage(result) and usage(reference)[0] > 0
    )  # usage kept across the kill
