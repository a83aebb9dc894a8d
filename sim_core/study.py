"""The model contract's engine: a study's pure functions stepped over replicates, compiled.

A study (``society.study.Study``) is ``init(key, p) -> world``, ``observe(world, p) -> obs``,
``step(key, world, actions, p) -> (world, outcome)`` and reporters ``f(world, outcome)``.
When every agent is numeric, :func:`chunk` runs ``k`` steps of a whole batch of replicates
in one compiled call: a ``lax.scan`` over time inside a ``vmap`` over replicates, reporters
evaluated in the scan. The random key of step ``t`` of a replicate is
``fold_in(key, t)`` split into (agents, world), so a run chunked for checkpoints, or stepped
one moment at a time with cohorts, draws exactly what one long scan draws.

Knows nothing about kinds of agent: ``decide(key, obs) -> actions`` is given.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from sim_core.rng import stream_keys

Pytree = Any
Reporter = Callable[[Pytree, Pytree], Any]


@dataclass(frozen=True)
class Discrete:
    """Agents choose one of ``choices`` each step (the action is its index).

    ``rule(obs, p)`` is the rule agents' choice from *one* agent's observation (a dict of
    scalars); the framework vectorises it over agents. ``fallback`` is what an LLM agent
    does when its call fails."""

    choices: tuple[str, ...]
    rule: Callable[[Mapping[str, Any], Any], Any] | None = None
    fallback: int = 0

    def __post_init__(self) -> None:
        object.__setattr__(self, "choices", tuple(self.choices))
        if len(self.choices) < 2:
            raise ValueError(f"Discrete needs at least 2 choices, got {self.choices}")

    def vectorised_rule(self, p: Any) -> Callable[[Pytree], jax.Array]:
        """``obs (leading agent axis) -> actions``: the rule over every agent at once."""
        if self.rule is None:
            raise ValueError("this study's actions have no rule: rule agents cannot play it")
        rule = self.rule
        one = jax.vmap(lambda o: jnp.asarray(rule(o, p)).astype(jnp.int32))
        none = jax.vmap(
            lambda o: jnp.asarray(rule(o, p)).astype(jnp.int32),
            axis_size=getattr(p, "population", 1),
        )
        return lambda obs: one(obs) if jax.tree_util.tree_leaves(obs) else none(obs)


@dataclass(frozen=True)
class Continuous:
    """Agents choose a real number in ``[low, high]`` each step (either bound a number or a
    function of the parameters, e.g. ``lambda p: p.max_price``).

    ``rule(obs, p)`` is the rule agents' number from one agent's observation, vectorised as
    :class:`Discrete`'s; learned agents' actions in (0, 1) are scaled to ``[low, high]``; an
    LLM agent's reply is a float, clipped to ``[low, high]``; ``fallback`` (default NaN) is
    what an LLM agent does when its call fails (a study may read NaN as "as before").
    ``clip=False``: an LLM agent's number reaches ``step`` as it answered (e.g. units the
    study converts and validates itself)."""

    low: float | Callable[[Any], float]
    high: float | Callable[[Any], float]
    rule: Callable[[Mapping[str, Any], Any], Any] | None = None
    fallback: float = float("nan")
    clip: bool = True

    def bounds(self, p: Any) -> tuple[float, float]:
        """``(low, high)`` for the parameters ``p``."""
        return tuple(float(b(p) if callable(b) else b) for b in (self.low, self.high))

    def vectorised_rule(self, p: Any) -> Callable[[Pytree], jax.Array]:
        """``obs (leading agent axis) -> actions`` (float32): the rule over every agent."""
        if self.rule is None:
            raise ValueError("this study's actions have no rule: rule agents cannot play it")
        rule = self.rule
        return jax.vmap(lambda o: jnp.asarray(rule(o, p)).astype(jnp.float32))


def step_keys(key: jax.Array, t: jax.Array) -> tuple[jax.Array, jax.Array]:
    """(agents' key, world's key) of step ``t`` of one replicate."""
    k_act, k_step = jax.random.split(jax.random.fold_in(key, t))
    return k_act, k_step


def report(
    reporters: Mapping[str, Reporter], world: Pytree, outcome: Pytree
) -> dict[str, jax.Array]:
    return {name: jnp.asarray(f(world, outcome), jnp.float32) for name, f in reporters.items()}


def chunk(
    step: Callable[..., tuple[Pytree, Pytree]],
    observe: Callable[[Pytree], Pytree] | None,
    decide: Callable[[jax.Array, Pytree], Any] | None,
    reporters: Mapping[str, Reporter],
    length: int,
) -> Callable[[Pytree, jax.Array, jax.Array], tuple[Pytree, dict[str, jax.Array]]]:
    """Compiled ``(worlds, keys, t0) -> (worlds, {reporter: (replicates, length)})``: steps
    ``t0 .. t0 + length - 1`` of every replicate (leading axis of ``worlds`` and ``keys``).
    ``step(key, world, actions)`` and ``observe(world)`` have the parameters bound."""
    return jax.jit(_batch(step, observe, decide, reporters, length))


def whole(
    init: Callable[[jax.Array], Pytree],
    step: Callable[..., tuple[Pytree, Pytree]],
    observe: Callable[[Pytree], Pytree] | None,
    decide: Callable[[jax.Array, Pytree], Any] | None,
    reporters: Mapping[str, Reporter],
    length: int,
) -> Callable[[Any, Any, Any], tuple[Pytree, dict[str, jax.Array]]]:
    """A whole run as one compiled call, ``(seed, stream tag, replicates) -> (worlds,
    reports)``: keys, initial worlds and every step (what a small run's time is made of)."""
    batch = _batch(step, observe, decide, reporters, length)

    def run(
        seed: jax.Array, tag: jax.Array, reps: jax.Array
    ) -> tuple[Pytree, dict[str, jax.Array]]:
        keys = stream_keys(seed, tag, reps)
        return batch(_over_replicates(init)(keys), keys, 0)

    return jax.jit(run)


def _batch(step, observe, decide, reporters, length):  # noqa: ANN001, ANN202

    def one(world: Pytree, key: jax.Array, t0: jax.Array) -> tuple[Pytree, dict[str, jax.Array]]:
        shapes: dict[str, tuple[int, ...]] = {}  # each reporter's, seen while tracing

        def body(w: Pytree, t: jax.Array) -> tuple[Pytree, jax.Array]:
            k_act, k_step = step_keys(key, t)
            actions = decide(k_act, observe(w)) if decide is not None else None
            w, out = step(k_step, w, actions)
            values = report(reporters, w, out)
            shapes.update((k, v.shape) for k, v in values.items())
            # one row of every reporter: the scan writes one array a step, not one per
            # reporter (each a kernel: a third of a commons month's at 1e4 lakes)
            return w, jnp.concatenate([jnp.ravel(v) for v in values.values()] or [jnp.zeros(0)])

        world, rows = jax.lax.scan(body, world, t0 + jnp.arange(length))
        at = np.cumsum([0, *(int(np.prod(s)) for s in shapes.values())])
        return world, {
            k: rows[:, at[i] : at[i + 1]].reshape(length, *s)
            for i, (k, s) in enumerate(shapes.items())
        }

    return _over_replicates(one, in_axes=(0, 0, None))


def _over_replicates(f: Callable[..., Any], in_axes: tuple = (0,)) -> Callable[..., Any]:
    """``vmap(f)`` over a leading replicate axis; a batch of one calls ``f`` as it is, since a
    vmapped loop turns its dynamic indexing into gathers and scatters (measured 3x slower for
    boid-flockers' loop over boids)."""
    batched = jax.vmap(f, in_axes=in_axes)

    def run(*args: Any) -> Any:
        lead = next(a for a, ax in zip(args, in_axes, strict=True) if ax == 0)
        if jax.tree_util.tree_leaves(lead)[0].shape[0] != 1:
            return batched(*args)
        first = [
            jax.tree_util.tree_map(lambda x: x[0], a) if ax == 0 else a
            for a, ax in zip(args, in_axes, strict=True)
        ]
        return jax.tree_util.tree_map(lambda x: x[None], f(*first))

    return run


def initial(init: Callable[[jax.Array], Pytree]) -> Callable[[jax.Array], Pytree]:
    """Compiled ``keys -> worlds`` (one per replicate), every leaf strongly typed: a weakly
    typed leaf (``jnp.full(n, -1)``) is strong once a step has written it, and each compiled
    call taking worlds would compile twice, for the first world and the next."""
    batched = _over_replicates(init)
    strong = lambda x: jax.lax.convert_element_type(x, x.dtype)  # noqa: E731
    return jax.jit(lambda keys: jax.tree_util.tree_map(strong, batched(keys)))


def leaves(world: Pytree) -> list[np.ndarray]:
    """A world as a list of numpy arrays (what a checkpoint saves)."""
    return [np.asarray(x) for x in jax.tree_util.tree_leaves(world)]


def from_leaves(like: Pytree, arrays: list[Any]) -> Pytree:
    """The world of ``like``'s structure (e.g. ``jax.eval_shape`` of ``init``) from :func:`leaves`."""
    treedef = jax.tree_util.tree_structure(like)
    return jax.tree_util.tree_unflatten(treedef, [jnp.asarray(a) for a in arrays])
