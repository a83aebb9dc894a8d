"""Across-replicate summaries over a tidy metrics frame and a real metrics.parquet."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sim_core.stats import summarize
from society.metrics import across_replicates, bootstrap_ci, load_metrics, summarize_metrics


def tidy_frame() -> pd.DataFrame:
    """Three replicates, two metrics; replicate 2 stops one step early."""
    rows = []
    for rep, last in ((0, 2), (1, 2), (2, 1)):
        for t in range(last + 1):
            rows.append(
                {
                    "run": "r",
                    "replicate": rep,
                    "time": float(t),
                    "metric": "coop",
                    "value": 0.1 * t + rep,
                }
            )
            rows.append(
                {"run": "r", "replicate": rep, "time": float(t), "metric": "gini", "value": 0.5}
            )
    return pd.DataFrame(rows)


def test_across_replicates_uses_each_replicates_last_time_and_t_interval():
    out = across_replicates(tidy_frame(), "coop")
    values = [0.2, 1.2, 2.1]  # replicate 2's last time is 1
    expected = summarize(values)
    assert out["values"] == pytest.approx(values)
    assert out["mean"] == pytest.approx(expected["mean"])
    assert out["ci95"] == pytest.approx(expected["ci95"])
    assert out["method"] == "student-t" and out["n"] == 3 and out["replicates"] == [0, 1, 2]
    at0 = across_replicates(tidy_frame(), "coop", time=0.0)
    assert at0["values"] == pytest.approx([0.0, 1.0, 2.0])


def test_summarize_metrics_is_json_ready_and_names_method():
    out = summarize_metrics(tidy_frame(), method="bootstrap", n_boot=500, seed=3)
    assert set(out) == {"coop", "gini"}
    assert out["gini"]["mean"] == 0.5 and out["gini"]["ci95"] == [0.5, 0.5]
    assert out["coop"]["method"] == "percentile-bootstrap"
    json.dumps(out)  # summary.json must be able to hold it


def test_errors_name_the_problem():
    frame = tidy_frame()
    with pytest.raises(ValueError, match="'welfare' not in frame"):
        across_replicates(frame, "welfare")
    with pytest.raises(ValueError, match="method must be one of"):
        across_replicates(frame, "coop", method="bca")
    with pytest.raises(ValueError, match="lacks columns"):
        summarize_metrics(frame.drop(columns="time"))
    with pytest.raises(ValueError, match="several rows per replicate"):
        across_replicates(pd.concat([frame, frame]), "coop")
    with pytest.raises(ValueError, match="at least one"):
        bootstrap_ci([])


def test_bootstrap_ci_of_known_sample():
    rng = np.random.default_rng(0)
    x = rng.normal(10.0, 2.0, 400)
    out = bootstrap_ci(x, n_boot=4000, seed=1)
    # Percentile interval of the mean ~ mean +- 1.96 sd/sqrt(n); at n = 400 it agrees with
    # the t-interval to within Monte-Carlo error of 4000 resamples (~2% of the half-width).
    t = summarize(x)
    half = t["ci95"][1] - t["mean"]
    assert out["mean"] == pytest.approx(t["mean"])
    assert out["ci95"][0] == pytest.approx(t["ci95"][0], abs=0.1 * half)
    assert out["ci95"][1] == pytest.approx(t["ci95"][1], abs=0.1 * half)
    assert bootstrap_ci(x, n_boot=300, seed=5) == bootstrap_ci(x, n_boot=300, seed=5)
    single = bootstrap_ci([3.0, np.nan])
    assert single["mean"] == 3.0 and single["ci95"] == [3.0, 3.0] and len(single["values"]) == 2


@settings(max_examples=50, deadline=None)
@given(st.lists(st.floats(-1e3, 1e3), min_size=2, max_size=20), st.integers(0, 1000))
def test_bootstrap_interval_contains_mean_and_lies_within_range(vals, seed):
    out = bootstrap_ci(vals, n_boot=200, seed=seed)
    lo, hi = out["ci95"]
    eps = 1e-9 * (1 + max(abs(v) for v in vals))
    assert min(vals) - eps <= lo <= hi <= max(vals) + eps


def test_load_metrics_round_trip(tmp_path):
    frame = tidy_frame()
    frame.to_parquet(tmp_path / "metrics.parquet")
    loaded = load_metrics(tmp_path)
    pd.testing.assert_frame_equal(loaded, frame)
    assert across_replicates(loaded, "coop")["mean"] == pytest.approx(np.mean([0.2, 1.2, 2.1]))
    with pytest.raises(ValueError, match="no metrics file"):
        load_metrics(tmp_path / "missing")
