"""Sweep benchmark: 8 grid points with 2 workers (Ray tasks) against 1 worker (in process).

    python benchmarks/bench_sweep.py                 # network-game, 8 values of b
    python benchmarks/bench_sweep.py --population 2500 --steps 400 --workers 2

Both sweeps run the same points (``network-game``, ``b`` in 8 values, the same seed) into
fresh directories in one session. One worker runs the points here, one after another
(compiled kernels are cached between points); ``--workers N`` runs them on a local Ray
started with ``num_cpus=N``, one actor per worker pinned to a core of its own. Two ratios are printed: including Ray's start-up
and shut-down (what ``society sweep --workers N`` costs end to end) and excluding it (the
points alone, Ray already up, as on a cluster). Target: <= 0.6 with 2 workers on >= 2
free cores. The machine may be shared: the load average is printed with the figures.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

import scenarios


def sweep_seconds(out: Path, grid: dict, base: dict, workers: int, seed: int) -> float:
    started = time.perf_counter()
    result = scenarios.sweep("network-game", grid, out=out, config=base, seed=seed, workers=workers)
    elapsed = time.perf_counter() - started
    assert not result.failed and len(result.ran) == len(next(iter(grid.values()))), result
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--points", type=int, default=8)
    parser.add_argument("--population", type=int, default=2500)
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    grid = {"b": [round(1.05 + 0.1 * i, 2) for i in range(args.points)]}
    base = {"population": args.population, "steps": args.steps}
    print(
        f"network-game, {args.points} points (b = {grid['b']}), population={args.population}, steps={args.steps}"
    )
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        cpu = time.process_time()
        t1 = sweep_seconds(tmp / "w1", grid, base, 1, args.seed)
        cores = (time.process_time() - cpu) / t1  # XLA's own threads: > 1 leaves less to gain
        print(
            f"1 worker (in process):               {t1:7.1f} s   load average {os.getloadavg()[0]:.1f}, {cores:.2f} cores busy"
        )
        tn = sweep_seconds(tmp / "wn", grid, base, args.workers, args.seed)
        print(
            f"{args.workers} workers (Ray, with start/stop):    {tn:7.1f} s   ratio {tn / t1:.2f}"
        )
        import ray

        started = time.perf_counter()
        ray.init(num_cpus=args.workers, include_dashboard=False, log_to_driver=False)
        up = time.perf_counter() - started
        try:
            tw = sweep_seconds(tmp / "wr", grid, base, args.workers, args.seed)
        finally:
            ray.shutdown()
        print(
            f"{args.workers} workers (Ray already up, {up:.1f} s start): {tw:7.1f} s   ratio {tw / t1:.2f}"
        )
        print(f"load average at the end {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")


if __name__ == "__main__":
    main()
