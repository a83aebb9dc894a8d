"""skill-society, learned agents: agent-attempts/s of the framework against hand-written numpy.

    .venv/bin/python benchmarks/bench_skill_society.py            # 1e4, 1e5, 1e6 agents (~3 min)
    .venv/bin/python benchmarks/bench_skill_society.py --quick    # 1e4, 1e5, short blocks (< 1 min)

One moment of the scenario's learned path for a society of learned agents (1 replicate, ``sharing=neighbours``, ``allocation=
self-select``, no teams, random 4-regular graphs of the same size from ``make_topology``
(numpy: seed 1; the framework: ``graph_seed`` 0)):

- framework: ``scenarios.run("skill-society", write=False, ...)`` as a user runs it: each
  moment a ``LearnedCohort`` (features ``{"estimate": 4}``, 4 actions, rule ``reinforce``)
  chooses, the study's compiled step (``dyn.step``) and reporters run, the cohort learns
  from the step's reward, and the rows are recorded (in memory).
- numpy: the same skill model and the same learning, vectorised by hand: a per-agent linear
  softmax policy over the 4 domains on the agent's own success estimates (inverse-CDF
  draw), REINFORCE with a running-mean baseline (rate 0.1) but PLAIN SGD (lr 0.1) where the
  framework uses per-agent Adam; then the step of ``dyn.step``: the self-selected domain,
  the source playbook (the neighbour of highest measured quality in that domain, own on
  ties), success probability, practice / transfer / forgetting, the usefulness posterior
  scatter-added by author slot (``np.bincount``), distillation into the own slot,
  retirement, estimates, prices and the reuse tallies. Float32 throughout, updated in
  place; it draws only the 4 uniforms per agent it needs. (Checked when written: fed
  ``dyn.step``'s own draws and the same choices, it reproduced ``dyn.step``'s world to
  float32 rounding over 60 moments, and its act and gradient match the cohort's.)

Throughput is agents x moments / s. As in bench_scenarios.py the cost is MARGINAL: the time
of a long block of moments minus a short one, over the extra moments (each the best of a
few repeats after a warm-up that compiles), so set-up, compilation and the final sync
cancel. Both run in this process at the same sizes, their blocks alternating so that both
see the same load (the machine is shared and noisy); ratio = framework / numpy.
"""

from __future__ import annotations

import argparse
import time

import jax
import numpy as np

import scenarios
from scenarios.skill_society import dynamics as dyn
from scenarios.skill_society.config import SkillSocietyConfig
from scenarios.skill_society.tasks import DOMAINS, TRAIN_PARAMS
from society.topology import make_topology

SEED = 1
DEGREE = 4
BASELINE_RATE = 0.1  # LearnedCohort's default running-mean rate of the reward baseline


def config(n: int) -> SkillSocietyConfig:
    return SkillSocietyConfig(
        agents="learned", population=n, sharing="neighbours", graph="random-regular",
        degree=DEGREE, allocation="self-select", team="none",
    )  # fmt: skip


def edges(n: int) -> np.ndarray:
    return make_topology("random-regular", n, degree=DEGREE, seed=SEED).edges


def marginal_rates(n: int, short: int, long: int, repeats: int) -> tuple[float, float]:
    """Agent-attempts/s of (framework, numpy): agents x extra moments / (best ``long`` block -
    best ``short`` block). The blocks of both alternate, so both see the same machine load."""
    blocks = (Framework(n).block, Numpy(n).block)
    for block in blocks:
        block(short)  # warm-up: compiles every kernel of this shape
    best = np.full((2, 2), np.inf)  # (framework/numpy, short/long)
    for _ in range(repeats):
        for j, steps in enumerate((short, long)):
            for i, block in enumerate(blocks):
                best[i, j] = min(best[i, j], block(steps))
    dt = best[:, 1] - best[:, 0]
    rate = np.where(dt > 0, n * (long - short) / np.where(dt > 0, dt, 1.0), np.nan)  # nan: noise
    return float(rate[0]), float(rate[1])


