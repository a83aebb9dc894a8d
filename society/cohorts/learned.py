"""LearnedCohort: many small policies with stacked parameters, acting and learning vmapped.

Each agent owns a linear or small tanh-MLP policy; the parameters of all agents are stacked
along a leading agent axis and every operation (acting, a gradient step, a generation of
evolution, a round of imitation) is one jit-compiled call over the whole batch, so 1e6
agents act in one moment without a Python loop.

Policies read ``features``: observation keys (each ``(B,)`` or ``(B, width)``) concatenated
in the given order; with no features the policy is a bias alone (a bandit player).

- ``actions=k`` (int >= 2): discrete, a softmax over ``k`` logits.
- ``actions="continuous"``: an action in (0, 1) from a logistic-normal policy: the network
  outputs ``mu`` and ``log_std`` (clipped to [-5, 2]), ``z ~ N(mu, std^2)``, action
  ``sigmoid(z)``. Its log-density in ``z`` is used for policy gradients (the Jacobian of the
  sigmoid does not depend on the parameters, so it drops out of the gradient).

Learning rules (``rule``, one of them or ``reinforce`` plus one population rule):

- ``reinforce``: within a lifetime. Each agent takes its own policy-gradient step on every
  :meth:`learn`, advantage = reward - a per-agent running mean of its rewards (EMA with rate
  ``baseline_rate``), through an optax optimiser (default Adam(``learning_rate``)) whose state is
  stacked per agent too.
- ``es``: OpenAI-style evolution strategies. The cohort holds a centre policy; agent ``i``
  acts with ``centre + sigma * eps_i`` (antithetic pairs ``eps, -eps``). :meth:`evolve`
  moves the centre along ``sum_i F_i eps_i / (N sigma)`` with centred-rank fitness shaping
  ``F`` (Adam(``es_learning_rate``)) and draws fresh perturbations.
- ``ga``: truncation selection. The best ``elite_frac`` keep their policy; every other agent
  becomes a child of a random elite (with probability ``crossover`` a uniform crossover of
  two elites) plus Gaussian noise of std ``mutation``.
- ``social``: imitation over a network (``sim_core.graph.Neighbours`` over global agent
  ids): each agent picks a random neighbour ``j`` in this cohort and copies its policy with
  the Fermi probability ``1 / (1 + exp(-beta (f_j - f_i)))`` (noise of std ``mutation``
  added to copies), all agents at once from the old policies.

Population rules act across generations (or periodically within a lifetime) through
:meth:`evolve`, on the mean reward per :meth:`learn` call that each agent accumulated since
the last one (or a ``fitness`` given to :meth:`evolve`); ``evolve_every=k`` calls it
automatically every ``k`` learn calls. Copies and children inherit the whole per-agent state
(parameters, optimiser state, baseline). Hyperparameters are fixed at construction.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import lru_cache, partial
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import optax

from sim_core.graph import Neighbours, random_neighbour
from sim_core.rng import fold
from society.cohorts.base import Cohort, Pytree
from society.cohorts.rules import (
    _as_ids,
    _bucket,
    _check_new,
    _check_number,
    _clone_args,
    _keep_mask,
    _pad_rows,
    _unit,
    agent_keys,
    agent_uniform,
)

RULES = ("reinforce", "es", "ga", "social")
POPULATION_RULES = ("es", "ga", "social")
_LOG_STD = (-5.0, 2.0)
_EPS = 1e-6  # continuous actions are clipped to [eps, 1 - eps] before the logit


def _forward(layers: list[dict[str, jax.Array]], x: jax.Array) -> jax.Array:
    """One agent's policy output: tanh hidden layers, linear output."""
    for layer in layers[:-1]:
        x = jnp.tanh(x @ layer["w"] + layer["b"])
    return x @ layers[-1]["w"] + layers[-1]["b"]


def _layer_shapes(sizes: Sequence[int]) -> list[dict[str, tuple[int, ...]]]:
    return [{"w": (i, o), "b": (o,)} for i, o in zip(sizes[:-1], sizes[1:], strict=True)]


