"""Network game at scale: the vectorised random-regular generator, the lean neighbour
builder and agent-axis sharding (timings and memory are measured in
benchmarks/bench_network_scale.py, never asserted here)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from sim_core.graph import Neighbours
from society.topology import make_topology

ROOT = Path(__file__).resolve().parents[1]


def _check_simple_regular(topo, n: int, k: int) -> None:
    e = topo.edges
    assert e.shape == (n * k // 2, 2)
    assert np.all(e[:, 0] < e[:, 1])  # no self-loops, canonical orientation
    keys = e[:, 0] * n + e[:, 1]
    assert np.all(keys[1:] > keys[:-1])  # sorted, so no repeated edge
    assert np.all(np.bincount(e.ravel(), minlength=n) == k)


@pytest.mark.parametrize("k", [3, 4, 7])
def test_random_regular_large_is_simple_and_regular(k):
    n = 100_000  # n * k even for every k here
    topo = make_topology("random-regular", n, degree=k, seed=11)
    _check_simple_regular(topo, n, k)


def test_random_regular_is_deterministic_by_seed():
    a = make_topology("random-regular", 50_000, degree=4, seed=5)
    b = make_topology("random-regular", 50_000, degree=4, seed=5)
    c = make_topology("random-regular", 50_000, degree=4, seed=6)
    assert np.array_equal(a.edges, b.edges)
    assert not np.array_equal(a.edges, c.edges)


def test_random_regular_small_dense_graphs():
    for n, k, seed in [(8, 7, 0), (10, 3, 1), (12, 6, 2), (30, 0, 0)]:
        _check_simple_regular(make_topology("random-regular", n, degree=k, seed=seed), n, k)


@pytest.mark.parametrize(
    "name,n,kw",
    [
        ("random-regular", 2_000, {"degree": 4}),
        ("random-regular", 999, {"degree": 6}),
        ("erdos-renyi", 1_000, {"degree": 5}),  # isolated nodes, uneven degrees
        ("scale-free", 1_000, {"degree": 4}),  # heavy tail: no table
        ("lattice", 100, {}),
    ],
)
@pytest.mark.parametrize("table", [None, True, False])
def test_lean_neighbours_equal_general_builder(name, n, kw, table):
    e = make_topology(name, n, seed=3, **kw).edges
    ref = Neighbours.from_edges(np.r_[e[:, 0], e[:, 1]], np.r_[e[:, 1], e[:, 0]], n, table=table)
    got = Neighbours.from_undirected(e[:, 0], e[:, 1], n, table=table)
    for f in ("src", "dst", "offsets", "degree", "table"):
        a, b = getattr(ref, f), getattr(got, f)
        assert (a is None) == (b is None), f
        if a is not None:
            assert a.dtype == b.dtype and a.shape == b.shape, f
            np.testing.assert_array_equal(np.asarray(a), np.asarray(b), err_msg=f)


def test_lean_neighbours_rejects_non_canonical_edges():
    with pytest.raises(ValueError, match="canonical"):
        Neighbours.from_undirected(np.array([1]), np.array([0]), 2)


SHARDED = textwrap.dedent(
    """
    import json, sys
    import jax
    import scenarios
    assert len(jax.devices()) == 4, jax.devices()
    out = {}
    for sync in (True, False):
        for shard in (False, True):
            res = scenarios.run("network-game", write=False, seed=7, population=400, steps=6,
                                replicates=2, synchronous=sync, shard=shard)
            m = res.metrics
            m = m[m["metric"] == "cooperator_fraction"].sort_values(["replicate", "time"])
            out[f"{sync}-{shard}"] = m["value"].tolist()
    json.dump(out, sys.stdout)
    """
)


def test_sharded_run_equals_unsharded_on_four_host_devices():
    # The device count is fixed when jax starts, so a fresh interpreter gets the flag.
    env = dict(
        os.environ, XLA_FLAGS="--xla_force_host_platform_device_count=4", JAX_PLATFORMS="cpu"
    )
    proc = subprocess.run(
        [sys.executable, "-c", SHARDED],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    for sync in ("True", "False"):
        plain, sharded = out[f"{sync}-False"], out[f"{sync}-True"]
        assert len(plain) == 2 * 6  # 2 replicates x generations 1..6
        assert plain == sharded, sync