# -- the framework: the study as a user runs it -----------------------------------------------------
class Framework:
    """``scenarios.run("skill-society", ...)`` of learned agents, evaluated at the start and
    the end only (``eval_every`` = the run's moments), rows kept in memory."""

    def __init__(self, n: int):
        self.params = config(n).model_dump(exclude_unset=True)

    def block(self, steps: int) -> float:
        t0 = time.perf_counter()
        scenarios.run(
            "skill-society", seed=SEED, write=False, steps=steps, eval_every=steps, **self.params
        )
        return time.perf_counter() - t0


# -- numpy: the same model and learning, hand-vectorised ------------------------------------------
class Numpy:
    def __init__(self, n: int):
        cfg, f = config(n), np.float32
        self.n, nd = n, len(DOMAINS)
        self.rng = np.random.default_rng(SEED)
        e = edges(n)
        src, dst = np.r_[e[:, 0], e[:, 1]], np.r_[e[:, 1], e[:, 0]]
        order = np.argsort(src * n + dst, kind="stable")  # neighbours in id order (ties: lowest)
        self.table = dst[order].reshape(n, DEGREE)  # regular graph: exactly DEGREE each
        self.c = dict(
            slope=f(cfg.slope), difficulty=f(cfg.difficulty), practice=f(cfg.practice_rate),
            transfer=f(cfg.transfer_rate), strength=f(cfg.artifact_strength),
            forgetting=f(cfg.forgetting), memorisation=f(cfg.memorisation),
            on_failure=f(cfg.distil_on_failure), on_success=f(cfg.distil_on_success),
            insight=f(cfg.insight), initial=f(cfg.initial_skill),
            min_uses=f(cfg.retire_min_uses), below=f(cfg.retire_below),
        )  # fmt: skip
        self.n_rules = np.array([len(TRAIN_PARAMS[d]) for d in DOMAINS], f)
        self.lr = f(cfg.learning_rate)
        self.idx = np.arange(n)
        self.eye = np.eye(nd, dtype=f)
        z = np.zeros((n, nd), f)
        self.skill, self.memo = z + self.c["initial"], z.copy()
        self.est = z + f(dyn.OPTIMISM)
        self.art_q, self.art_a, self.art_b = z.copy(), z + 1, z + 1
        self.art_rule = np.full((n, nd), -1, np.int32)
        self.art_version = np.zeros((n, nd), np.int32)
        self.attempts, self.successes = z.copy(), z.copy()
        self.price = np.ones(nd, f)
        self.reused = self.total = 0.0
        # policies: the cohort's initialisation N(0, 1 / fan_in) weights, zero biases
        self.w = (self.rng.standard_normal((n, nd, nd)) / np.sqrt(nd)).astype(f)
        self.b = np.zeros((n, nd), f)
        self.baseline = np.zeros(n, f)

    def act(self, x: np.ndarray, u: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        logits = np.einsum("ai,aij->aj", x, self.w) + self.b
        logits -= logits.max(1, keepdims=True)
        prob = np.exp(logits)
        prob /= prob.sum(1, keepdims=True)
        choice = (prob[:, :-1].cumsum(1) <= u[:, None]).sum(1)  # inverse CDF
        return choice, prob

    def learn(self, x, choice, prob, reward) -> None:
        adv = reward - self.baseline
        g = -prob  # d log softmax(a) / d logits = onehot(a) - p
        g[self.idx, choice] += 1.0
        g *= (self.lr * adv)[:, None]
        self.w += x[:, :, None] * g[:, None, :]
        self.b += g
        self.baseline += BASELINE_RATE * adv

    def step(self, d: np.ndarray, u: np.ndarray) -> np.ndarray:
        """dyn.step for self-select, no teams, neighbours sharing, every agent active."""
        c, n, idx = self.c, self.n, self.idx
        nd = self.skill.shape[1]
        art_q, art_a, art_b = self.art_q, self.art_a, self.art_b
        m = np.where(art_q > 0, art_a / (art_a + art_b), np.float32(0))  # measured quality
        own = m[idx, d]
        tab = self.table
        cand = tab[idx, m[tab, d[:, None]].argmax(1)]  # neighbour of highest measured quality
        m_cand = m[cand, d]
        src = np.where(m_cand > own, cand, idx)
        q_src = art_q[src, d]
        has = q_src > 0
        q = np.where(has, q_src, np.float32(0))
        other = has & (src != idx)
        mq = np.where(other, m_cand, np.float32(0))  # m[src, d]: src is cand when other
        s = self.skill[idx, d]
        eff = s + c["strength"] * q * (1 - s) - c["difficulty"]
        prob = 1 / (1 + np.exp(-c["slope"] * eff))
        won = u[:, 0] < prob
        succ = won.astype(np.float32)
        hot = self.eye[d]
        # practice, what another's playbook teaches, forgetting of the rest
        skill = self.skill
        gain = c["practice"] * (1 - skill) + c["transfer"] * mq[:, None] * np.maximum(
            q[:, None] - skill, 0
        )
        decay = c["forgetting"] * (skill - c["initial"])
        skill += hot * gain - (1 - hot) * decay
        np.clip(skill, 0, 1, out=skill)
        self.memo += hot * c["memorisation"] * (1 - self.memo)
        self.est += hot * dyn.EST_RATE * (succ[:, None] - self.est)
        # usefulness posterior of the playbooks used, scatter-added by author slot
        flat = (src * nd + d)[has]
        hit = succ[has]
        art_a.reshape(-1)[:] += np.bincount(flat, hit, n * nd).astype(np.float32)
        art_b.reshape(-1)[:] += np.bincount(flat, 1 - hit, n * nd).astype(np.float32)
        # distillation into the own slot: above all after failures, only if better
        write = np.where(won, u[:, 1] < c["on_success"], u[:, 1] < c["on_failure"])
        s_new = skill[idx, d]
        q_new = np.clip(s_new + c["insight"] * (1 - s_new) * (1 - succ), 0, 1)
        r = np.flatnonzero(write & (q_new > art_q[idx, d]))
        dr = d[r]
        art_q[r, dr] = q_new[r]
        art_a[r, dr] = 1
        art_b[r, dr] = 1
        self.art_rule[r, dr] = np.floor(u[r, 2] * self.n_rules[dr]).astype(np.int32)
        self.art_version[r, dr] += 1
        # retirement of playbooks that rarely help
        retire = (art_q > 0) & (art_a + art_b - 2 >= c["min_uses"])
        retire &= art_a / (art_a + art_b) <= c["below"]
        art_q[retire], art_a[retire], art_b[retire], self.art_rule[retire] = 0, 1, 1, -1
        # prices (bidding only; kept up to date as dyn.step does) and the tallies
        share = np.bincount(d, minlength=nd) / n
        self.price = np.clip(
            self.price * np.exp(dyn.PRICE_RATE * (1 - nd * share)), *dyn.PRICE_BOUNDS
        )
        self.attempts += hot
        self.successes += hot * succ[:, None]
        self.reused += float(other.sum())
        self.total += n
        return succ  # the reward under self-select

    def moment(self) -> None:
        u = self.rng.random((self.n, 4), np.float32)  # act, success, distil, rule
        x = self.est.copy()  # what the agents saw when they chose
        choice, prob = self.act(x, u[:, 0])
        reward = self.step(choice, u[:, 1:])
        self.learn(x, choice, prob, reward)

    def block(self, steps: int) -> float:
        t0 = time.perf_counter()
        for _ in range(steps):
            self.moment()
        return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="1e4 and 1e5 agents, short blocks")
    quick = ap.parse_args().quick
    # (agents, short block, long block in moments, repeats)
    cases = [(10_000, 5, 45, 3), (100_000, 3, 13, 3)] if quick else [
        (10_000, 10, 110, 4), (100_000, 5, 35, 4), (1_000_000, 2, 8, 3)
    ]  # fmt: skip
    print(
        f"skill-society learned path, agent-attempts/s (jax {jax.__version__}, {jax.devices()[0].platform})"
    )
    print(f"{'N':>9} {'framework':>11} {'numpy':>11} {'fw/numpy':>9}", flush=True)
    for n, short, long, repeats in cases:
        fw, npy = marginal_rates(n, short, long, repeats)
        print(f"{n:>9.0e} {fw:>11.3g} {npy:>11.3g} {fw / npy:>9.3f}", flush=True)


if __name__ == "__main__":
    main()
