"""sim_core.kernel.one_kernel: a loop of small steps as one XLA kernel, results unchanged."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from sim_core.kernel import SMALL, one_kernel


def turns(s: jax.Array) -> jax.Array:
    """A sequential update: column k moves towards the mean of the columns near it."""

    def turn(k: jax.Array, s: jax.Array) -> jax.Array:
        me = jax.lax.dynamic_slice_in_dim(s, k, 1, axis=1)
        near = (jnp.abs(s[0] - me[0, 0]) < 0.3) & (jnp.arange(s.shape[1]) != k)
        pull = ((s - me) * near).sum(1) / jnp.maximum(near.sum(), 1)
        return jax.lax.dynamic_update_slice_in_dim(s, me + 0.1 * pull[:, None], k, axis=1)

    return jax.lax.fori_loop(0, s.shape[1], turn, s)


def tagged(f, *args) -> bool:  # noqa: ANN001
    """Whether XLA's compiled program has a call emitted as one kernel."""
    return 'xla_cpu_small_call="true"' in jax.jit(f).lower(*args).compile().as_text()


@pytest.mark.parametrize("shape", [(2, 50), (3, 1365), (2, 3000)])  # last: over SMALL, plain
def test_one_kernel_gives_jits_results(shape: tuple[int, int]) -> None:
    s = jax.random.uniform(jax.random.key(0), shape)
    want = jax.jit(turns)(s)
    np.testing.assert_array_equal(jax.jit(one_kernel(turns))(s), want)
    assert tagged(one_kernel(turns), s) == (s.size <= SMALL)


@pytest.mark.parametrize("replicates", [2, 9])  # 9 x 2 x 300 > SMALL: still one kernel each
def test_under_vmap_each_replicate_is_one_kernel(replicates: int) -> None:
    s = jax.random.uniform(jax.random.key(1), (replicates, 2, 300))
    got = jax.jit(jax.vmap(one_kernel(turns)))(s)
    # each replicate as it is alone (XLA may sum a whole batch in another order: 1 float32 ulp)
    np.testing.assert_array_equal(got, np.stack([jax.jit(turns)(x) for x in s]))
    np.testing.assert_allclose(got, jax.jit(jax.vmap(turns))(s), rtol=1e-6)
    assert tagged(jax.vmap(one_kernel(turns)), s)
    # an unbatched argument beside a batched one
    both = lambda s, c: one_kernel(lambda s, c: turns(s + c))(s, c)  # noqa: E731
    got = jax.jit(jax.vmap(both, in_axes=(0, None)))(s, jnp.float32(0.5))
    np.testing.assert_array_equal(got, np.stack([jax.jit(turns)(x + 0.5) for x in s]))
