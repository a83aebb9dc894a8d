"""The Asch paradigm with Social Impact Theory (Latane 1981) as the rule agents' model.

The majority's impact on a subject is ``I = s * N^t`` (t = 1/2 < 1: each new confederate adds
less), cut sharply when one confederate dissents (the ally). A subject yields on a critical
trial with probability ``c * (1 - exp(-(I / r)^k))``: ``r`` is its conviction, weaker when the
lines are harder to tell apart, ``k`` how sharp the threshold, and ``c`` its susceptibility,
drawn once per subject (Kumaraswamy(0.5, 0.95), a Beta-like law) so that, like Asch's
subjects, about a quarter never yield and a quarter nearly always do. Otherwise it says what
it saw (Weber noise of 4%). The constants are calibrated to Asch's curve, not fitted per run.
Asch 1955/1956's figures and the tolerances are in tests/test_conformity.py.
"""

import jax
import jax.numpy as jnp

from scenarios.conformity.config import ConformityParams
from society.study import Discrete, Study

T, K, CONVICTION, ALLY, WEBER = 0.5, 6.0, 1.54, 0.45, 0.04
# Kumaraswamy a, b of susceptibility: mean 0.35; 24% of subjects never yield in 12 trials, 24% 8+ times
SUSCEPTIBLE = (0.5, 0.95)


def judge(o, p):
    """One subject's answer (index) under Social Impact Theory."""
    impact = p.status * o["majority"] ** T * jnp.where(o["allies"] > 0, ALLY, 1.0)
    pull = o["susceptibility"] * (1 - jnp.exp(-((impact / (CONVICTION * (1 - p.difficulty))) ** K)))
    return jnp.where(o["doubt"] < pull, o["said"], o["mine"]) - 1


def susceptibility(key, n):
    """Each subject's share of critical trials open to doubt (Kumaraswamy by its inverse CDF)."""
    a, b = SUSCEPTIBLE
    return (1 - (1 - jax.random.uniform(key, (n,))) ** (1 / b)) ** (1 / a)


def trial(key, t, p):
    """Trial ``t``: a reference line, three numbered comparison lines, the majority's answer
    and each subject's private percept."""
    draws = jax.random.uniform(key, (p.population + 2, 4), minval=1e-7)  # one call compiles fast
    u, v, own = draws[-1], draws[-2], draws[:-2]  # the trial's draws, then each subject's
    ref = 2.0 + 8.0 * u[0]  # Asch's lines: 2-10 inches, the wrong ones 15-35% off
    gap = (0.15 + 0.2 * u[1:3]) * (1 - p.difficulty)
    where = v[:3].argsort()  # positions of the true, the longer and the shorter line
    lines = jnp.zeros(3).at[where].set(ref * jnp.array([1.0, 1 + gap[0], 1 - gap[1]]))
    critical = t % 3 != 0
    said = jnp.where(critical, where[1 + (v[3] < 0.5)], where[0])
    seen = lines * (1 + WEBER * jax.scipy.special.ndtri(own[:, :3]))
    mine = jnp.abs(seen - ref).argmin(1)
    return {"t": t, "ref": ref, "lines": lines, "truth": where[0], "said": said, "critical": critical,
            "mine": mine, "doubt": own[:, 3]}  # fmt: skip


class Conformity(Study):
    Params = ConformityParams
    unit = "trial"
    actions = Discrete(("1", "2", "3"), rule=judge)
    prompt = (
        "A perception experiment. The reference line is {reference:.2f} inches long. Comparison lines: "
        "line 1 is {line1:.2f} inches, line 2 is {line2:.2f} inches, line 3 is {line3:.2f} inches. "
        "The other participants answered aloud before you: {majority:.0f} of them said line {said:.0f}, "
        "and {allies:.0f} said line {ally_said:.0f}. Which comparison line is as long as the reference? "
        "Answer with its number: 1, 2 or 3."
    )
    reporters = {
        "conformity_rate": lambda w, out: (
            w["conformed"].mean() / jnp.maximum(w["critical_trials"], 1)
        ),
        "independent": lambda w, out: (w["conformed"] == 0).mean(),
        "correct": lambda w, out: out["correct"].mean(),
    }
    agent_reporters = {"conformed": lambda w, out: w["conformed"]}  # critical trials yielded
    headline = ("conformity_rate", "independent")
    bounds = {"independent": (0.0, 1.0)}

    def init(key, p):
        k_trait, k_trial = jax.random.split(key)
        return {**trial(k_trial, jnp.int32(0), p), "susceptibility": susceptibility(k_trait, p.population),
                "conformed": jnp.zeros(p.population), "critical_trials": jnp.int32(0)}  # fmt: skip

    def observe(w, p):
        full = lambda x: jnp.full(p.population, x, jnp.float32)  # noqa: E731 - the trial, as each subject sees it
        lines = {f"line{i + 1}": full(w["lines"][i]) for i in range(3)}
        return {**lines, "reference": full(w["ref"]), "said": full(w["said"] + 1), "majority": full(p.majority),
                "allies": full(p.ally), "ally_said": full(jnp.where(p.ally, w["truth"], w["said"]) + 1),
                "mine": w["mine"] + 1.0, "doubt": w["doubt"], "susceptibility": w["susceptibility"]}  # fmt: skip

    def step(key, w, act, p):
        conform = w["critical"] & (act == w["said"])
        kept = {"susceptibility": w["susceptibility"], "conformed": w["conformed"] + conform,
                "critical_trials": w["critical_trials"] + w["critical"]}  # fmt: skip
        correct = (act == w["truth"]).astype(jnp.float32)
        return {**trial(key, w["t"] + 1, p), **kept}, {"correct": correct}

    reward = "correct"  # learned subjects are rewarded for being right