def _init_scales(sizes: Sequence[int], scale: float) -> np.ndarray:
    """Flat per-parameter std of the initial weights: N(0, scale^2 / fan_in) for weights,
    0 for biases (so a policy without features starts uniform)."""
    parts = []
    for layer in _layer_shapes(sizes):
        i, o = layer["w"]
        # The order of _flatten: layer by layer, "b" before "w" (dict keys sorted).
        parts += [np.zeros(o), np.full(i * o, scale / np.sqrt(max(i, 1)))]
    return np.concatenate(parts).astype(np.float32)


def _flatten(params: Pytree) -> tuple[jax.Array, Any]:
    """Stacked params as one ``(n, P)`` matrix and the inverse: one random draw or one select
    over all parameters instead of one per leaf (faster to run and much faster to compile)."""
    leaves, treedef = jax.tree_util.tree_flatten(params)
    n = leaves[0].shape[0]
    shapes = [x.shape[1:] for x in leaves]
    cuts = np.cumsum([int(np.prod(sh)) for sh in shapes])[:-1]
    mat = jnp.concatenate([x.reshape(n, -1) for x in leaves], axis=1)

    def unflatten(m: jax.Array) -> Pytree:
        parts = jnp.split(m, cuts, axis=1)
        return jax.tree_util.tree_unflatten(
            treedef, [p.reshape((m.shape[0],) + sh) for p, sh in zip(parts, shapes, strict=True)]
        )

    return mat, unflatten


def _centred_ranks(f: jax.Array) -> jax.Array:
    """Fitness shaping of OpenAI-ES: ranks scaled to [-0.5, 0.5] (robust to outliers)."""
    n = f.shape[0]
    ranks = jnp.zeros(n, jnp.float32).at[jnp.argsort(f)].set(jnp.arange(n, dtype=jnp.float32))
    return ranks / max(n - 1, 1) - 0.5


def _uniforms(key: jax.Array, shape: tuple[int, ...]) -> jax.Array:
    """U(0, 1) draws from one ``jax.random.bits`` call: kernels draw everything they need at
    once, since each PRNG call compiles to its own hash circuit (~1 s of XLA compile on CPU)."""
    return _unit(jax.random.bits(key, shape))


def _box_muller(u: jax.Array, m: int) -> jax.Array:
    """``m`` standard normals per row from ``2 * ceil(m / 2)`` U(0, 1) draws per row (both
    Box-Muller outputs, cos and sin, so one uniform per normal; the draws are never 0)."""
    h = (m + 1) // 2
    r = jnp.sqrt(-2.0 * jnp.log(u[:, :h]))
    t = 2.0 * jnp.pi * u[:, h : 2 * h]
    return jnp.concatenate([r * jnp.cos(t), r * jnp.sin(t)], axis=1)[:, :m]


