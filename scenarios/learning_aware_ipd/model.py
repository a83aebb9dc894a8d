"""LOLA in the iterated prisoner's dilemma, with exact values (Foerster et al. 2018, sec. 4.1).

A policy is 5 logits: P(cooperate) at the first move, then after each previous joint action
(own, other's) CC, CD, DC, DD. The value of the infinitely iterated game is exact,
``V = p0 (I - gamma P)^-1 r``. A step pairs the learners at random and updates every one
at once: naive learners ascend their own value; LOLA learners ascend
``V1 + eta * stop(dV1/dth2) . dV2/dth2``, i.e. they differentiate through the other's naive step.
"""

import jax
import jax.numpy as jnp

from scenarios.learning_aware_ipd.config import LearningAwareIPDParams
from society.study import Study

REWARD = jnp.array([-1.0, -3.0, 0.0, -2.0])  # own payoff after CC, CD, DC, DD (own move first)


def visits(me, other, gamma):
    """Discounted share of time in each joint action (CC, CD, DC, DD), from my side."""
    a, b = jax.nn.sigmoid(me), jax.nn.sigmoid(other)[jnp.array([0, 1, 3, 2, 4])]  # b in my states
    joint = lambda x, y: jnp.stack([x * y, x * (1 - y), (1 - x) * y, (1 - x) * (1 - y)], -1)  # noqa: E731
    p0, trans = joint(a[0], b[0]), joint(a[1:], b[1:])
    return (1 - gamma) * jnp.linalg.solve((jnp.eye(4) - gamma * trans).T, p0)


def value(me, other, gamma):
    """Exact discounted value of the iterated game to ``me`` against ``other``."""
    return visits(me, other, gamma) @ REWARD / (1 - gamma)


def gradient(me, other, p):
    """My update direction: naive, or LOLA's first-order look-ahead on the other's naive step."""
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
    }
    agent_reporters = {  # each learner's final policy: P(cooperate) first, then after CC..DD
        f"p_cooperate_{s}": lambda w, out, i=i: jax.nn.sigmoid(w[..., i])
        for i, s in enumerate(("first", "cc", "cd", "dc", "dd"))
    }
    headline = ("reward_per_step", "mutual_cooperation")
    bounds = {"reward_per_step": (-3.0, 0.0), "mutual_cooperation": (0.0, 1.0)}

    def init(key, p):
        return p.init_scale * jax.random.normal(key, (p.learners, 5))

    def step(key, w, actions, p):
        order = jax.random.permutation(key, p.learners)
        partner = jnp.roll(order, p.learners // 2)  # order[i] meets order[i + n/2]
        other = jnp.empty_like(order).at[order].set(partner)
        grads = jax.vmap(gradient, (0, 0, None))(w, w[other], p)
        w = w + p.step_size * grads
        d = jax.vmap(visits, (0, 0, None))(w, w[other], p.gamma)
        return w, {"visits": d, "reward": d @ REWARD}
