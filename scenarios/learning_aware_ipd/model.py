"""LOLA in the iterated prisoner's dilemma, with exact values (Foerster et al. 2018, sec. 4.1).

A policy is 5 logits: P(cooperate) at the first move, then after each previous joint action
(own, other's) CC, CD, DC, DD. The value of the infinitely iterated game is exact,
``V = p0 (I - gamma P)^-1 r``. A step pairs the learners at random and updates every one
at once: naive learners ascend their own value; LOLA learners ascend
``V1 + eta * stop(dV1/dth2) . dV2/dth2``, i.e. they differentiate through the other's naive step.

In-context learners (after Weis et al. 2026, "Multi-agent cooperation through in-context
co-player inference"): an episode has ``phases``; after each, both players take a naive
gradient step on their own value, each of its own in-context rate (softplus of a sixth weight,
starting at ``adapt``): the fast timescale that the paper's sequence models learn. Across
episodes a learner ascends its mean value over the episode naively (the co-player's weights
held fixed), its rate too, and its gradient flows through the co-player's in-context steps:
shaping without a LOLA term. A share ``tabular`` of the co-players met are naive learners from
random (near-pure) memory-1 policies, stepping at ``step_size`` within the episode and not
learning across episodes (the paper's tabular co-players): a diverse population. As in the
paper, from nearly none (``adapt`` 0.02) in-context learning emerges only with that diversity:
the rate grows, the learners become extortable and cooperate; trained among themselves the
rate stays near zero and they defect (started at ``adapt`` 1, it grows among learners alone).
``in_context_rate``: the learners' mean in-context rate (0 for naive and LOLA learners).
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
    """My update direction (logits and in-context rate): naive, LOLA's first-order look-ahead on
    the other's naive step, or naive on an episode of in-context learning (through the
    co-player's steps)."""
    if p.learning == "in-context":
        return jax.grad(lambda m: episode(m[:5], other, p, jax.nn.softplus(m[5]), a_other) @ REWARD / (1 - p.gamma))(me)  # fmt: skip
    if p.learning == "naive":
        return jax.grad(lambda m: value(m[:5], other, p.gamma))(me)
    theirs = lambda m: jax.grad(value)(other, m, p.gamma)  # noqa: E731 - the other's naive gradient
    shaped = lambda m: value(m[:5], other, p.gamma) + p.lookahead * jax.lax.stop_gradient(  # noqa: E731
        jax.grad(value, 1)(m[:5], other, p.gamma)) @ theirs(m[:5])  # fmt: skip
    return jax.grad(shaped)(me)


class LearningAwareIPD(Study):
    Params = LearningAwareIPDParams
    unit = "update"
    reporters = {
        "reward_per_step": lambda w, out: out["reward"].mean(),
        "mutual_cooperation": lambda w, out: out["visits"][:, 0].mean(),
        "mutual_defection": lambda w, out: out["visits"][:, 3].mean(),
        "extorted": lambda w, out: (out["extorted"] @ GAIN).mean(),
        "in_context_rate": lambda w, out: out["rate"].mean(),
    }
    agent_reporters = {  # each learner's final policy: P(cooperate) first, then after CC..DD
        f"p_cooperate_{s}": lambda w, out, i=i: jax.nn.sigmoid(w[..., i])
        for i, s in enumerate(("first", "cc", "cd", "dc", "dd"))
    }
    headline = ("reward_per_step", "mutual_cooperation", "extorted", "in_context_rate")
    bounds = {"reward_per_step": (-3.0, 0.0), "mutual_cooperation": (0.0, 1.0)}

    def init(key, p):
        # 5 logits, then the sixth weight: softplus^-1 of the initial in-context rate
        return jnp.hstack([p.init_scale * jax.random.normal(key, (p.learners, 5)), jnp.full((p.learners, 1), jnp.log(jnp.expm1(p.adapt)))])  # fmt: skip

    def step(key, w, actions, p):
        order = jax.random.permutation(key, p.learners)
        partner = jnp.roll(order, p.learners // 2)  # order[i] meets order[i + n/2]
        other = jnp.empty_like(order).at[order].set(partner)
        a = jax.nn.softplus(w[:, 5]) * (p.learning == "in-context")  # in-context rates
        u = jax.random.uniform(jax.random.fold_in(key, 1), (p.learners, 6))
        fixed = u[:, 0] < p.tabular  # naive learners from random (near-pure) policies
        met = jnp.where(fixed[:, None], 3 * jax.scipy.special.ndtri(u[:, 1:]), w[other, :5])
        w = w + p.step_size * jax.vmap(gradient, (0, 0, None, 0))(
            w, met, p, jnp.where(fixed, p.step_size, a[other])
        )
        a = jax.nn.softplus(w[:, 5]) * (p.learning == "in-context")
        play = jax.vmap(lambda m, o, am, ao: episode(m, o, p, am, ao) if p.learning == "in-context" else visits(m, o, p.gamma))  # fmt: skip
        d = play(w[:, :5], w[other, :5], a, a[other])
        return w, {
            "visits": d,
            "reward": d @ REWARD,
            "extorted": play(w[:, :5], jnp.broadcast_to(ZD, (p.learners, 5)), a, 0 * a),
            "rate": a,
        }
