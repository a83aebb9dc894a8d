"""Engine benchmarks: the network donation game and the scheduler, as ratios to baselines.

    python benchmarks/bench_engine.py            # full run (a few minutes)
    python benchmarks/bench_engine.py --quick    # smoke run

(a) Network donation game (random 4-regular graph, synchronous Fermi imitation of a random
    neighbour, b=5, c=1, beta=1) in agent-steps/s: this framework (the network-game
    scenario through `scenarios.run`), an idiomatic Mesa 3 model and hand-written numpy.
    The framework's per-step cost is the time of a 2S-step run minus an S-step run (same
    graph, compiled code cached), so graph set-up and compilation are excluded, as they are
    for the numpy loop.
(b) Scheduler events/s, 1e6 events with 1e5 pending (each handler schedules its successor
    at a random delay): this scheduler, a bare heapq loop that pops and calls, SimPy, and
    Mesa's discrete-event simulator. Then a moment with 1e4 due agent events: one batched
    dispatch against one coroutine per event.
All baselines run in the same process, best of a few repeats (the machine is noisy).
"""

from __future__ import annotations

import argparse
import heapq
import itertools
import math
import random
import time

import numpy as np

B, C, BETA, K = 5.0, 1.0, 1.0, 4


def best_of(fn, repeats: int) -> float:
    return min(fn() for _ in range(repeats))


