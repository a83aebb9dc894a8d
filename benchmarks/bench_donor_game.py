"""donor-game: marginal seconds per round with rule agents at a population of 1e3 and 1e5.

    python benchmarks/bench_donor_game.py [--sizes 1000 100000] [--agents rules]

The time of a run of 4 generations minus that of a run of 2 (compiled code cached, both
timed after a warm-up run), over the extra rounds (2 generations x 2 games x ``steps``
rounds); best of 3. Run the same command on two checkouts to compare them.
"""

from __future__ import annotations

import argparse
import time

import scenarios


def seconds(n: int, generations: int, agents: str) -> float:
    t = time.perf_counter()
    scenarios.run(
        "donor-game", write=False, agents=agents, population=n, steps=12, generations=generations
    )
    return time.perf_counter() - t


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", type=int, nargs="+", default=[1000, 100000])
    ap.add_argument("--agents", default="rules")
    args = ap.parse_args()
    for n in args.sizes:
        seconds(n, 2, args.agents), seconds(n, 4, args.agents)  # compile
        best = min(seconds(n, 4, args.agents) - seconds(n, 2, args.agents) for _ in range(3))
        print(f"population {n:>7}: {1e3 * best / (2 * 2 * 12):.3f} ms per round ({args.agents})")


if __name__ == "__main__":
    main()
