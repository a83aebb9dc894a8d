"""Topology generators: vectorised numpy (ours) against networkx's generators.

Both run in this process on the same machine; the figure that matters is the ratio
networkx / ours (target: >= 20x at 1e6 nodes). Each networkx run happens once and is cut
off after ``--cap`` seconds (reported as a lower bound); ours is the best of three runs.

    .venv/bin/python benchmarks/bench_topology.py           # 1e6 nodes
    .venv/bin/python benchmarks/bench_topology.py --quick   # 1e5 nodes
"""

from __future__ import annotations

import argparse
import gc
import signal
import time
from collections.abc import Callable
from functools import partial

import networkx as nx

from society.topology import make_topology


class _Capped(Exception):
    pass


def _raise_capped(signum, frame):
    raise _Capped


def time_once(fn: Callable[[], object], cap: float | None = None) -> float | None:
    """Seconds for one call of ``fn``; None when it ran past ``cap`` seconds (then stopped)."""
    gc.collect()
    if cap is not None:
        previous = signal.signal(signal.SIGALRM, _raise_capped)
        signal.setitimer(signal.ITIMER_REAL, cap)
    start = time.perf_counter()
    try:
        result = fn()
        elapsed = time.perf_counter() - start
    except _Capped:
        return None
    finally:
        if cap is not None:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, previous)
    del result
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="1e5 nodes instead of 1e6")
    parser.add_argument("--cap", type=float, default=None, help="seconds allowed per networkx run")
    args = parser.parse_args()
    n = 100_000 if args.quick else 1_000_000
    cap = args.cap if args.cap is not None else (30.0 if args.quick else 120.0)
    k = 4
    side = int(n**0.5)
    cases = [
        ("random-regular", {}, lambda: nx.random_regular_graph(k, n, seed=0)),
        ("small-world", {"rewire": 0.1}, lambda: nx.watts_strogatz_graph(n, k, 0.1, seed=0)),
        ("erdos-renyi", {}, lambda: nx.fast_gnp_random_graph(n, k / (n - 1), seed=0)),
        ("scale-free", {}, lambda: nx.barabasi_albert_graph(n, k // 2, seed=0)),
        ("lattice", {}, lambda: nx.grid_2d_graph(side, side, periodic=True)),
        ("cycle", {}, lambda: nx.cycle_graph(n)),
    ]
    print(f"n = {n:,} agents, degree {k}; networkx capped at {cap:.0f} s, run once")
    print(f"{'generator':<16}{'ours s':>9}{'neigh() s':>10}{'networkx s':>12}{'nx/ours':>10}")
    for name, kw, nx_fn in cases:
        agents = side * side if name == "lattice" else n
        build = partial(make_topology, name, agents, degree=k, seed=0, **kw)
        ours = min(time_once(build) for _ in range(3))
        topo = build()
        compile_s = time_once(topo.neighbours)
        del topo
        theirs = time_once(nx_fn, cap)
        nx_text = f"{theirs:12.2f}" if theirs is not None else f"{'>' + format(cap, '.0f'):>12}"
        ratio = (theirs if theirs is not None else cap) / ours
        ratio_text = f"{ratio:9.0f}x" if theirs is not None else f"{'>' + format(ratio, '.0f'):>9}x"
        print(f"{name:<16}{ours:9.3f}{compile_s:10.3f}{nx_text}{ratio_text}", flush=True)


if __name__ == "__main__":
    main()
