"""Named random streams derived from one root seed.

A stream is a pure function of ``(seed, name, replicate)``: not of the order in which
streams are asked for, nor of how replicates are batched. So adding a new stream, running
replicates one at a time or vmapped together, or changing LLM concurrency never changes the
draws of another stream.
"""

from __future__ import annotations

import math
import zlib
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

# One compiled function for every call (a fresh vmap of a lambda would be traced each time:
# milliseconds per run, which add up over many small runs of a sweep).
_fold_many = jax.jit(jax.vmap(jax.random.fold_in, in_axes=(None, 0)))
# ``jax.random.fold_in`` for a key on the host, one compiled call: eager, it is a dozen
# dispatches (0.3 ms), and a run of learned agents folds a few keys every step. ``data`` is
# an int below 2**31 (a compiled call takes it as int32).
fold = jax.jit(jax.random.fold_in)


def stream_keys(seed: jax.Array, tag: jax.Array, replicates: jax.Array) -> jax.Array:
    """Keys of one stream for many replicates, traceable (inside a compiled run):
    ``RNG(seed).keys(name, replicates)`` with ``tag = tag(name)``."""
    return jax.vmap(jax.random.fold_in, in_axes=(None, 0))(
        jax.random.fold_in(jax.random.key(seed), tag), replicates
    )


def tag(name: str) -> int:
    """A stream's name as the number its keys are folded with."""
    return _tag(name)


def _tag(name: str) -> int:
    # crc32 is stable across processes (Python's hash() is salted per process).
    return zlib.crc32(name.encode("utf-8"))


class RNG:
    """Root of a run's randomness: ``RNG(seed).key("dynamics", replicate=3)``."""

    def __init__(self, seed: int):
        if not isinstance(seed, int | np.integer) or seed < 0:
            raise ValueError(f"seed must be a non-negative integer, got {seed!r}")
        self.seed = int(seed)

    def key(self, name: str, replicate: int = 0) -> jax.Array:
        """A jax PRNG key for stream ``name`` of one replicate."""
        root = jax.random.key(self.seed)
        return jax.random.fold_in(jax.random.fold_in(root, _tag(name)), replicate)

    def keys(self, name: str, replicates: int | np.ndarray) -> jax.Array:
        """Keys of stream ``name`` for many replicates (a stacked key array, for vmap)."""
        reps = np.arange(replicates) if np.ndim(replicates) == 0 else np.asarray(replicates)
        base = jax.random.fold_in(jax.random.key(self.seed), _tag(name))
        return _fold_many(base, reps)

    def numpy(self, name: str, replicate: int = 0) -> np.random.Generator:
        """A numpy Generator for host-side draws (graph generation, sampling)."""
        return np.random.default_rng([self.seed, _tag(name), replicate])

    def to_dict(self) -> dict:
        return {"seed": self.seed}


# -- a random order of many agents, without a sort ----------------------------------------------
# XLA's CPU sorts cost about 10x numpy's (a uint32 sort of 1e5 keys: ~5 ms), so a shuffle of
# every step would dominate a fused run of simple rules. A keyed pseudo-random permutation
# costs a few elementwise passes instead, on any device, and vmaps.
SHUFFLE_ROUNDS = 8  # Feistel rounds: 6 left who-follows-whom visibly uneven (tests/test_rng.py)
SHUFFLE_SORTS_BELOW = 256  # agents: a Feistel on a grid this small is uneven; a sort is cheap


def _fmix(h: jax.Array) -> jax.Array:
    """murmur3's finaliser: a bijection of uint32 in which every input bit flips every output
    bit with probability ~1/2."""
    h = (h ^ (h >> 16)) * jnp.uint32(0x85EBCA6B)
    h = (h ^ (h >> 13)) * jnp.uint32(0xC2B2AE35)
    return h ^ (h >> 16)


