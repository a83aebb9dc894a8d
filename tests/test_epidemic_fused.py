"""epidemic, rule agents only (issue 13): several days per compiled call give exactly the
rows and headline values of one call per day, including the day the run stops."""

from __future__ import annotations

import asyncio

import numpy as np
import pandas as pd
import pytest

import scenarios
import scenarios.epidemic.model as model
from scenarios.epidemic.config import EpidemicConfig
from sim_core.experiment import RunContext
from sim_core.recorder import Recorder
from sim_core.rng import RNG

# One small shape (N, replicates) for all cases, so runs share compiled kernels.
BASE = dict(population=300, replicates=3, initial_infected=5, r0=2.5, write=False)
CASES = [
    # default behaviour, well mixed, the run ends on the last day
    dict(seed=1, steps=30),
    # the prevalence threshold on a graph, one replicate per batch
    dict(
        seed=2,
        steps=80,
        behaviour="threshold",
        threshold=0.02,
        graph="random-regular",
        degree=6,
        batch_replicates=1,
    ),
    # SEIR, a behaviour mix, two transmission steps a day, the town's prevalence
    dict(
        seed=3,
        steps=60,
        model="SEIR",
        dt=0.5,
        behaviour="none:1,isolate-when-sick:1,threshold:1",
        prevalence_signal="global",
        min_contact=0.2,
    ),
    # SEIR on a graph: replicates die out on different days before the last one
    dict(
        seed=4,
        steps=300,
        model="SEIR",
        r0=1.3,
        graph="random-regular",
        degree=4,
        behaviour="threshold",
        batch_replicates=2,
    ),
    # an epidemic that dies out within days
    dict(
        seed=5,
        steps=40,
        r0=0.3,
        recovery_rate=1.0,
        behaviour="isolate-when-sick",
        batch_replicates=1,
    ),
]
# Agent-days per fused call: the default (each run in one call) and a few days per call
# (5 days for one replicate of 300 agents, 2 for two, 1 for three), so that the chunks'
# ends fall before, on and after the day the run stops.
CHUNK_WORK = [model.CHUNK_WORK, 1500]


def _run(monkeypatch, fuse: bool, **kw):
    monkeypatch.setattr(model, "FUSE_DAYS", fuse)
    return scenarios.run("epidemic", **{**BASE, **kw})


def _sorted(frame: pd.DataFrame) -> pd.DataFrame:
    return frame.sort_values(list(frame.columns)).reset_index(drop=True)


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"seed{c['seed']}")
def test_fused_days_equal_one_call_per_day(monkeypatch, case):
    daily = _run(monkeypatch, False, **case)
    for work in CHUNK_WORK:
        monkeypatch.setattr(model, "CHUNK_WORK", work)
        fused = _run(monkeypatch, True, **case)
        pd.testing.assert_frame_equal(_sorted(fused.metrics), _sorted(daily.metrics))
        a, b = fused.summary["metrics"], daily.summary["metrics"]
        assert a.keys() == b.keys()
        for k in a:
            np.testing.assert_equal(a[k], b[k], err_msg=f"{k} (chunk work {work})")
        assert fused.metrics["time"].max() == daily.metrics["time"].max()


def _batch(cfg: EpidemicConfig, replicates: int) -> model._Batch:
    ctx = RunContext(
        seed=7,
        replicates=replicates,
        rng=RNG(7),
        recorder=Recorder(None, labels=model.Epidemic.labels),
        run_dir=None,
    )
    nb, degree, mean_degree = model.build_graph(cfg, ctx)
    return model._Batch(
        cfg, ctx, np.arange(replicates), model.params_of(cfg, mean_degree), nb, degree, None, ""
    )


@pytest.mark.parametrize("steps", [30, 2000])
def test_fused_batches_keep_the_clock_and_take_few_events(monkeypatch, steps):
    """The scheduler stays the clock: it ends on the same day as one event per day, with
    one event per chunk (plus one at the stop) instead of one per day."""
    cfg = EpidemicConfig(population=200, steps=steps, initial_infected=4, r0=2.0)
    ends, states = {}, {}
    for fuse in (True, False):
        monkeypatch.setattr(model, "FUSE_DAYS", fuse)
        b = _batch(cfg, 2)
        assert b.fused is fuse
        asyncio.run(b.run())
        ends[fuse], states[fuse] = b.day, (np.asarray(b.health), np.asarray(b.sym))
        if fuse:
            assert b.sim.dispatched <= -(-(b.day + 1) // b.chunk_days) + 1
        else:
            assert b.sim.dispatched == b.day + 1
    assert ends[True] == ends[False]
    np.testing.assert_array_equal(states[True][0], states[False][0])
    np.testing.assert_array_equal(states[True][1], states[False][1])


def test_only_rule_batches_with_chain_periods_are_fused():
    mixed = EpidemicConfig(population=50, steps=5, agents="mixed", split="rules:1,learned:1")
    drawn = EpidemicConfig(population=50, steps=5, periods="drawn")
    assert _batch(EpidemicConfig(population=50, steps=5), 2).fused
    assert not _batch(mixed, 2).fused
    assert not _batch(drawn, 2).fused
