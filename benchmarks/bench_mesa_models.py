"""Mesa's benchmark models, ours against Mesa's own, at Mesa's benchmark configurations.

Each model and configuration runs in this one process: ours once to compile (reported
apart), then interleaved runs of Mesa's ``mesa.examples`` model (constructed, stepped
``steps`` times) and ours (``scenarios.run(name, write=False, seed=s, **params)``: the whole
call, fixed cost included), each seed a new run. The figure is the median time of each and
their ratio, beside Agents.jl's published ratio against Mesa (ABMFrameworksComparison) and
the mean of each model's headline metric over the runs, ours and Mesa's.

    .venv/bin/python benchmarks/bench_mesa_models.py            # 5 interleaved runs each
    .venv/bin/python benchmarks/bench_mesa_models.py --runs 3 --models schelling
    .venv/bin/python benchmarks/bench_mesa_models.py --cores 1  # this process on one core

``--cores N`` lets this process (Mesa and ours) see N cores before JAX starts: Mesa and
Agents.jl run on one core, and XLA with one core runs a small world's steps inline, without
its thread pool (measured here: 1.05-1.5x faster at Mesa's configurations; at 1e6 agents the
second core is worth 1.3-1.8x: docs/scaling.md).
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from collections.abc import Callable

import numpy as np

import scenarios


def _gini(m) -> float:
    x = np.sort([a.wealth for a in m.agents])
    return float(
        2 * np.dot(np.arange(1, x.size + 1), x) / (x.size * x.sum()) - (x.size + 1) / x.size
    )


def _polarisation(m) -> float:
    h = np.array([a.direction / max(np.linalg.norm(a.direction), 1e-12) for a in m.agents])
    return float(np.linalg.norm(h.mean(0)))


# name -> Mesa class name, (ours: metric, Mesa: reporter), Agents.jl's ratios (small, large),
# and Mesa's benchmark configurations (its benchmarks/configurations.py): (params, steps).
MODELS: dict[str, tuple[str, str, Callable, tuple[float, float] | None, dict]] = {
    "boltzmann-wealth": (
        "BoltzmannWealth", "gini", _gini, None,
        {"small": ({"n": 100, "width": 10, "height": 10}, 125),
         "large": ({"n": 10_000, "width": 100, "height": 100}, 10)},
    ),
    "schelling": (
        "Schelling", "happy_fraction", lambda m: m.happy / len(m.agents), (30, 27),
        {"small": ({"width": 40, "height": 40, "density": 0.625, "homophily": 0.4, "radius": 1}, 20),
         "large": ({"width": 100, "height": 100, "density": 0.8, "homophily": 1, "radius": 2}, 10)},
    ),
    "wolf-sheep": (
        "WolfSheep", "sheep", lambda m: len([a for a in m.agents if type(a).__name__ == "Sheep"]), (9, 3),
        {"small": ({"width": 25, "height": 25, "initial_sheep": 60, "initial_wolves": 40, "sheep_reproduce": 0.2,
                    "wolf_reproduce": 0.1, "grass_regrowth_time": 20, "grass": True}, 80),
         "large": ({"width": 100, "height": 100, "initial_sheep": 1000, "initial_wolves": 500, "sheep_reproduce": 0.4,
                    "wolf_reproduce": 0.2, "grass_regrowth_time": 10, "grass": True}, 20)},
    ),
    "boid-flockers": (
        "BoidFlockers", "polarisation", _polarisation, (159, 60),
        {"small": ({"population_size": 200, "width": 100, "height": 100, "vision": 5}, 20),
         "large": ({"population_size": 400, "width": 150, "height": 150, "vision": 15}, 10)},
    ),
}  # fmt: skip


def _mesa_run(mesa_cls, seed: int, steps: int, params: dict):  # noqa: ANN001, ANN202
    """Mesa's model built and stepped ``steps`` times (WolfSheep steps through its simulator)."""
    if mesa_cls.__name__ == "WolfSheep":
        from mesa.experimental.devs import ABMSimulator

        sim = ABMSimulator()
        model = mesa_cls(simulator=sim, seed=seed, **params)
        sim.run_for(steps)
        return model
    model = mesa_cls(seed=seed, **params)
    for _ in range(steps):
        model.step()
    return model


def bench(name: str, config: str, runs: int) -> dict:
    import mesa.examples

    cls_name, metric, reporter, agents_jl, configs = MODELS[name]
    params, steps = configs[config]
    mesa_cls = getattr(mesa.examples, cls_name)
    t = time.perf_counter()
    scenarios.run(name, seed=0, write=False, steps=steps, **params)
    compile_s = time.perf_counter() - t
    ours_t, mesa_t, ours_v, mesa_v = [], [], [], []
    for seed in range(1, runs + 1):
        t = time.perf_counter()
        model = _mesa_run(mesa_cls, seed, steps, params)
        mesa_t.append(time.perf_counter() - t)
        mesa_v.append(reporter(model))
        t = time.perf_counter()
        result = scenarios.run(name, seed=seed, write=False, steps=steps, **params)
        ours_t.append(time.perf_counter() - t)
        ours_v.append(result.summary["metrics"][metric]["mean"])
    mesa_s, ours_s = statistics.median(mesa_t), statistics.median(ours_t)
    return {
        "model": name, "config": config, "mesa_s": mesa_s, "ours_s": ours_s, "ratio": mesa_s / ours_s,
        "agents_jl": agents_jl[0 if config == "small" else 1] if agents_jl else None, "compile_s": compile_s,
        "metric": metric, "ours": float(np.mean(ours_v)), "mesa": float(np.mean(mesa_v)),
    }  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=5, help="interleaved runs of each (default 5)")
    ap.add_argument("--models", nargs="*", default=[m for m in MODELS if m in scenarios.names()])
    ap.add_argument("--configs", nargs="*", default=["small", "large"])
    ap.add_argument("--cores", type=int, help="cores this process may use (default: all it has)")
    args = ap.parse_args()
    if args.cores is not None:  # before JAX starts: its thread pool has one thread per core
        if args.cores < 1 or not hasattr(os, "sched_setaffinity"):
            ap.error("--cores takes an integer >= 1, on an OS that can restrict cores (Linux)")
        os.sched_setaffinity(0, sorted(os.sched_getaffinity(0))[: args.cores])
    print(
        f"cores: {len(os.sched_getaffinity(0)) if hasattr(os, 'sched_getaffinity') else os.cpu_count()}"
    )
    print(
        f"{'model':17} {'config':6} {'mesa s':>8} {'ours s':>8} {'ratio':>7} {'Agents.jl':>9} {'compile s':>9}  headline (ours / Mesa)"
    )
    for name in args.models:
        for config in args.configs:
            r = bench(name, config, args.runs)
            jl = f"{r['agents_jl']}x" if r["agents_jl"] else "-"
            print(
                f"{r['model']:17} {r['config']:6} {r['mesa_s']:8.4f} {r['ours_s']:8.4f} {r['ratio']:6.1f}x {jl:>9} "
                f"{r['compile_s']:9.2f}  {r['metric']} {r['ours']:.3f} / {r['mesa']:.3f}",
                flush=True,
            )


if __name__ == "__main__":
    main()