def _feistel(keys: jax.Array, a: int) -> Any:
    """A keyed permutation of the ``a x a`` grid ``(L, R)``: rounds ``(L, R) -> (R, L + F(R)
    mod a)``, ``F`` murmur3-mixed ``R ^ key`` scaled to ``[0, a)`` (Black & Rogaway's Feistel
    on a non-binary domain)."""
    scale = jnp.float32(a / 2**24)

    def f(k: jax.Array, r: jax.Array) -> jax.Array:
        u = (_fmix(r.astype(jnp.uint32) ^ k) >> 8).astype(jnp.float32)
        return jnp.minimum((u * scale).astype(jnp.int32), a - 1)

    def run(lr: tuple[jax.Array, jax.Array]) -> tuple[jax.Array, jax.Array]:
        # A loop, not unrolled: its carry is written out each round, where XLA would
        # otherwise fuse all rounds into every reader of the result, computing them again in
        # each (2-3x the time of a shuffle and its group table, measured).
        def round_(i: jax.Array, lr: tuple[jax.Array, jax.Array]) -> tuple[jax.Array, jax.Array]:
            left, right = lr
            s = left + f(keys[i], right)
            return right, jnp.where(s >= a, s - a, s)

        return jax.lax.fori_loop(0, keys.shape[0], round_, lr)

    return run


def _walked(perm: Any, n: int, a: int) -> jax.Array:
    """``perm`` on the grid, restricted to ``[0, n)`` by cycle walking (an image >= n is
    mapped again until it is < n; the result is a permutation of ``[0, n)``). The grid holds
    fewer than ``2 a + 1`` cells past ``n``, so the walks are followed from those cells only,
    in a small loop, and each agent's image looked up."""
    grid = lambda x: (x // a, x % a)  # noqa: E731
    left, right = perm(grid(jnp.arange(n, dtype=jnp.int32)))
    y = left * a + right
    if a * a == n:
        return y
    start = jnp.arange(n, a * a, dtype=jnp.int32)  # the cells past n

    def more(z: jax.Array) -> jax.Array:
        return (z >= n) & (z != start)  # a cycle of cells past n only: back at its start

    def walk(z: jax.Array) -> jax.Array:
        left, right = perm(grid(z))
        return jnp.where(more(z), left * a + right, z)

    left, right = perm(grid(start))
    end = jax.lax.while_loop(lambda z: more(z).any(), walk, left * a + right)
    return jnp.where(y >= n, end[jnp.clip(y - n, 0, a * a - n - 1)], y)


def shuffle(key: jax.Array, n: int) -> tuple[jax.Array, jax.Array]:
    """A random order of ``n`` agents: ``order[i]`` the agent at turn ``i`` and ``turn[a]``
    agent ``a``'s turn (the inverse), both int32. From :data:`SHUFFLE_SORTS_BELOW` agents up
    a keyed pseudo-random permutation (an 8-round Feistel network on a ``ceil(sqrt n)``-
    square grid, cycle-walked to ``[0, n)``), as GPU shuffles do (Mitchell et al. 2021): a
    few elementwise passes and one scatter, no sort (1e5 agents: 0.8 ms here, against 5-10
    ms for XLA's sorts); fewer agents, one sort of random bits. Not every one of the n!
    orders is reachable (nor is from any seeded generator); tests/test_rng.py checks orders,
    who follows whom, turns and group mates against a uniform permutation's."""
    ids = jnp.arange(n, dtype=jnp.int32)
    if n < SHUFFLE_SORTS_BELOW:  # ids sorted by 24 random bits (ties, n^2 / 2^25: by id)
        low = jnp.uint32(SHUFFLE_SORTS_BELOW - 1)
        bits = jax.random.bits(key, (n,), jnp.uint32) & ~low
        order = (jnp.sort(bits | ids.astype(jnp.uint32)) & low).astype(jnp.int32)
        return order, inverse(order)
    a = math.isqrt(n - 1) + 1
    turn = _walked(_feistel(jax.random.bits(key, (SHUFFLE_ROUNDS,), jnp.uint32), a), n, a)
    return inverse(turn), turn


def inverse(perm: jax.Array) -> jax.Array:
    """The inverse of a permutation of ``0 .. n-1`` (its ``argsort``), int32, by one scatter:
    XLA's CPU sort costs about 10x numpy's."""
    ids = jnp.arange(perm.shape[0], dtype=jnp.int32)
    return jnp.zeros(perm.shape[0], jnp.int32).at[perm].set(ids, unique_indices=True)
