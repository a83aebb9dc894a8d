"""Schelling and WolfSheep from 1e4 to 1e6 agents: time per agent-step and peak memory.

Each (model, size) runs in a fresh process (peak memory is a process's high-water mark):
one run to compile, then the timed run of ``steps`` steps (``scenarios.run(..., write=False)``).
Schelling uses Mesa's large configuration's rules (density 0.8, homophily 1, radius 2: nearly
every agent moves every step); WolfSheep Mesa's large configuration's densities (1,000 sheep
and 500 wolves per 100 x 100 cells) on a larger grid.

    .venv/bin/python benchmarks/bench_mesa_scale.py
    .venv/bin/python benchmarks/bench_mesa_scale.py --models schelling --agents 1e5 1e6
"""

from __future__ import annotations

import argparse
import json
import math
import subprocess
import sys


def params(model: str, agents: int) -> dict:
    if model == "schelling":
        side = math.ceil(math.sqrt(agents / 0.8))
        return {"width": side, "height": side, "density": 0.8, "homophily": 1.0, "radius": 2}
    side = math.ceil(math.sqrt(agents / 0.15))
    sheep = round(agents * 2 / 3)
    return {"width": side, "height": side, "initial_sheep": sheep,
            "initial_wolves": agents - sheep}  # fmt: skip


def one(model: str, agents: int, steps: int) -> dict:
    """Run in this process: compile, then time ``steps`` steps."""
    import resource
    import time

    import scenarios

    kw = {**params(model, agents), "steps": steps}
    scenarios.run(model, write=False, seed=0, **kw)
    t = time.perf_counter()
    scenarios.run(model, write=False, seed=1, **kw)
    dt = time.perf_counter() - t
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20  # KiB -> GiB
    return {"model": model, "agents": agents, "s_per_step": dt / steps,
            "ns_per_agent_step": dt / steps / agents * 1e9, "peak_gib": peak}  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", nargs="*", default=["schelling", "wolf-sheep"])
    ap.add_argument("--agents", nargs="*", type=float, default=[1e4, 1e5, 1e6])
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--one", nargs=2, help=argparse.SUPPRESS)  # model agents: a child process
    a = ap.parse_args()
    if a.one:
        print(json.dumps(one(a.one[0], int(float(a.one[1])), a.steps)))
        return
    print(f"{'model':<12}{'agents':>10}{'s/step':>10}{'ns/agent-step':>15}{'peak GiB':>10}")
    for model in a.models:
        for n in a.agents:
            cmd = [sys.executable, __file__, "--one", model, str(n), "--steps", str(a.steps)]
            r = json.loads(subprocess.run(cmd, capture_output=True, text=True, check=True).stdout)
            print(f"{model:<12}{r['agents']:>10,}{r['s_per_step']:>10.3f}"
                  f"{r['ns_per_agent_step']:>15.0f}{r['peak_gib']:>10.2f}", flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
