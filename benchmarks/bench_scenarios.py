"""Scenario benchmarks: the four issue-7 studies with rule agents, as ratios to numpy baselines.

    python benchmarks/bench_scenarios.py            # full run (several minutes)
    python benchmarks/bench_scenarios.py --quick    # smallest sizes only (< 1 min)

Each scenario runs through the framework (``scenarios.run(NAME, write=False, agents="rules",
...)``). As in bench_engine.py its cost is MARGINAL: the time of a long run minus a short
run (same graph, compiled code cached), divided by the extra steps, so graph set-up, jit
compilation and the end-of-run summary cancel. Throughput is agent-steps per second
(agents x days/rounds/months/periods x replicates / s); where a hand-written numpy loop of
the same dynamics exists it runs in the same process and the ratio framework/numpy is shown.

- epidemic: SIR on a random 8-regular graph (r0 2.5, recovery 0.2/day, 10 seeds, behaviour
  'none'); numpy: per day, infected neighbours counted by bincount over the directed edges,
  infection with probability 1 - exp(-tau x infected neighbours), recovery with q.
- public-goods: random groups of 4 on a complete graph (stranger matching), the default
  rule mix (conditional 5, free-rider 3, cooperator 1, punisher 1; no sanction stage);
  numpy: shuffle, reshape into groups, pots and payoffs, conditional cooperators match the
  others' last mean. Scaled by N (to 1e6: well mixed, no graph is built) and by replicates.
- commons: 5 sustainable fishers per lake, scaled by lakes (replicates); numpy: f(S),
  requests, rationing, collapse, logistic regrowth and the episode tallies, over all lakes.
- market: 5 rule firms (cost-plus, undercut, adaptive) and 100 consumers per market,
  scaled by markets (replicates); framework throughput only (no baseline).
All timings are best of a few repeats (the machine is shared and noisy).
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from bench_engine import best_of

EPI = dict(graph="random-regular", degree=8, r0=2.5, recovery_rate=0.2, initial_infected=10)
SEED = 1


# -- the framework's marginal cost ------------------------------------------------------------
def framework_seconds_per_step(
    name: str, step_param: str, short: int, long: int, repeats: int, **kw
) -> float:
    """Seconds per extra step: (best ``long`` run - best ``short`` run) / steps between them.

    The steps really run are read from the metrics (the epidemic stops when nobody is
    infectious), so an epidemic that ended early cannot inflate the rate."""
    import scenarios

    def timed(steps: int) -> tuple[float, int]:
        t = time.perf_counter()
        res = scenarios.run(
            name, write=False, seed=SEED, agents="rules", **{step_param: steps}, **kw
        )
        return time.perf_counter() - t, int(res.metrics["time"].max())

    timed(short)  # compile (this shape) and warm caches
    runs_s = [timed(short) for _ in range(repeats)]
    runs_l = [timed(long) for _ in range(repeats)]
    done_s, done_l = runs_s[0][1], runs_l[0][1]
    if done_l <= done_s:
        raise RuntimeError(f"{name}: the long run stopped at step {done_l} (short: {done_s})")
    dt = min(t for t, _ in runs_l) - min(t for t, _ in runs_s)
    return dt / (done_l - done_s) if dt > 0 else float("nan")  # nan: lost in set-up noise


# -- numpy baselines (seconds per step) ----------------------------------------------------------
def epidemic_numpy(n: int, days: int, repeats: int) -> float:
    from society.topology import make_topology

    e = make_topology("random-regular", n, degree=EPI["degree"], seed=SEED).edges
    src, dst = np.r_[e[:, 0], e[:, 1]], np.r_[e[:, 1], e[:, 0]]
    q = -np.expm1(-EPI["recovery_rate"])
    tau = EPI["r0"] * q / EPI["degree"]  # per-contact hazard per day, as the scenario's
    rng = np.random.default_rng(SEED)

    def run() -> float:
        h = np.zeros(n, np.int8)  # 0 S, 2 I, 3 R
        h[rng.choice(n, EPI["initial_infected"], replace=False)] = 2
        t = time.perf_counter()
        for _ in range(days):
            k = np.bincount(src, weights=(h == 2)[dst], minlength=n)
            u = rng.random((2, n))
            new = (h == 0) & (u[0] < -np.expm1(-tau * k))
            rec = (h == 2) & (u[1] < q)
            h = np.where(new, 2, np.where(rec, 3, h)).astype(np.int8)
        return time.perf_counter() - t

    return best_of(run, repeats) / days


PG_TYPES = np.array([0] * 5 + [1] * 3 + [2] + [3])  # conditional, free-rider, cooperator, punisher


def public_goods_numpy(n: int, reps: int, rounds: int, repeats: int, g: int = 4) -> float:
    """R independent populations of N, each shuffled into groups of g every round."""
    e, r = 20.0, 1.6
    rng = np.random.default_rng(SEED)
    kind = PG_TYPES[rng.integers(0, PG_TYPES.size, (reps, n))]
    rows = np.arange(reps)[:, None]

    def run() -> float:
        others = np.zeros((reps, n))
        t = time.perf_counter()
        for rnd in range(rounds):
            share = np.where(kind == 0, 0.5 if rnd == 0 else np.clip(others, 0, 1), 0.0)
            share = np.where(kind >= 2, 1.0, share)
            order = rng.random((reps, n)).argsort(axis=1)  # a permutation per replicate
            c = e * share[rows, order]  # group j: positions 4j .. 4j+3 of the order
            pot = c.reshape(reps, -1, g).sum(axis=2)
            pay_sorted = e - c + r * np.repeat(pot, g, axis=1) / g
            pay = np.empty_like(pay_sorted)
            pay[rows, order] = pay_sorted
            oth = np.empty_like(c)
            oth[rows, order] = (np.repeat(pot, g, axis=1) - c) / (g - 1) / e
            others = oth
            _ = pay.mean(axis=1), share.mean(axis=1)  # the round's records
        return time.perf_counter() - t

    return best_of(run, repeats) / rounds


def commons_numpy(lakes: int, months: int, repeats: int, n: int = 5) -> float:
    cap, g, threshold = 100.0, 2.0, 5.0

    def run() -> float:
        stock = np.full(lakes, cap)
        alive = np.ones(lakes, bool)
        caught_total = np.zeros((lakes, n))
        over = np.zeros((lakes, n))
        t = time.perf_counter()
        for _ in range(months):
            disc = np.maximum((1 + g) ** 2 - 4 * g * stock / cap, 0.0)
            f = np.maximum(stock - 2 * stock / ((1 + g) + np.sqrt(disc)), 0.0)
            req = np.where(alive[:, None], np.repeat((f / n)[:, None], n, axis=1), 0.0)
            total = req.sum(axis=1)
            scale = np.where(total > stock, stock / np.where(total > 0, total, 1), 1.0)
            caught = req * scale[:, None]
            left = np.maximum(stock - caught.sum(axis=1), 0.0)
            collapsed = alive & (left < threshold)
            grown = np.minimum(cap, left + g * left * (1 - left / cap))
            stock = np.where(alive, np.where(collapsed, left, grown), stock)
            alive &= ~collapsed
            caught_total += caught
            over += req > (f / n)[:, None] + 0.005
        return time.perf_counter() - t

    return best_of(run, repeats) / months


# -- the table -----------------------------------------------------------------------------------
def row(label: str, agents: int, units: int, fw_s: float, np_s: float | None) -> None:
    """One line: agent-steps/s of both, units (lakes, markets...) per s, and the ratio."""
    fw = agents / fw_s
    npr = agents / np_s if np_s else float("nan")
    ratio = f"{fw / npr:9.3f}" if np_s else f"{'-':>9}"
    print(f"  {label:<22} {fw:>11.3g} {npr:>11.3g} {ratio} {units / fw_s:>12.3g}", flush=True)


def header(title: str, unit: str) -> None:
    print(f"\n{title}")
    print(f"  {'size':<22} {'framework':>11} {'numpy':>11} {'fw/numpy':>9} {unit:>12}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="smallest sizes, two repeats")
    quick = ap.parse_args().quick
    repeats = 2 if quick else 3
    print("agent-steps/s (marginal per-step cost of the framework; numpy in the same process)")

    header("epidemic: SIR, random 8-regular graph, rule agents 'none' (agent-days/s)", "days/s")
    sizes = [1_000, 10_000] if quick else [1_000, 10_000, 100_000, 1_000_000]
    for n in sizes:
        # Small runs take tens of ms (many days per compiled call): 90 extra days (the
        # epidemic lasts ~110) and more repeats, so that the marginal cost stands out of the
        # noise of the per-run set-up.
        short, long = (5, 25) if n >= 1_000_000 else (10, 100 if n <= 10_000 else 60)
        reps = 2 if n >= 1_000_000 else (3 * repeats if n <= 10_000 else repeats)
        fw = framework_seconds_per_step("epidemic", "steps", short, long, reps, population=n, **EPI)
        row(f"N={n:.0e}", n, 1, fw, epidemic_numpy(n, long - short, repeats))

    header(
        "public-goods: groups of 4, complete graph, default rule mix (agent-rounds/s)", "rounds/s"
    )
    cases = [(1_000, 1)] if quick else [(1_000, 1), (10_000, 1), (100_000, 1), (1_000_000, 1)]
    cases += [] if quick else [(1_000, 10), (1_000, 100)]
    for n, reps in cases:
        long = {1_000: 105, 10_000: 55, 1_000_000: 15}.get(n * reps, 25)
        fw = framework_seconds_per_step(
            "public-goods", "steps", 5, long, repeats if n * reps <= 10_000 else 2,
            population=n, replicates=reps,
        )  # fmt: skip
        row(f"N={n:.0e} x {reps} reps", n * reps, 1, fw, public_goods_numpy(n, reps, 20, repeats))

    header("commons: 5 sustainable fishers per lake (fisher-months/s)", "lake-mo/s")
    for lakes in [100] if quick else [100, 1_000, 10_000]:
        fw = framework_seconds_per_step(
            "commons",
            "steps",
            12,
            120 if lakes <= 100 else 60,
            repeats,
            replicates=lakes,
            strategies="sustainable:1",
        )
        row(f"{lakes:.0e} lakes", 5 * lakes, lakes, fw, commons_numpy(lakes, 48, repeats))

    header("market: 5 rule firms, 100 consumers per market (firm-periods/s)", "market-p/s")
    for markets in [100] if quick else [100, 1_000, 10_000]:
        fw = framework_seconds_per_step(
            "market",
            "steps",
            5,
            {100: 45, 1_000: 25}.get(markets, 15),
            repeats,
            replicates=markets,
        )
        row(f"{markets:.0e} markets", 5 * markets, markets, fw, None)


if __name__ == "__main__":
    main()