def _n_uniforms(m: int) -> int:
    return 2 * ((m + 1) // 2)


def _rows(tree: Pytree, src: jax.Array) -> Pytree:
    return jax.tree_util.tree_map(lambda x: x[src], tree)


def _host_concat(a: Pytree, b: Pytree) -> Pytree:
    return jax.tree_util.tree_map(
        lambda x, y: jnp.asarray(np.concatenate([np.asarray(x), np.asarray(y)])), a, b
    )


@lru_cache(maxsize=64)
def _adam(rate: float) -> optax.GradientTransformation:
    # One optimiser object per learning rate: the optimiser is a static argument of the
    # kernels, so cohorts with the same one share compilations (a memo, not mutable state).
    return optax.adam(rate)


# Static description of a policy's input and output: ((feature, width), ...), continuous.
Policy = tuple[tuple[tuple[str, int], ...], bool]


def _es_population(sigma: jax.Array, centre: Pytree, key: jax.Array, n: int) -> Pytree:
    """``centre + sigma * eps`` for ``n`` agents, antithetic pairs (last one unperturbed if odd)."""
    c, unflatten = _flatten(jax.tree_util.tree_map(lambda x: x[None], centre))
    half = n // 2
    e = jax.random.normal(key, (half, c.shape[1]))
    return unflatten(c + sigma * jnp.concatenate([e, -e, jnp.zeros((n - 2 * half, c.shape[1]))]))


def _features_of(pol: Policy, obs: Mapping[str, jax.Array], b: int) -> jax.Array:
    cols = []
    for k, w in pol[0]:
        x = jnp.asarray(obs[k], jnp.float32).reshape(b, -1)
        if x.shape[1] != w:
            raise ValueError(f"feature '{k}' has width {x.shape[1]}, expected {w}")
        cols.append(x)
    return jnp.concatenate(cols, axis=1) if cols else jnp.zeros((b, 0), jnp.float32)


def _log_prob(pol: Policy, layers, x, a) -> jax.Array:
    out = _forward(layers, x)
    if not pol[1]:  # one-hot, not out[a]: the gradient of a gather is a slow scatter on CPU
        return jnp.sum(jax.nn.one_hot(a, out.shape[-1]) * jax.nn.log_softmax(out))
    mu, log_std = out[0], jnp.clip(out[1], *_LOG_STD)
    z = jax.scipy.special.logit(jnp.clip(a, _EPS, 1 - _EPS))
    return jax.scipy.stats.norm.logpdf(z, mu, jnp.exp(log_std))


# The kernels take as static arguments only what shapes the computation (policy, sizes,
# optimiser); hyperparameters are traced, so changing them never recompiles, and cohorts
# that differ only in them share compilations.
@partial(jax.jit, static_argnames=("sizes", "scale", "es", "optimizer", "es_opt"))
def _init_kernel(key, ids, sigma, *, sizes, scale, es, optimizer, es_opt):
    """Per-agent state: independent policies drawn from (key, agent id), or for ES a centre
    policy plus antithetic perturbations; stacked optimiser state for ``reinforce``."""
    n = ids.shape[0]
    std = jnp.asarray(_init_scales(sizes, scale))
    template = [{k: jnp.zeros((1,) + sh) for k, sh in d.items()} for d in _layer_shapes(sizes)]
    _, unflatten = _flatten(template)
    center = None
    if es:
        k_c, k_e = jax.random.split(key)
        drawn = unflatten(std * jax.random.normal(k_c, (1, std.size)))
        centre = jax.tree_util.tree_map(lambda x: x[0], drawn)
        params = _es_population(sigma, centre, k_e, n)
        center = {"params": centre, "opt": es_opt.init(centre)}
    else:  # each agent's draw depends on (key, agent id) only
        params = unflatten(
            std * jax.vmap(lambda k: jax.random.normal(k, std.shape))(agent_keys(key, ids))
        )
    opt = jax.vmap(optimizer.init)(params) if optimizer is not None else ()
    return {"params": params, "opt": opt, "baseline": jnp.zeros((n,), jnp.float32)}, center


@partial(jax.jit, static_argnames=("pol",))
def _act_kernel(params, obs, ids, pos, key, *, pol):
    b = ids.shape[0]
    if pos is not None:
        params = jax.tree_util.tree_map(lambda x: x.at[pos].get(mode="clip"), params)
    out = jax.vmap(_forward)(params, _features_of(pol, obs, b))
    keys = agent_keys(key, ids)
    u = agent_uniform(keys, 0)
    if not pol[1]:  # inverse CDF: one uniform per agent
        cdf = jnp.cumsum(jax.nn.softmax(out, axis=-1), axis=-1)[:, :-1]
        return (cdf <= u[:, None]).sum(axis=-1).astype(jnp.int32)
    normal = _box_muller(jnp.stack([u, agent_uniform(keys, 1)], axis=1), 1)[:, 0]
    mu, log_std = out[:, 0], jnp.clip(out[:, 1], *_LOG_STD)
    return jax.nn.sigmoid(mu + jnp.exp(log_std) * normal)


@partial(jax.jit, static_argnames=("pol", "optimizer"))
def _learn_kernel(state, fit, obs, pos, actions, rewards, baseline_rate, *, pol, optimizer):
    """Fitness accumulation, and a REINFORCE step per agent when ``optimizer`` is given.
    Padded rows have ``pos`` past the end: gathers clip, scatters drop them."""
    b = rewards.shape[0]
    get = (lambda x: x) if pos is None else (lambda x: x.at[pos].get(mode="clip"))
    put = (lambda x, v: v) if pos is None else (lambda x, v: x.at[pos].set(v, mode="drop"))
    add = (lambda x, v: x + v) if pos is None else (lambda x, v: x.at[pos].add(v, mode="drop"))
    rewards = rewards.astype(jnp.float32)
    fit = {"sum": add(fit["sum"], rewards), "n": add(fit["n"], jnp.ones_like(rewards))}
    if optimizer is None:
        return state, fit
    rows = jax.tree_util.tree_map(get, state)
    x = _features_of(pol, obs, b)
    adv = rewards - rows["baseline"]

    def loss(p, xi, ai, advi):
        return -advi * _log_prob(pol, p, xi, ai)

    grads = jax.vmap(jax.grad(loss))(rows["params"], x, actions, adv)
    updates, opt = jax.vmap(optimizer.update)(grads, rows["opt"], rows["params"])
    new = {
        "params": optax.apply_updates(rows["params"], updates),
        "opt": opt,
        "baseline": rows["baseline"] + baseline_rate * adv,
    }
    return jax.tree_util.tree_map(put, state, new), fit


@partial(jax.jit, static_argnames=("es_opt",))
def _es_kernel(state, center, fitness, key, sigma, *, es_opt):
    n = fitness.shape[0]
    shaped = _centred_ranks(fitness)
    # eps_i = (params_i - centre) / sigma; gradient estimate sum_i F_i eps_i / (n sigma).
    p, _ = _flatten(state["params"])
    c, unflatten = _flatten(jax.tree_util.tree_map(lambda x: x[None], center["params"]))
    grad = jax.tree_util.tree_map(
        lambda x: x[0], unflatten(-(shaped @ (p - c))[None] / (n * sigma**2))
    )
    updates, opt = es_opt.update(grad, center["opt"], center["params"])
    centre = optax.apply_updates(center["params"], updates)
    params = _es_population(sigma, centre, key, n)
    return {**state, "params": params}, {"params": centre, "opt": opt}


@partial(jax.jit, static_argnames=("n_elite",))
def _ga_kernel(state, fitness, key, mutation, crossover, *, n_elite):
    n = fitness.shape[0]
    elite = jnp.argsort(-fitness, stable=True)[:n_elite]
    x, unflatten = _flatten(state["params"])
    m = x.shape[1]
    u = _uniforms(key, (n, 3 + m + _n_uniforms(m)))  # parents a and b, crossover, genes, noise
    pa = elite[jnp.minimum((u[:, 0] * n_elite).astype(jnp.int32), n_elite - 1)]
    pb = elite[jnp.minimum((u[:, 1] * n_elite).astype(jnp.int32), n_elite - 1)]
    is_elite = jnp.zeros((n,), bool).at[elite].set(True)
    new = _rows(state, jnp.where(is_elite, jnp.arange(n), pa))
    take_b = (u[:, 2:3] < crossover) & (u[:, 3 : 3 + m] < 0.5)
    noise = _box_muller(u[:, 3 + m :], m)
    child = jnp.where(take_b, x[pb], x[pa]) + mutation * noise
    return {**new, "params": unflatten(jnp.where(is_elite[:, None], x, child))}


@jax.jit
def _social_kernel(state, fitness, key, ids, g2l, nb, beta, mutation):
    n = fitness.shape[0]
    m = sum(x[0].size for x in jax.tree_util.tree_leaves(state["params"]))
    k_nb, k_u = jax.random.split(key)
    j_glob = random_neighbour(nb, k_nb, ids)
    j = g2l[j_glob]
    me = jnp.arange(n)
    member = (j >= 0) & (j_glob != ids)
    j = jnp.where(member, j, me)
    p = jax.nn.sigmoid(beta * (fitness[j] - fitness))
    u = _uniforms(k_u, (n, 1 + _n_uniforms(m)))  # copy?, noise
    copy = member & (u[:, 0] < p)
    new = _rows(state, jnp.where(copy, j, me))
    # Exploration noise on copies only (x + 0 exactly when mutation = 0).
    x, unflatten = _flatten(new["params"])
    noise = _box_muller(u[:, 1:], m)
    new["params"] = unflatten(x + copy[:, None] * mutation * noise)
    return new


class LearnedCohort(Cohort):
    """Agents with their own small policies, stacked and vmapped (see the module docstring)."""

    def __init__(
        self,
        name: str,
        agents: np.ndarray | list[int],
        *,
        features: Sequence[str] | Mapping[str, int] = (),
        actions: int | str = 2,
        hidden: Sequence[int] = (),
        rule: str | Sequence[str] = "reinforce",
        learning_rate: float = 0.05,
        optimizer: optax.GradientTransformation | None = None,
        baseline_rate: float = 0.1,
        sigma: float = 0.1,
        es_learning_rate: float = 0.05,
        elite_frac: float = 0.2,
        mutation: float = 0.02,
        crossover: float = 0.0,
        beta: float = 1.0,
        neighbours: Neighbours | None = None,
        evolve_every: int | None = None,
        init_scale: float = 1.0,
        key: jax.Array | int = 0,
    ):
        super().__init__(name, agents)
        self.features = self._check_features(features)
        if actions == "continuous":
            self.continuous, out = True, 2
        elif (
            isinstance(actions, int | np.integer) and not isinstance(actions, bool) and actions >= 2
        ):
            self.continuous, out = False, int(actions)
        else:
            raise ValueError(
                f"actions must be an int >= 2 (discrete) or 'continuous', got {actions!r}"
            )
        self.actions = "continuous" if self.continuous else out
        hidden = tuple(hidden)
        if any(isinstance(h, bool) or not isinstance(h, int | np.integer) or h < 1 for h in hidden):
            raise ValueError(f"hidden must be a sequence of positive layer widths, got {hidden!r}")
        self.hidden = tuple(int(h) for h in hidden)
        self.rules = self._check_rules(rule)
        self.population_rule = next((r for r in self.rules if r in POPULATION_RULES), None)
        self.learning_rate = _check_number("learning_rate", learning_rate, 0.0)
        self.baseline_rate = _check_number("baseline_rate", baseline_rate, 0.0, 1.0)
        self.sigma = _check_number("sigma", sigma, 0.0)
        if self.population_rule == "es" and self.sigma <= 0:
            raise ValueError(f"sigma must be > 0 for rule 'es', got {sigma}")
        self.es_learning_rate = _check_number("es_learning_rate", es_learning_rate, 0.0)
        self.elite_frac = _check_number("elite_frac", elite_frac, 0.0, 1.0)
        if self.elite_frac == 0:
            raise ValueError("elite_frac must be in (0, 1], got 0")
        self.mutation = _check_number("mutation", mutation, 0.0)
        self.crossover = _check_number("crossover", crossover, 0.0, 1.0)
        self.beta = _check_number("beta", beta, 0.0)
        if evolve_every is not None and (
            isinstance(evolve_every, bool)
            or not isinstance(evolve_every, int | np.integer)
            or evolve_every < 1
        ):
            raise ValueError(
                f"evolve_every must be a positive integer or None, got {evolve_every!r}"
            )
        if evolve_every is not None and self.population_rule is None:
            raise ValueError(
                "evolve_every needs a population rule in rule ('es', 'ga' or 'social')"
            )
        self.evolve_every = None if evolve_every is None else int(evolve_every)
        if neighbours is not None and not isinstance(neighbours, Neighbours):
            raise TypeError(
                f"neighbours must be a sim_core.graph.Neighbours, got {type(neighbours).__name__}"
            )
        self.neighbours = neighbours
        self.init_scale = _check_number("init_scale", init_scale, 0.0)
        if optimizer is not None and not isinstance(optimizer, optax.GradientTransformation):
            raise TypeError(
                f"optimizer must be an optax.GradientTransformation, got {type(optimizer).__name__}"
            )
        self.optimizer = optimizer if optimizer is not None else _adam(self.learning_rate)
        self._pol: Policy = (tuple(self.features.items()), self.continuous)
        self._es_opt = _adam(self.es_learning_rate)
        self._learner = self.optimizer if "reinforce" in self.rules else None
        self.learn_calls = 0

        self._sizes = (sum(self.features.values()), *self.hidden, out)
        key = jax.random.key(key) if isinstance(key, int | np.integer) else key
        es = self.population_rule == "es"
        # XLA compiles a one-row draw differently (the unit axis is dropped) and rounds the
        # last bit otherwise; two rows keep an agent's policy a function of (key, id) only.
        single = len(self) == 1 and not es
        ids = jnp.asarray(np.repeat(self.agents, 2) if single else self.agents, jnp.int32)
        self.state, self.center = _init_kernel(
            key,
            ids,
            np.float32(self.sigma),
            sizes=self._sizes,
            scale=self.init_scale,
            es=es,
            optimizer=self._learner,
            es_opt=self._es_opt,
        )
        if single:
            self.state = jax.tree_util.tree_map(lambda x: x[:1], self.state)
        self.fit = self._zero_fit(len(self))

    # -- configuration ----------------------------------------------------------------------
    @staticmethod
    def _check_features(features: Sequence[str] | Mapping[str, int]) -> dict[str, int]:
        if isinstance(features, str):
            raise TypeError(
                f"features must be a list of observation names, got the string {features!r}"
            )
        items = features.items() if isinstance(features, Mapping) else ((f, 1) for f in features)
        out: dict[str, int] = {}
        for k, w in items:
            if (
                not isinstance(k, str)
                or isinstance(w, bool)
                or not isinstance(w, int | np.integer)
                or w < 1
            ):
                raise ValueError(
                    f"features must map observation names to widths >= 1, got {k!r}: {w!r}"
                )
            out[k] = int(w)
        return out

    @staticmethod
    def _check_rules(rule: str | Sequence[str]) -> tuple[str, ...]:
        rules = (rule,) if isinstance(rule, str) else tuple(rule)
        bad = [r for r in rules if r not in RULES]
        if bad or not rules or len(set(rules)) != len(rules):
            raise ValueError(
                f"rule must be one of {list(RULES)} or 'reinforce' plus one population rule, got {rule!r}"
            )
        pop = [r for r in rules if r in POPULATION_RULES]
        if len(pop) > 1:
            raise ValueError(
                f"rule may hold at most one population rule of {list(POPULATION_RULES)}, got {pop}"
            )
        if pop == ["es"] and "reinforce" in rules:
            raise ValueError(
                "rule 'es' cannot be combined with 'reinforce' (ES needs the agents' policies to stay at centre + sigma * eps)"
            )
        return rules

    @staticmethod
    def _zero_fit(n: int) -> dict[str, jax.Array]:
        return {"sum": np.zeros((n,), np.float32), "n": np.zeros((n,), np.float32)}

    # -- deciding and learning --------------------------------------------------------------
    def _batch(
        self, agents: Any, tree: Pytree
    ) -> tuple[np.ndarray, Pytree, np.ndarray | None, int]:
        """Member check, padding to a bucket size (positions past the end are dropped)."""
        agents = _as_ids(agents)
        n = agents.size
        if n == len(self) and np.array_equal(agents, self.agents):
            return agents, _pad_rows(tree, n, n), None, n
        pos = self.local(agents)
        size = _bucket(n)
        tree = _pad_rows(tree, n, size)
        pos = np.concatenate([pos, np.full(size - n, len(self))]).astype(np.int32)
        ids = np.concatenate([agents, np.full(size - n, agents[0])])
        return ids, tree, pos, n

    def _obs(self, obs: Pytree) -> dict[str, Any]:
        obs = obs or {}
        missing = [k for k in self.features if k not in obs]
        if missing:
            raise ValueError(
                f"cohort '{self.name}': observations lack features {missing}; got {sorted(obs)}"
            )
        return {k: obs[k] for k in self.features}

    def act(self, agents: np.ndarray, obs: Pytree, key: jax.Array) -> jax.Array:
        """Actions of ``agents``: int32 in [0, k) (discrete) or float32 in (0, 1) (continuous)."""
        agents = _as_ids(agents)
        if agents.size == 0:
            return jnp.zeros((0,), jnp.float32 if self.continuous else jnp.int32)
        ids, obs, pos, n = self._batch(agents, self._obs(obs))
        out = _act_kernel(self.state["params"], obs, ids.astype(np.int32), pos, key, pol=self._pol)
        return out if out.shape[0] == n else out[:n]

    def learn(
        self, agents: np.ndarray, obs: Pytree, actions: Pytree, rewards: jax.Array, key: jax.Array
    ) -> None:
        """A policy-gradient step (``reinforce``) and fitness accumulation for ``agents``."""
        agents = _as_ids(agents)
        if agents.size:
            # on the host: padding to a bucket is numpy there, not eager jax dispatches
            rewards = np.asarray(rewards, np.float32).reshape(-1)
            actions = np.asarray(actions)
            if rewards.shape[0] != agents.size or actions.shape[:1] != (agents.size,):
                raise ValueError(
                    f"actions and rewards must have one row per agent ({agents.size}), "
                    f"got {actions.shape} and {rewards.shape}"
                )
            _, (obs, actions, rewards), pos, _ = self._batch(
                agents, (self._obs(obs), actions, rewards)
            )
            if pos is not None and np.unique(pos[: agents.size]).size != agents.size:
                raise ValueError("agents passed to learn() must be unique")
            self.state, self.fit = _learn_kernel(
                self.state,
                self.fit,
                obs,
                pos,
                actions,
                rewards,
                np.float32(self.baseline_rate),
                pol=self._pol,
                optimizer=self._learner,
            )
        self.learn_calls += 1
        if self.evolve_every is not None and self.learn_calls % self.evolve_every == 0:
            self.evolve(fold(key, 0x65766F))

    def fitness(self) -> np.ndarray:
        """Mean reward per learn call since the last :meth:`evolve` (0 for agents never due)."""
        return np.asarray(self.fit["sum"]) / np.maximum(np.asarray(self.fit["n"]), 1.0)

    def evolve(
        self,
        key: jax.Array,
        fitness: np.ndarray | jax.Array | None = None,
        neighbours: Neighbours | None = None,
    ) -> None:
        """One step of the population rule, on ``fitness`` (aligned with ``self.agents``) or on
        the accumulated mean rewards; then the accumulators restart."""
        if self.population_rule is None:
            raise ValueError(
                f"cohort '{self.name}' has no population rule; rule was {list(self.rules)}"
            )
        n = len(self)
        f = np.asarray(self.fitness() if fitness is None else fitness, np.float32)
        if f.shape != (n,):
            raise ValueError(f"fitness must have shape ({n},) (one value per agent), got {f.shape}")
        if not np.isfinite(f).all():
            raise ValueError("fitness must be finite")
        if n:
            if self.population_rule == "es":
                self.state, self.center = _es_kernel(
                    self.state, self.center, f, key, np.float32(self.sigma), es_opt=self._es_opt
                )
            elif self.population_rule == "ga":
                n_elite = max(1, int(round(self.elite_frac * n)))
                self.state = _ga_kernel(
                    self.state,
                    f,
                    key,
                    np.float32(self.mutation),
                    np.float32(self.crossover),
                    n_elite=n_elite,
                )
            else:
                nb = self.neighbours if neighbours is None else neighbours
                if not isinstance(nb, Neighbours):
                    raise ValueError(
                        "rule 'social' needs neighbours= (a sim_core.graph.Neighbours over agent ids)"
                    )
                if int(self.agents.max()) >= nb.n:
                    raise ValueError(
                        f"neighbours cover {nb.n} nodes but the cohort has agent id {int(self.agents.max())}"
                    )
                g2l = np.full(nb.n, -1, np.int32)
                g2l[self.agents] = np.arange(n, dtype=np.int32)
                ids = jnp.asarray(self.agents, jnp.int32)
                self.state = _social_kernel(
                    self.state,
                    f,
                    key,
                    ids,
                    g2l,
                    nb,
                    np.float32(self.beta),
                    np.float32(self.mutation),
                )
        self.fit = self._zero_fit(n)

    # -- lifecycle --------------------------------------------------------------------------
    def merge(self, first, second, new_agents, key: jax.Array | None = None) -> None:
        """Add ``new_agents`` whose policy parameters are the mean of two parents' (the rest
        of the per-agent state comes from the first parent)."""
        self.clone(first, new_agents, key=key)
        a, b = self.local(_as_ids(first)), self.local(_as_ids(second))
        dst = self.local(_as_ids(new_agents))

        def mean(x):
            x = np.array(x)
            x[dst] = (x[a] + x[b]) / 2
            return x

        self.state = {**self.state, "params": jax.tree_util.tree_map(mean, self.state["params"])}

    def clone(
        self,
        src_agents: np.ndarray | list[int],
        new_agents: np.ndarray | list[int],
        key: jax.Array | None = None,
        mutation: float = 0.0,
    ) -> None:
        """Add ``new_agents`` inheriting the policies, optimiser state and baseline of
        ``src_agents``; ``mutation`` adds Gaussian noise of that std to their parameters."""
        src, new, mutation = _clone_args(self, src_agents, new_agents, key, mutation)
        # Host-side numpy: lifecycle events change the population size, and eager jnp ops
        # would compile a kernel per leaf for every new size.
        rows = jax.tree_util.tree_map(lambda x: np.asarray(x)[src], self.state)
        if mutation > 0:
            leaves, treedef = jax.tree_util.tree_flatten(rows["params"])
            sizes = [x[0].size for x in leaves]
            noise = mutation * np.asarray(jax.random.normal(key, (src.size, sum(sizes))))
            parts = np.split(noise, np.cumsum(sizes)[:-1], axis=1)
            leaves = [x + e.reshape(x.shape) for x, e in zip(leaves, parts, strict=True)]
            rows["params"] = jax.tree_util.tree_unflatten(treedef, leaves)
        self.state = _host_concat(self.state, rows)
        self.fit = _host_concat(self.fit, self._zero_fit(new.size))
        self.agents = np.concatenate([self.agents, new])

    def spawn(self, new_agents: np.ndarray | list[int], key: jax.Array) -> None:
        """Add fresh ``new_agents``: new policies drawn as at construction (from ``key`` and
        each agent's id; for ES, ``centre + sigma * eps``), fresh optimiser state."""
        new = _check_new(self, new_agents)
        if key is None:
            raise ValueError("spawn needs a key to draw the new agents' policies")
        m = new.size
        if m == 0:
            return
        size = _bucket(m)  # padded: spawning at many sizes shares a few compilations
        ids = jnp.asarray(np.concatenate([new, np.full(size - m, new[0])]), jnp.int32)
        fresh, _ = _init_kernel(
            key,
            ids,
            np.float32(self.sigma),
            sizes=self._sizes,
            scale=self.init_scale,
            es=False,
            optimizer=self._learner,
            es_opt=self._es_opt,
        )
        fresh = jax.tree_util.tree_map(lambda x: np.asarray(x)[:m], fresh)
        if self.population_rule == "es":
            params = _es_population(np.float32(self.sigma), self.center["params"], key, size)
            fresh["params"] = jax.tree_util.tree_map(lambda x: np.asarray(x)[:m], params)
        self.state = _host_concat(self.state, fresh)
        self.fit = _host_concat(self.fit, self._zero_fit(m))
        self.agents = np.concatenate([self.agents, new])

    def remove(self, agents: np.ndarray | list[int]) -> None:
        """Drop ``agents`` and their state."""
        keep = np.flatnonzero(_keep_mask(self, agents))
        self.state = jax.tree_util.tree_map(lambda x: jnp.asarray(np.asarray(x)[keep]), self.state)
        self.fit = jax.tree_util.tree_map(lambda x: np.asarray(x)[keep], self.fit)
        self.agents = self.agents[keep]

    # -- state ------------------------------------------------------------------------------
    def _tree(self) -> dict[str, Any]:
        return {"state": self.state, "fit": self.fit, "center": self.center}

    def config(self) -> dict[str, Any]:
        """The architecture and rules (JSON-able); a state loads only into a matching cohort."""
        return {
            "features": dict(self.features),
            "actions": self.actions,
            "hidden": list(self.hidden),
            "rule": list(self.rules),
        }

    def state_dict(self) -> dict[str, Any]:
        """Flat dict: ``name``, ``agents``, ``config``, ``learn_calls`` and one numpy array per
        leaf of the per-agent state, keyed by its pytree path (``"state['params'][0]['w']"``)."""
        leaves = jax.tree_util.tree_flatten_with_path(self._tree())[0]
        out = {**super().state_dict(), "config": self.config(), "learn_calls": self.learn_calls}
        out.update({jax.tree_util.keystr(p): np.array(x) for p, x in leaves})
        return out

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore from :meth:`state_dict` into a cohort built with the same config."""
        if state.get("config") != self.config():
            raise ValueError(
                f"state was saved with config {state.get('config')}, this cohort has {self.config()}"
            )
        n = int(np.asarray(state["agents"]).size)
        leaves, treedef = jax.tree_util.tree_flatten_with_path(self._tree())
        arrays = []
        for path, x in leaves:
            k = jax.tree_util.keystr(path)
            if k not in state:
                raise ValueError(f"state lacks '{k}'")
            a = np.asarray(state[k])
            per_agent = not k.startswith("['center']")
            want = ((n,) + x.shape[1:]) if per_agent else x.shape
            if a.shape != want:
                raise ValueError(f"state '{k}' has shape {a.shape}, expected {want}")
            arrays.append(jnp.asarray(a, x.dtype))
        tree = jax.tree_util.tree_unflatten(treedef, arrays)
        super().load_state_dict(state)
        self.state, self.fit, self.center = tree["state"], tree["fit"], tree["center"]
        self.learn_calls = int(state["learn_calls"])
