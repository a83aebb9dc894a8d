"""Event-driven against fixed-step dynamics, per simulated day or period:

- epidemic: periods drawn when an agent is infected (periods=drawn) against per-step coin
  flips (periods=chain), both in the compiled scan;
- market: consumers arriving at 5 moments of a period (arrivals=5, moments of the period's
  compiled step) against one clearing per period (arrivals=1); 5 clearings do more work by
  design.

    python benchmarks/bench_event_driven.py            # N = 1e4, 1e5
    python benchmarks/bench_event_driven.py --quick    # N = 1e4 only

Both run the same horizon (an epidemic still growing at its end, so no early stop), rule
agents, one replicate, compiled code warm; best of a few repeats, in the same process.
The ratio drawn / chain is the figure (below 1: the event-driven version is cheaper).
"""

from __future__ import annotations

import argparse
import time

import scenarios


def seconds(periods: str, n: int, days: int, model: str) -> float:
    t = time.perf_counter()
    scenarios.run(
        "epidemic", seed=1, write=False, population=n, steps=days, r0=1.8, model=model,
        initial_infected=max(10, n // 1000), periods=periods,
    )  # fmt: skip
    return time.perf_counter() - t


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--days", type=int, default=40)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    sizes = [10_000] if args.quick else [10_000, 100_000]
    print(f"{'model':>5} {'N':>8} {'chain s/day':>12} {'drawn s/day':>12} {'drawn/chain':>12}")
    for model in ("SIR", "SEIR"):
        for n in sizes:
            times = {}
            for periods in ("chain", "drawn"):
                seconds(periods, n, args.days, model)  # compile, warm caches
                runs = [seconds(periods, n, args.days, model) for _ in range(args.repeats)]
                times[periods] = min(runs) / args.days
            print(
                f"{model:>5} {n:>8} {times['chain']:>12.2e} {times['drawn']:>12.2e} "
                f"{times['drawn'] / times['chain']:>12.2f}"
            )
    print(
        f"\n{'market':>6} {'consumers':>9} {'1 arrival s/period':>19} {'5 arrivals s/period':>20} {'ratio':>6}"
    )
    for consumers in [1000] if args.quick else [1000, 10_000]:
        times = {}
        for k in (1, 5):
            market(k, consumers, args.days)  # compile
            times[k] = min(market(k, consumers, args.days) for _ in range(args.repeats)) / args.days
        print(
            f"{'':>6} {consumers:>9} {times[1]:>19.2e} {times[5]:>20.2e} {times[5] / times[1]:>6.2f}"
        )


def market(arrivals: int, consumers: int, periods: int) -> float:
    t = time.perf_counter()
    scenarios.run(
        "market", seed=1, write=False, agents="rules", population=20, consumers=consumers,
        sybil=2, steps=periods, arrivals=arrivals,
    )  # fmt: skip
    return time.perf_counter() - t


if __name__ == "__main__":
    main()
