"""Births and deaths on a masked agent axis of fixed capacity, in pure JAX.

A world's agents are slots ``0 .. capacity - 1`` with an ``alive`` mask; a death clears a
slot, a birth takes the lowest free one. Nothing here sorts (XLA's CPU sort costs 10x
numpy's): free slots are found by a cumulative sum. Random draws are keyed by slot, so an
agent draws the same numbers whatever the capacity: a run that outgrows its capacity and is
rerun with more (``society.study``) gives the same rows.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp


def slot_bits(key: jax.Array, capacity: int, k: int = 1) -> jax.Array:
    """``(capacity, k)`` random uint32, row ``i`` a function of ``key`` and ``i`` only: one
    threefry word per slot (XLA's CPU threefry costs ~15 ns a word), hashed into ``k``."""
    if jax.config.jax_threefry_partitionable:  # each element hashes its own index
        word = jax.random.bits(key, (capacity,))
    else:
        word = jax.vmap(lambda i: jax.random.bits(jax.random.fold_in(key, i)))(jnp.arange(capacity))
    return mix(word[:, None] + jnp.arange(k, dtype=jnp.uint32) * jnp.uint32(0x9E3779B9))


def mix(x: jax.Array) -> jax.Array:
    """A bijective 32-bit hash with full avalanche (Wellons' lowbias32)."""
    x = (x ^ (x >> 16)) * jnp.uint32(0x7FEB352D)
    x = (x ^ (x >> 15)) * jnp.uint32(0x846CA68B)
    return x ^ (x >> 16)


def uniform(bits: jax.Array) -> jax.Array:
    """Floats in [0, 1) from uint32 bits (24 bits of them: exact in float32)."""
    return (bits >> 8).astype(jnp.float32) * (1.0 / 2**24)


def prefix(x: jax.Array, block: int = 32) -> jax.Array:
    """Inclusive cumulative sums of 0/1 along the last axis (below 2**24). As products of
    blocks with a triangular matrix: 3x faster than XLA's CPU cumsum at 1e4-1e6."""
    n = x.shape[-1]
    if n <= block:
        return (x.astype(jnp.float32) @ jnp.triu(jnp.ones((n, n), jnp.float32))).astype(jnp.int32)
    m = -(-n // block)
    y = jnp.pad(x.astype(jnp.float32), [(0, 0)] * (x.ndim - 1) + [(0, m * block - n)])
    within = y.reshape(*x.shape[:-1], m, block) @ jnp.triu(jnp.ones((block, block), jnp.float32))
    total = within[..., -1].astype(jnp.int32)
    out = within + (prefix(total, block) - total)[..., None]
    return out.reshape(*x.shape[:-1], m * block)[..., :n].astype(jnp.int32)


def births(alive: jax.Array, parents: jax.Array) -> tuple[jax.Array, jax.Array]:
    """For each slot, the parent whose newborn takes it (``capacity``: none), and how many
    births found no free slot. Newborns take the free slots in order, the first parent's
    (by slot) the first; one scatter, then :func:`born` gathers."""
    n = alive.shape[0]
    free = ~alive
    rank = prefix(jnp.stack([parents, free])) - 1
    by_rank = jnp.full(n, n).at[jnp.where(parents, rank[0], n)].set(jnp.arange(n), mode="drop")
    source = jnp.where(free, by_rank[jnp.clip(rank[1], 0, n - 1)], n)
    return source, jnp.maximum(parents.sum() - free.sum(), 0).astype(jnp.int32)


def born(
    agents: dict[str, jax.Array], source: jax.Array, newborn: dict[str, Any]
) -> dict[str, jax.Array]:
    """``agents`` with the newborns of :func:`births`: ``newborn[name]`` is a value for all
    or one per parent (by the parent's slot)."""
    n, new = source.shape[0], source < source.shape[0]
    take = lambda x: x[jnp.minimum(source, n - 1)] if jnp.ndim(x) else x  # noqa: E731
    return {
        k: jnp.where(new, take(jnp.asarray(newborn[k])), v) if k in newborn else v
        for k, v in agents.items()
    }


def grow(world: Any, capacity: int) -> Any:
    """``world`` with every leaf whose leading axis is the agents' (``world["alive"]``)
    padded to ``capacity`` with zeros (dead slots). A study whose other arrays may have that
    leading size overrides ``Study.grow``."""
    n = world["alive"].shape[0]
    pad = lambda x: jnp.pad(x, [(0, capacity - n)] + [(0, 0)] * (x.ndim - 1))  # noqa: E731
    return jax.tree_util.tree_map(lambda x: pad(x) if x.ndim and x.shape[0] == n else x, world)
