"""Network game at scale: time per generation and peak memory per agent, 1e4 to 1e7 agents.

    python benchmarks/bench_network_scale.py                  # 1e4 .. 1e7, 100 generations
    python benchmarks/bench_network_scale.py --sizes 1e4 1e5 1e6 --steps 20
    python benchmarks/bench_network_scale.py --replicates      # item 2: 256 seeds vmapped vs in sequence

Each size runs in a FRESH subprocess: ``scenarios.run("network-game", population=N,
graph="random-regular", degree=4, synchronous=True, steps=S, write=False)`` end to end
(graph generation, compiled neighbours, S generations, summary), then the process's peak
resident set (VmHWM from /proc/self/status) is read and divided by N. After that the same
process times the compiled generations alone (the study's compiled chunk of generations,
compile excluded, best of 2): seconds per generation. The fitted exponent is the slope of
log(time per generation) against log(edges) by least squares; linear cost is 1.
Absolute times depend on a shared machine; the ratios between sizes are what count.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]

CHILD = textwrap.dedent(
    """
    import json, sys, time
    n, steps, degree, update = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]

    def hwm():
        for line in open("/proc/self/status"):
            if line.startswith("VmHWM"):
                return int(line.split()[1]) * 1024

    import jax
    import scenarios
    from scenarios.network_game.model import NetworkGame

    t = time.perf_counter()
    res = scenarios.run("network-game", write=False, seed=1, population=n, steps=steps,
                        graph="random-regular", degree=degree, synchronous=True, update=update)
    run_s = time.perf_counter() - t
    peak = hwm()
    game = NetworkGame()
    cfg = NetworkGame.Params(population=n, degree=degree, synchronous=True, update=update)
    keys = jax.random.split(jax.random.key(0), 1)
    length = 5
    chunk = game._compiled(cfg, "chunk", length)  # the compiled scan of `length` generations
    world = game._compiled(cfg, "init")(keys)
    jax.block_until_ready(chunk(world, keys, 0))  # compile
    best = float("inf")
    for rep in range(2):
        t = time.perf_counter()
        jax.block_until_ready(chunk(world, keys, length * (rep + 1)))
        best = min(best, (time.perf_counter() - t) / length)
    json.dump({"n": n, "edges": n * degree // 2, "peak": peak, "run_s": run_s, "step_s": best,
               "frac": float(res.metrics["value"].iloc[-1])}, sys.stdout)
    """
)


def measure(n: int, steps: int, degree: int, update: str) -> dict:
    proc = subprocess.run(
        [sys.executable, "-c", CHILD, str(n), str(steps), str(degree), update],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env=dict(os.environ, JAX_PLATFORMS="cpu"),
    )
    if proc.returncode:
        raise RuntimeError(f"N={n}: {proc.stderr[-2000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def scale(sizes: list[int], steps: int, degree: int, update: str) -> None:
    print(f"network-game, random {degree}-regular graph, synchronous {update}, {steps} generations")
    print(
        f"  {'agents':>9} {'edges':>10} {'run s':>8} {'s/gen':>10} {'peak MiB':>9} {'B/agent':>8}"
    )
    rows = []
    for n in sizes:
        r = measure(n, steps, degree, update)
        rows.append(r)
        print(
            f"  {n:>9.0e} {r['edges']:>10.0e} {r['run_s']:>8.1f} {r['step_s']:>10.4g} "
            f"{r['peak'] / 2**20:>9.0f} {r['peak'] / n:>8.0f}",
            flush=True,
        )
    if len(rows) > 1:
        x = np.log([r["edges"] for r in rows])
        y = np.log([r["step_s"] for r in rows])
        print(f"  fitted exponent of time per generation in edges: {np.polyfit(x, y, 1)[0]:.3f}")


def replicates(n: int, reps: int, steps: int) -> None:
    """R seeds as one vmapped run against R one-seed runs in sequence (same process)."""
    import scenarios

    kw = dict(write=False, population=n, steps=steps, graph="random-regular", degree=4)
    for name, extra in [("network-game", dict(kw, synchronous=True)), ("network-game", kw)]:
        scenarios.run(name, seed=0, replicates=reps, **extra)  # compile both shapes
        scenarios.run(name, seed=0, replicates=1, **extra)
        t = time.perf_counter()
        scenarios.run(name, seed=0, replicates=reps, **extra)
        one = time.perf_counter() - t
        t = time.perf_counter()
        for seed in range(reps):
            scenarios.run(name, seed=seed, replicates=1, **extra)
        seq = time.perf_counter() - t
        label = "sync" if extra.get("synchronous") else "async"
        print(
            f"  {name} ({label}) N={n} x {reps} replicates, {steps} generations: one run "
            f"{one:.2f} s, {reps} runs {seq:.2f} s, speed-up {seq / one:.1f}x",
            flush=True,
        )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", nargs="+", type=float, default=[1e4, 1e5, 1e6, 1e7])
    ap.add_argument("--steps", type=int, default=100)
    ap.add_argument("--degree", type=int, default=4)
    ap.add_argument("--update", default="death-birth")
    ap.add_argument("--replicates", action="store_true", help="only the replicates benchmark")
    a = ap.parse_args()
    if a.replicates:
        replicates(1_000, 256, 50)
        return
    scale([int(s) for s in a.sizes], a.steps, a.degree, a.update)


if __name__ == "__main__":
    main()
