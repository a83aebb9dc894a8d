"""skill-society with llm_latency >= 1: an LLM attempt is a request in flight and its reply
arrives as a scheduled event, so numeric agents keep stepping meanwhile. What the run
computes must not depend on how long the calls really take."""

import numpy as np
import pandas as pd
import pytest
from conftest import skill_society_scripted

import scenarios
from society.llm.testserver import TestServer

COMMON = dict(
    agents="mixed", split="learned:18,llm:2", population=20, steps=12, eval_every=6,
    sharing="broadcast", llm_eval_tasks=2, difficulty=0.2, llm_latency=2,
)  # fmt: skip


def _run(tmp_path, name: str, server_latency: float):
    srv = TestServer(reply=skill_society_scripted, latency=server_latency).start_in_thread()
    try:
        res = scenarios.run(
            "skill-society", seed=4, out=tmp_path / name, llm="openai/test-model",
            api_base=srv.url + "/v1", **COMMON,
        )  # fmt: skip
    finally:
        srv.stop()
    return res, srv


def test_replies_as_events_give_the_same_run_whatever_the_real_latency(tmp_path):
    fast, _ = _run(tmp_path, "fast", 0.0)
    slow, srv = _run(tmp_path, "slow", 0.08)
    assert fast.summary["status"] == slow.summary["status"] == "completed"
    for k, v in fast.summary["metrics"].items():
        assert v["values"] == pytest.approx(slow.summary["metrics"][k]["values"], nan_ok=True), k
    rows = ["time", "metric", "replicate", "value"]
    a = fast.metrics[~fast.metrics["metric"].str.startswith("llm_")][rows].reset_index(drop=True)
    b = slow.metrics[~slow.metrics["metric"].str.startswith("llm_")][rows].reset_index(drop=True)
    pd.testing.assert_frame_equal(a, b)
    assert srv.requests > 0 and srv.max_in_flight >= 1


def test_latency_zero_keeps_the_moment_waiting_for_replies(tmp_path):
    """The default: replies count in the moment they were asked in (as before)."""
    srv = TestServer(reply=skill_society_scripted).start_in_thread()
    try:
        kw = {**COMMON, "llm_latency": 0}
        res = scenarios.run(
            "skill-society", seed=4, write=False, llm="openai/test-model", api_base=srv.url + "/v1", **kw
        )  # fmt: skip
    finally:
        srv.stop()
    assert res.summary["status"] == "completed"
    assert np.isfinite(res.summary["metrics"]["heldout_gain.llm"]["values"]).all()
