"""Mesa's Boltzmann wealth model against the same model as a vectorised cohort (agent-steps/s).

Both come from ``examples/mesa_boltzmann.py`` and run in this process at one agent per grid
cell (an ``s x s`` torus with ``s = round(sqrt(N))``), the tutorial's density. Three figures:

- ``mesa step``: ``model.step()`` as the tutorial writes it, so it includes the model's own
  ``DataCollector.collect`` (Gini and every agent's wealth, each step);
- ``mesa actions``: only the agents' actions (``shuffle_do("move")``, ``do("give_money")``),
  the Python loop over agents that a vectorised cohort replaces;
- ``vectorised``: ``VectorisedBoltzmann.step()`` plus the Gini, each step.

Each figure is the best of three timed blocks after a warm-up step.

    .venv/bin/python benchmarks/bench_mesa.py            # N = 1e3, 1e4
    .venv/bin/python benchmarks/bench_mesa.py --large    # also 1e5, 1e6 (vectorised only)
"""

from __future__ import annotations

import argparse
import importlib.util
import math
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from society.metrics import gini

_PATH = Path(__file__).parents[1] / "examples" / "mesa_boltzmann.py"
_spec = importlib.util.spec_from_file_location("mesa_boltzmann_example", _PATH)
ex = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = ex
_spec.loader.exec_module(ex)


def best_rate(block: Callable[[int], None], n: int, steps: int, repeats: int = 3) -> float:
    """Agent-steps per second of the fastest of ``repeats`` blocks of ``steps`` steps."""
    block(1)  # warm-up
    best = math.inf
    for _ in range(repeats):
        t0 = time.perf_counter()
        block(steps)
        best = min(best, time.perf_counter() - t0)
    return n * steps / best


def mesa_rates(n: int, steps: int) -> tuple[float, float]:
    side = round(math.sqrt(n))
    model = ex.MoneyModel(n, side, side, seed=0)

    def step(k: int) -> None:
        for _ in range(k):
            model.step()

    def actions(k: int) -> None:
        for _ in range(k):
            model.agents.shuffle_do("move")
            model.agents.do("give_money")

    return best_rate(step, n, steps), best_rate(actions, n, steps)


def vectorised_rate(n: int, steps: int) -> float:
    side = round(math.sqrt(n))
    cohort = ex.VectorisedBoltzmann(n, side, side, np.random.default_rng(0))

    def block(k: int) -> None:
        for _ in range(k):
            cohort.step()
            gini(cohort.wealth)

    return best_rate(block, n, steps)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--large", action="store_true", help="also N = 1e5 and 1e6, vectorised only")
    args = ap.parse_args()
    print("agent-steps/s (best of 3); ratio = vectorised / mesa step")
    print(f"{'N':>9} {'mesa step':>12} {'mesa actions':>13} {'vectorised':>12} {'ratio':>7}")
    for n, mesa_steps, vec_steps in [(1_000, 20, 200), (10_000, 4, 50)]:
        step_rate, action_rate = mesa_rates(n, mesa_steps)
        vec = vectorised_rate(n, vec_steps)
        print(
            f"{n:>9,} {step_rate:>12,.0f} {action_rate:>13,.0f} {vec:>12,.0f} {vec / step_rate:>7.0f}x"
        )
    if args.large:
        for n, vec_steps in [(100_000, 10), (1_000_000, 3)]:
            print(f"{n:>9,} {'-':>12} {'-':>13} {vectorised_rate(n, vec_steps):>12,.0f} {'-':>7}")


if __name__ == "__main__":
    main()
