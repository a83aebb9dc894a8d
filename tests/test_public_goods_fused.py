"""The fused path of the public goods game (rule agents, no sanction stage: rounds run in
compiled chunks) gives the same results as one round at a time."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import scenarios
import scenarios.public_goods.model as model


def _run(monkeypatch, fuse: int, **kw):
    monkeypatch.setattr(model, "FUSE_ROUNDS", fuse)
    calls = {"rounds": 0}
    rounds = model._Batch.rounds

    async def counted(self, t0, k):
        calls["rounds"] += 1
        await rounds(self, t0, k)

    monkeypatch.setattr(model._Batch, "rounds", counted)
    res = scenarios.run("public-goods", write=False, seed=5, **{"agents": "rules", **kw})
    return res, calls["rounds"]


def _frame(res) -> pd.DataFrame:
    m = res.metrics
    return m.sort_values(list(m.columns)).reset_index(drop=True)


CASES = {
    "stranger-default-mix": dict(population=24, steps=7),
    "stranger-one-sits-out": dict(
        population=25, steps=7, strategies="conditional:2,free-rider:1,cooperator:1,rewarder:1"
    ),
    "stranger-1000": dict(population=1000, steps=5, conditional_start=0.3, conditional_slope=0.9),
    "graph-random-groups": dict(population=30, steps=7, graph="random-regular", degree=3),
    "neighbourhood": dict(
        population=30, steps=7, graph="small-world", degree=4, groups="neighbourhood"
    ),
    "mixed-all-rules": dict(population=24, steps=7, agents="mixed", split="rules:1"),
}


@pytest.mark.parametrize("batch", [1, 3])
@pytest.mark.parametrize("case", list(CASES))
def test_fused_equals_per_round(monkeypatch, case, batch):
    kw = dict(CASES[case], replicates=3, batch_replicates=batch)
    slow, chunks_slow = _run(monkeypatch, 0, **kw)
    fast, chunks_fast = _run(monkeypatch, 3, **kw)  # chunks of 3 rounds and a shorter last
    assert chunks_slow == 0
    batches = 3 // batch
    assert chunks_fast == batches * -(-kw["steps"] // 3)
    pd.testing.assert_frame_equal(_frame(slow), _frame(fast), check_exact=True)
    assert slow.summary["metrics"].keys() == fast.summary["metrics"].keys()
    for k, v in slow.summary["metrics"].items():
        np.testing.assert_equal(fast.summary["metrics"][k], v, err_msg=k)


@pytest.mark.parametrize(
    "kw",
    [dict(punishment=True), dict(agents="mixed", split="rules:1,learned:1")],
    ids=["sanctions", "learned"],
)
def test_not_fused_otherwise(monkeypatch, kw):
    _, chunks = _run(monkeypatch, 3, **dict(kw, population=12, steps=2))
    assert chunks == 0
