"""Benchmark the linear metrics at 1e6 agents against straightforward pure-Python baselines.

Run: ``.venv/bin/python benchmarks/bench_metrics.py`` (1e6 agents) or ``--quick`` (1e5).
Prints seconds (best of ``--repeat`` runs), throughput, and the speed-up over a pure-Python
loop computing the same number in the same process (one run; the ratio is the figure to
compare across machines, not the seconds).
"""

from __future__ import annotations

import argparse
import math
import time
from collections.abc import Callable

import numpy as np

from society.metrics import assortment, cooperation_rate, dol_index, gini, reciprocity


def best_of(fn: Callable[[], object], repeat: int) -> tuple[float, object]:
    times, out = [], None
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return min(times), out


def py_rate(xs: list[int]) -> float:
    return sum(xs) / len(xs)


def py_gini(xs: list[float]) -> float:
    s = sorted(xs)
    n, total, acc = len(s), sum(s), 0.0
    for i, x in enumerate(s, 1):
        acc += i * x
    return 2 * acc / (n * total) - (n + 1) / n


def py_pearson(a: list[float], b: list[float]) -> float:
    n = len(a)
    ma, mb = sum(a) / n, sum(b) / n
    sab = saa = sbb = 0.0
    for x, y in zip(a, b, strict=True):
        sab += (x - ma) * (y - mb)
        saa += (x - ma) ** 2
        sbb += (y - mb) ** 2
    return sab / math.sqrt(saa * sbb)


def py_dol(rows: list[list[int]]) -> float:
    total = sum(map(sum, rows))
    pi = [sum(r) / total for r in rows]
    pj = [sum(col) / total for col in zip(*rows, strict=True)]
    mi = 0.0
    for i, r in enumerate(rows):
        for j, c in enumerate(r):
            if c:
                p = c / total
                mi += p * math.log(p / (pi[i] * pj[j]))
    return mi / -sum(p * math.log(p) for p in pj if p > 0)


def py_assortment(trait: list[float], edges: list[tuple[int, int]]) -> float:
    a = [trait[u] for u, v in edges] + [trait[v] for u, v in edges]
    b = [trait[v] for u, v in edges] + [trait[u] for u, v in edges]
    return py_pearson(a, b)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--quick", action="store_true", help="1e5 agents instead of 1e6")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    n = 100_000 if args.quick else 1_000_000
    rng = np.random.default_rng(0)

    coop = rng.integers(0, 2, n)
    wealth = rng.exponential(1.0, n)
    given, received = rng.random(n), rng.random(n)
    counts = rng.poisson(rng.dirichlet(np.full(8, 0.3), n) * 20)
    i = np.arange(n)
    ring4 = np.concatenate([np.c_[i, (i + 1) % n], np.c_[i, (i + 2) % n]])  # 4-regular
    trait = rng.integers(0, 2, n).astype(float)

    cases = [
        ("cooperation_rate", n, lambda: cooperation_rate(coop), lambda: py_rate(coop.tolist())),
        ("gini", n, lambda: gini(wealth), lambda: py_gini(wealth.tolist())),
        (
            "reciprocity",
            n,
            lambda: reciprocity(given, received),
            lambda: py_pearson(given.tolist(), received.tolist()),
        ),
        (
            "dol_index (n x 8)",
            n,
            lambda: dol_index(counts)["dol_indiv_to_task"],
            lambda: py_dol(counts.tolist()),
        ),
        (
            "assortment (4-regular)",
            n,
            lambda: assortment(trait, ring4),
            lambda: py_assortment(trait.tolist(), [tuple(e) for e in ring4.tolist()]),
        ),
    ]
    print(f"agents: {n:,}   (seconds: best of {args.repeat}; baseline: pure Python, 1 run)")
    print(f"{'metric':24s} {'seconds':>9s} {'agents/s':>12s} {'baseline s':>11s} {'speed-up':>9s}")
    for name, size, fast, slow in cases:
        secs, value = best_of(fast, args.repeat)
        base_secs, base_value = best_of(slow, 1)
        if not math.isclose(float(value), float(base_value), rel_tol=1e-6, abs_tol=1e-9):
            raise SystemExit(f"{name}: metric {value} disagrees with baseline {base_value}")
        print(
            f"{name:24s} {secs:9.4f} {size / secs:12.3g} {base_secs:11.3f} {base_secs / secs:8.0f}x"
        )


if __name__ == "__main__":
    main()
