"""LOLA in the iterated prisoner's dilemma, with exact values (Foerster et al. 2018, sec. 4.1).

A policy is 5 logits: P(cooperate) at the first move, then after each previous joint action
(own, other's) CC, CD, DC, DD. The value of the infinitely iterated game is exact,
``V = p0 (I - gamma P)^-1 r``. A step pairs the learners at random and updates every one
at once: naive learners ascend their own value; LOLA learners ascend
``V1 + eta * stop(dV1/dth2) . dV2/dth2``, i.e. they differentiate through the other's naive step.

In-context learners (after Weis et al. 2026, "Multi-agent cooperation through in-context
co-player inference"): an episode has ``phases``; after each, both players take a naive
gradient step of ``adapt`` on their own value (the fast, in-context timescale that their
sequence models learn; here it is given, not learned). Across episodes a learner ascends its
mean value over the episode naively (the co-player's weights held fixed), so its gradient
flows through the co-player's in-context steps: shaping without a LOLA term. A share
``tabular`` of the co-players met are fixed random memory-1 policies (a diverse population).
In the paper that diversity is what teaches sequence models to adapt in context (without it
they defect); here adaptation is given, so cooperation does not need it (it makes learners
less extortable).
``extorted``: what a Press-Dyson extortioner (chi = 3 for these payoffs) gains per step over a
learner in an episode against it (0: not extortable).
"""

import jax
import jax.numpy as jnp

from scenarios.learning_aware_ipd.config import LearningAwareIPDParams
from society.study import Study

REWARD = jnp.array([-1.0, -3.0, 0.0, -2.0])  # own payoff after CC, CD, DC, DD (own move first)
ZD = jnp.log(jnp.array([3, 3, 1 / 7, 5 / 3, 1e-3]))  # odds of cooperating: extortion, phi = 1/8
GAIN = REWARD[jnp.array([0, 2, 1, 3])] - REWARD  # the co-player's payoff over mine, by state


def visits(me, other, gamma):
    """Discounted share of time in each joint action (CC, CD, DC, DD), from my side."""
    a, b = jax.nn.sigmoid(me), jax.nn.sigmoid(other)[jnp.array([0, 1, 3, 2, 4])]  # b in my states
    joint = lambda x, y: jnp.stack([x * y, x * (1 - y), (1 - x) * y, (1 - x) * (1 - y)], -1)  # noqa: E731
    p0, trans = joint(a[0], b[0]), joint(a[1:], b[1:])
    return (1 - gamma) * jnp.linalg.solve((jnp.eye(4) - gamma * trans).T, p0)


def value(me, other, gamma):
    """Exact discounted value of the iterated game to ``me`` against ``other``."""
    return visits(me, other, gamma) @ REWARD / (1 - gamma)


# fmt: off
def episode(me, other, p, a_me, a_other):
    """Mean visits over an episode in which each adapts its policy after every phase."""
    def phase(c, _):
        (m, o), g = c, lambda x, y: jax.grad(value)(x, y, p.gamma)
        return (m + a_me * g(m, o), o + a_other * g(o, m)), visits(m, o, p.gamma)
    return jax.lax.scan(phase, (me, other), None, p.phases)[1].mean(0)
# fmt: on


def gradient(me, other, p, a_other):
    """My update direction: naive, LOLA's first-order look-ahead on the other's naive step, or
    naive on an episode of in-context learning (through the co-player's steps)."""
    if p.learning == "in-context":
        return jax.grad(lambda m: episode(m, other, p, p.adapt, a_other) @ REWARD / (1 - p.gamma))(me)  # fmt: skip
    if p.learning == "naive":
        return jax.grad(value)(me, other, p.gamma)
    theirs = lambda m: jax.grad(value)(other, m, p.gamma)  # noqa: E731 - the other's naive gradient
    shaped = lambda m: value(m, other, p.gamma) + p.lookahead * jax.lax.stop_gradient(  # noqa: E731
        jax.grad(value, 1)(m, other, p.gamma)) @ theirs(m)  # fmt: skip
    return jax.grad(shaped)(me)


class LearningAwareIPD(Study):
    Params = LearningAwareIPDParams
    unit = "update"
    reporters = {
        "reward_per_step": lambda w, out: out["reward"].mean(),
        "mutual_cooperation": lambda w, out: out["visits"][:, 0].mean(),
        "mutual_defection": lambda w, out: out["visits"][:, 3].mean(),
        "extorted": lambda w, out: (out["extorted"] @ GAIN).mean(),
    }
    agent_reporters = {  # each learner's final policy: P(cooperate) first, then after CC..DD
        f"p_cooperate_{s}": lambda w, out, i=i: jax.nn.sigmoid(w[..., i])
        for i, s in enumerate(("first", "cc", "cd", "dc", "dd"))
    }
    headline = ("reward_per_step", "mutual_cooperation", "extorted")
    bounds = {"reward_per_step": (-3.0, 0.0), "mutual_cooperation": (0.0, 1.0)}

    def init(key, p):
        return p.init_scale * jax.random.normal(key, (p.learners, 5))

    def step(key, w, actions, p):
        order = jax.random.permutation(key, p.learners)
        partner = jnp.roll(order, p.learners // 2)  # order[i] meets order[i + n/2]
        other = jnp.empty_like(order).at[order].set(partner)
        a = p.adapt if p.learning == "in-context" else 0.0
        u = jax.random.uniform(jax.random.fold_in(key, 1), (p.learners, 6))
        fixed = u[:, 0] < p.tabular  # co-players that are fixed random (near-pure) policies
        met = jnp.where(fixed[:, None], 3 * jax.scipy.special.ndtri(u[:, 1:]), w[other])
        w = w + p.step_size * jax.vmap(gradient, (0, 0, None, 0))(
            w, met, p, jnp.where(fixed, 0.0, a)
        )
        play = lambda m, o, b: episode(m, o, p, a, b) if a else visits(m, o, p.gamma)  # noqa: E731
        d = jax.vmap(play, (0, 0, None))(w, w[other], a)
        return w, {
            "visits": d,
            "reward": d @ REWARD,
            "extorted": jax.vmap(play, (0, None, None))(w, ZD, 0.0),
        }
