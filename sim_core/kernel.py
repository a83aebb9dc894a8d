"""One compiled kernel for a loop of many small steps (XLA's CPU backend).

XLA on CPU runs each operation of a compiled program as its own kernel, dispatched by its
runtime at a fixed cost each (0.1 us and more here). A loop whose iterations are a dozen
operations on a few hundred numbers (one agent's turn of a sequential update: 1.1-1.5 us
a boid in boid-flockers, whatever their number) costs that dispatch, not its arithmetic. :func:`one_kernel` asks XLA to compile such a function
as a single kernel, as XLA itself does for loops under 1 kB of state
(``xla_cpu_small_while_loop_byte_threshold``): the same computation without the dispatch
(boid-flockers' turns: a whole run 1.2-1.6x faster). Float sums may round differently from
XLA's code for the same function in many kernels, which may sum in another order.

The kernel runs on one thread through XLA's plain code generator, which holds elementwise
operations, slices, reductions and loops, not scatters (``.at[...]``), matrix products or
custom calls, nor reductions of more than :data:`SMALL` numbers (XLA gives those to a
library). So a call whose arrays are larger than that is plain ``jax.jit``, as is every
call elsewhere than on a CPU; under ``vmap``, replicates are looped over, one kernel each.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.custom_batching import custom_vmap
from jax.experimental.xla_metadata import set_xla_metadata

SMALL = 4096
"""Numbers in the largest array a call of :func:`one_kernel` is one kernel for (on this
project's CPU a reduction over 4,800 numbers became an XLA library call; 3,000 did not)."""

# XLA's CPU backend emits a call tagged xla_cpu_small_call as one kernel; inlineable=false
# keeps its call inliner from dissolving the call first (both are needed: measured)
_ONE_KERNEL = {"xla_cpu_small_call": "true", "inlineable": "false"}


def one_kernel(f: Callable[..., Any]) -> Callable[..., Any]:
    """``f`` compiled as one kernel on CPU for small arrays (``jax.jit`` otherwise), for use
    inside a compiled function: a loop of many small operations, e.g. agents moving one at a
    time. Results are ``jax.jit(f)``'s, float sums up to their order. ``f`` takes every
    traced value it uses as an argument (under ``vmap``, JAX cannot loop over replicates of
    a function that closes over traced values: it fails to compile)."""
    g = jax.jit(f)

    @custom_vmap
    def call(*args: Any) -> Any:
        out = g(*args)
        small = all(np.size(x) <= SMALL for x in jax.tree.leaves((args, out)))
        if small and jax.default_backend() == "cpu":
            return set_xla_metadata(out, **_ONE_KERNEL)  # the call's result: only it tagged
        return out

    @call.def_vmap
    def _batched(axis_size: int, in_batched: Any, *args: Any) -> tuple[Any, Any]:
        # one replicate after another, each one kernel (batched, the arrays would outgrow it)
        def full(x: jax.Array, batched: bool) -> jax.Array:
            return x if batched else jnp.broadcast_to(x, (axis_size, *x.shape))

        out = jax.lax.map(lambda a: call(*a), jax.tree.map(full, list(args), list(in_batched)))
        return out, jax.tree.map(lambda _: True, out)

    return call
