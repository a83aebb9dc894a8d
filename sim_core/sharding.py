"""Split one population's agent axis over several devices with ``jax.sharding``.

A population larger than one device keeps its per-agent arrays (and a graph's edge arrays)
sharded along their agent axis over a one-axis ``Mesh`` named ``"agents"``; jit-compiled
transitions then run partitioned (GSPMD inserts the gathers neighbour operations need).
Sharding never changes results: the same seed gives the same run on one device or many.

An array is sharded only along an axis whose length the device count divides; any other
array (offsets of length n + 1, keys, scalars) is replicated.
"""

from __future__ import annotations

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec

AXIS = "agents"


def agent_mesh(shard: bool | None = None) -> Mesh | None:
    """A one-axis mesh over all devices, or None to run unsharded.

    ``shard``: True shards (over however many devices there are, even one), False never,
    None (automatic) when more than one device is visible.
    """
    devices = jax.devices()
    if shard is False or (shard is None and len(devices) < 2):
        return None
    return Mesh(np.array(devices), (AXIS,))


def shard_agents(tree, mesh: Mesh | None, axis: int = 0):
    """``device_put`` every array leaf of ``tree`` sharded along ``axis`` (where the mesh
    size divides its length; replicated otherwise). ``mesh=None`` returns ``tree`` as is."""
    if mesh is None:
        return tree
    size = mesh.devices.size

    def put(x):
        if not hasattr(x, "shape"):
            return x
        if x.ndim > axis and x.shape[axis] % size == 0 and x.shape[axis] > 0:
            spec = PartitionSpec(*([None] * axis), AXIS)
        else:
            spec = PartitionSpec()
        return jax.device_put(x, NamedSharding(mesh, spec))

    return jax.tree_util.tree_map(put, tree)


__all__ = ["AXIS", "agent_mesh", "shard_agents"]
