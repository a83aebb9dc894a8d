"""Named random streams derived from one root seed.

A stream is a pure function of ``(seed, name, replicate)``: not of the order in which
streams are asked for, nor of how replicates are batched. So adding a new stream, running
replicates one at a time or vmapped together, or changing LLM concurrency never changes the
draws of another stream.
"""

from __future__ import annotations

import zlib

import jax
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
