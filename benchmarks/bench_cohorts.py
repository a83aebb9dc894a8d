"""Cohorts: learned act+learn throughput (agent-steps/s) against a Python loop over agents.

One step = every agent acts (linear softmax policy over 4 features, 2 actions), a reward is
computed, and every agent learns: a REINFORCE step per agent (``reinforce``), or fitness
accumulation plus one round of Fermi imitation on a degree-4 random-regular graph
(``social``). The baseline runs the same REINFORCE step (hand-written gradient, plain SGD)
as a Python loop over agents with numpy, in this process on a small population; the figure
that matters is vectorised / baseline. Rule cohorts (a 3-strategy mix, act only) ride along.
Each figure is the best of three timed blocks after a warm-up (which compiles).

    .venv/bin/python benchmarks/bench_cohorts.py           # 1e4, 1e5, 1e6 agents
    .venv/bin/python benchmarks/bench_cohorts.py --quick   # 1e3, 1e4 agents
"""

from __future__ import annotations

import argparse
import time

import jax
import jax.numpy as jnp
import numpy as np

from society.cohorts import LearnedCohort, RuleCohort, parse_mix
from society.topology import make_topology

FEATURES = {"f": 4}


@jax.jit
def _reward(a, x, key):
    # Arm 1 pays when the first feature is positive, arm 0 otherwise; plus noise.
    good = (x[:, 0] > 0).astype(jnp.int32)
    return (a == good).astype(jnp.float32) + 0.1 * jax.random.normal(key, a.shape)


def _best_rate(run_block, n_agents: int, steps: int, repeats: int = 3) -> float:
    run_block(1)  # warm-up: compiles every kernel
    best = np.inf
    for _ in range(repeats):
        t0 = time.perf_counter()
        run_block(steps)
        best = min(best, time.perf_counter() - t0)
    return n_agents * steps / best


def learned_rate(n: int, rule: str, steps: int) -> float:
    kw = {}
    if rule == "social":
        kw = {
            "neighbours": make_topology("random-regular", n, degree=4, seed=0).neighbours(),
            "beta": 5.0,
            "mutation": 0.01,
            "evolve_every": 1,
        }
    c = LearnedCohort("bench", np.arange(n), features=FEATURES, actions=2, rule=rule, **kw)
    x = jax.random.normal(jax.random.key(1), (n, 4))
    obs = {"f": x}
    key = jax.random.key(0)

    def block(k: int) -> None:
        nonlocal key
        for _ in range(k):
            key, k_act, k_env = jax.random.split(key, 3)
            a = c.act(c.agents, obs, k_act)
            c.learn(c.agents, obs, a, _reward(a, x, k_env), k_env)
        jax.block_until_ready(c.state)

    return _best_rate(block, n, steps)


def rule_rate(n: int, steps: int) -> float:
    c = RuleCohort("bench", np.arange(n), parse_mix("tft:1,gtft:1,alld:1", n, 0))
    rng = np.random.default_rng(0)
    obs = {"partner_last": jnp.asarray(rng.integers(-1, 2, n))}
    key = jax.random.key(0)

    def block(k: int) -> None:
        nonlocal key
        out = None
        for _ in range(k):
            key, sub = jax.random.split(key)
            out = c.act(c.agents, obs, sub)
        jax.block_until_ready(out)

    return _best_rate(block, n, steps)


def baseline_rate(n: int, steps: int, lr: float = 0.05) -> float:
    """The same REINFORCE step as a Python loop over agents (numpy per agent)."""
    rng = np.random.default_rng(0)
    w = np.zeros((n, 4, 2))
    b = np.zeros((n, 2))
    base = np.zeros(n)
    x = rng.standard_normal((n, 4))

    def block(k: int) -> None:
        for _ in range(k):
            for i in range(n):
                logits = x[i] @ w[i] + b[i]
                p = np.exp(logits - logits.max())
                p /= p.sum()
                a = int(rng.random() < p[1])
                r = float(a == int(x[i, 0] > 0)) + 0.1 * rng.standard_normal()
                adv = r - base[i]
                g = -p
                g[a] += 1.0  # d log softmax(a) / d logits
                w[i] += lr * adv * np.outer(x[i], g)
                b[i] += lr * adv * g
                base[i] += 0.1 * adv

    return _best_rate(block, n, steps)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="small sizes (smoke test)")
    args = ap.parse_args()
    sizes = [1_000, 10_000] if args.quick else [10_000, 100_000, 1_000_000]
    base_n = 200 if args.quick else 1_000
    print(f"jax {jax.__version__} on {jax.devices()[0].platform}")
    base = baseline_rate(base_n, steps=2)
    print(f"baseline  python loop, reinforce, n={base_n:>9,}: {base:14,.0f} agent-steps/s")
    for n in sizes:
        steps = max(2, min(20, 2_000_000 // n))
        for rule in ("reinforce", "social"):
            r = learned_rate(n, rule, steps)
            print(
                f"learned   {rule:9s} act+learn  n={n:>9,}: {r:14,.0f} agent-steps/s"
                f"   x{r / base:,.0f} vs baseline"
            )
        r = rule_rate(n, steps)
        print(
            f"rule      3-strategy mix act n={n:>9,}: {r:14,.0f} agent-steps/s"
            f"   x{r / base:,.0f} vs baseline"
        )


if __name__ == "__main__":
    main()