# -- (a) network donation game ---------------------------------------------------------
def framework_rate(n: int, steps: int, repeats: int) -> float:
    """Marginal stepping rate: (run of ``steps``) minus a short run, so that
    graph set-up and compilation, identical in both, cancel out."""
    import scenarios

    kw = dict(
        write=False,
        graph="random-regular",
        population=n,
        degree=K,
        game="donation",
        b=B,
        c=C,
        update="fermi",
        beta=BETA,
        synchronous=True,
        record_every=10_000,
        seed=1,
    )
    base = max(20, min(1000, 2_000_000 // n))  # a short run: set-up and compilation

    def timed(s: int) -> float:
        t = time.perf_counter()
        scenarios.run("network-game", steps=s, **kw)
        return time.perf_counter() - t

    timed(base)  # compile and warm caches
    t_base = best_of(lambda: timed(base), repeats)
    t_full = best_of(lambda: timed(steps), repeats)
    return n * (steps - base) / max(t_full - t_base, 1e-9)


def numpy_rate(n: int, steps: int, repeats: int) -> float:
    from society.topology import make_topology

    e = make_topology("random-regular", n, degree=K, seed=1).edges
    src, dst = np.r_[e[:, 0], e[:, 1]], np.r_[e[:, 1], e[:, 0]]
    order = np.argsort(src, kind="stable")
    table = dst[order].reshape(n, K)  # 4-regular: a dense neighbour table
    rng = np.random.default_rng(1)
    rows = np.arange(n)

    def run() -> float:
        s = (rng.random(n) < 0.5).astype(np.float32)
        t = time.perf_counter()
        for _ in range(steps):
            pay = B * s[table].sum(axis=1) - C * K * s
            j = table[rows, rng.integers(0, K, n)]
            p = 1.0 / (1.0 + np.exp(-BETA * (pay[j] - pay)))
            s = np.where(rng.random(n) < p, s[j], s)
        return time.perf_counter() - t

    return n * steps / best_of(run, repeats)


def mesa_rate(n: int, steps: int) -> float:
    import mesa
    import networkx as nx

    from society.topology import make_topology

    graph = make_topology("random-regular", n, degree=K, seed=1).to_networkx()

    class Player(mesa.Agent):
        def __init__(self, model, strategy):
            super().__init__(model)
            self.strategy, self.payoff, self.next = strategy, 0.0, strategy

        def neighbours(self):
            return self.model.grid.get_neighbors(self.pos, include_center=False)

        def play(self):
            nbrs = self.neighbours()
            self.payoff = B * sum(a.strategy for a in nbrs) - C * len(nbrs) * self.strategy

        def choose(self):
            other = self.random.choice(self.neighbours())
            p = 1.0 / (1.0 + math.exp(-BETA * (other.payoff - self.payoff)))
            self.next = other.strategy if self.random.random() < p else self.strategy

        def adopt(self):
            self.strategy = self.next

    class DonationGame(mesa.Model):
        def __init__(self, g: nx.Graph, seed: int):
            super().__init__(seed=seed)
            self.grid = mesa.space.NetworkGrid(g)
            for node in g.nodes:
                self.grid.place_agent(Player(self, int(self.random.random() < 0.5)), node)

        def step(self):
            self.agents.do("play")
            self.agents.do("choose")
            self.agents.do("adopt")

    model = DonationGame(graph, seed=1)
    t = time.perf_counter()
    for _ in range(steps):
        model.step()
    return n * steps / (time.perf_counter() - t)


# -- (b) scheduler -----------------------------------------------------------------------
def bare_heapq(events: int, pending: int) -> float:
    heap: list = []
    count = itertools.count()
    rnd = random.Random(1).random
    now = [0.0]

    def handler():
        heapq.heappush(heap, (now[0] + rnd(), 0, next(count), handler, ()))

    for _ in range(pending):
        heapq.heappush(heap, (rnd(), 0, next(count), handler, ()))
    t = time.perf_counter()
    for _ in range(events):
        when, _, _, fn, args = heapq.heappop(heap)
        now[0] = when
        fn(*args)
    return events / (time.perf_counter() - t)


def ours(events: int, pending: int) -> float:
    from sim_core.scheduler import Scheduler

    sim = Scheduler()
    rnd = random.Random(1).random

    def handler():
        sim.after(rnd(), handler)

    for _ in range(pending):
        sim.at(rnd(), handler)
    t = time.perf_counter()
    sim.run(max_events=events)
    return events / (time.perf_counter() - t)


def simpy_rate(events: int, pending: int) -> float:
    import simpy

    env = simpy.Environment()
    rnd = random.Random(1).random
    per_proc = events // pending

    def proc(env):
        for _ in range(per_proc):
            yield env.timeout(rnd())

    for _ in range(pending):
        env.process(proc(env))
    env.step()  # start-up events are not timed
    t = time.perf_counter()
    env.run()
    return per_proc * pending / (time.perf_counter() - t)


def mesa_devs(events: int, pending: int) -> float:
    import mesa
    from mesa.experimental.devs import DEVSimulator

    sim = DEVSimulator()
    sim.setup(mesa.Model(seed=1))
    rnd = random.Random(1).random
    done = [0]

    def handler():
        done[0] += 1
        sim.schedule_event_relative(handler, rnd())

    for _ in range(pending):
        sim.schedule_event_absolute(handler, rnd())
    t = time.perf_counter()
    while done[0] < events:
        sim.run_next_event()
    return events / (time.perf_counter() - t)


def moment_rates(agents: int, moments: int) -> tuple[float, float]:
    """Events/s for `agents` due agent events per moment: batched handler vs coroutines."""
    from sim_core.scheduler import Scheduler, batched

    wealth = np.zeros(agents)

    @batched
    def act(ids):
        wealth[ids] += 1.0  # one vectorised update for all due agents

    async def act_one(agent):
        return lambda: wealth.__setitem__(agent, wealth[agent] + 1.0)

    def run_batched():
        sim = Scheduler()
        for m in range(moments):
            for a in range(agents):
                sim.at(float(m), act, agents=a)
        t = time.perf_counter()
        sim.run()
        return time.perf_counter() - t

    def run_coroutines():
        sim = Scheduler()
        for m in range(moments):
            for a in range(agents):
                sim.at(float(m), act_one, a)
        t = time.perf_counter()
        sim.run()
        return time.perf_counter() - t

    n = agents * moments
    return n / best_of(run_batched, 2), n / best_of(run_coroutines, 2)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="small sizes, one repeat")
    ap.add_argument("--mesa-budget", type=float, default=120.0, help="seconds Mesa may take in all")
    args = ap.parse_args()
    quick = args.quick
    sizes = [1_000, 10_000] if quick else [1_000, 10_000, 100_000, 1_000_000]
    repeats = 1 if quick else 3

    print("(a) network donation game, random 4-regular, synchronous Fermi: agent-steps/s")
    print(f"{'N':>9} {'framework':>11} {'numpy':>11} {'mesa':>11} {'fw/numpy':>9} {'fw/mesa':>8}")
    mesa_spent = 0.0
    for n in sizes:
        steps = max(60, 40_000_000 // n)  # about 40M agent-steps: stepping dominates set-up
        fw = framework_rate(n, steps, repeats)
        npr = numpy_rate(n, min(steps, max(20, 10_000_000 // n)), repeats)
        me = math.nan
        if mesa_spent < args.mesa_budget:
            t = time.perf_counter()
            me = mesa_rate(n, max(2, min(20, 200_000 // n)))  # Mesa: a few steps (slow)
            mesa_spent += time.perf_counter() - t
        print(
            f"{n:>9} {fw:>11.3g} {npr:>11.3g} {me:>11.3g} {fw / npr:>9.2f} {fw / me:>8.1f}",
            flush=True,
        )

    events, pending = (200_000, 20_000) if quick else (1_000_000, 100_000)
    print(f"\n(b) scheduler, {events:.0e} events with {pending:.0e} pending: events/s")
    rates = {}
    for name, fn in (
        ("bare heapq", bare_heapq),
        ("this scheduler", ours),
        ("simpy", simpy_rate),
        ("mesa devs", mesa_devs),
    ):
        rates[name] = max(fn(events, pending) for _ in range(repeats))
    for name, r in rates.items():
        print(f"  {name:<15} {r:>11.3g}")
    o = rates["this scheduler"]
    print(
        f"  ratios: vs heapq {o / rates['bare heapq']:.2f}x, vs simpy {o / rates['simpy']:.2f}x, "
        f"vs mesa devs {o / rates['mesa devs']:.2f}x"
    )

    agents, moments = (10_000, 5) if quick else (10_000, 20)
    batched_rate, coro_rate = moment_rates(agents, moments)
    print(
        f"\n    moments of {agents} due agent events: batched dispatch {batched_rate:.3g} events/s, "
        f"one coroutine per event {coro_rate:.3g} events/s ({batched_rate / coro_rate:.1f}x)"
    )


if __name__ == "__main__":
    main()
