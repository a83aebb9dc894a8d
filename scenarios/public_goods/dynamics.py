"""Pure JAX kernels of the public goods game (no Python loop over agents or groups).

Everything is in tokens. Agent ``i`` contributes ``c_i`` of its endowment ``e``; each group's
pot is multiplied by ``r`` and shared equally among its members.

- Random groups (``groups=random``): a partition of the agents, ``group[i]`` the id of i's
  group; ``pi_i = e - c_i + r * sum_{j in g(i)} c_j / |g(i)|``.
- Neighbourhood groups (Santos, Santos & Pacheco 2008): agent ``g`` centres the group
  ``{g} + N(g)`` of size ``k_g + 1``; agent ``i`` plays in its own group and in each
  neighbour's, ``k_i + 1`` groups, and puts ``c_i / (k_i + 1)`` into each, so
  ``pi_i = e - c_i + sum_{g in {i} + N(i)} r * pot_g / (k_g + 1)``.

Each agent's *peers* are the others it sees and may sanction: its group mates (random) or its
neighbours (neighbourhood), as a padded table ``(N, M)`` with ``N`` as padding.

Sanctions (Fehr & Gächter 2000): agent i assigns ``P_ij`` punishment and ``W_ij`` reward
points to peer j (each clipped to [0, max_points]); i pays ``punishment_cost * sum_j P_ij +
reward_cost * sum_j W_ij`` (all i's points are scaled down so that this never exceeds
``max(pi_i, 0)``), and j gets ``reward_benefit * sum_i W_ij - punishment_fine * sum_i P_ij``.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from sim_core.graph import Neighbours, neighbour_sum
from sim_core.rng import shuffle


def group_payoffs(peers: jax.Array, c: jax.Array, endowment, r) -> jax.Array:
    """Earnings before sanctions when each agent's group is itself and its ``peers``, its
    group mates ``(N, M)`` padded with N (a gather: no scatter-add of pots)."""
    mates, mask = peer_values(peers, c)
    return endowment - c + r * (c + mates.sum(1)) / (1 + mask.sum(1))


def neighbourhood_payoffs(nb: Neighbours, c: jax.Array, endowment, r) -> jax.Array:
    """Earnings before sanctions when every agent centres a group of itself and its neighbours."""
    k1 = nb.degree.astype(c.dtype) + 1.0
    s = c / k1  # what i puts into each of its k_i + 1 groups
    share = r * (s + neighbour_sum(nb, s)) / k1  # each member's share of the group i centres
    return endowment - c + share + neighbour_sum(nb, share)


def partition(table: jax.Array, key: jax.Array, group_size: int) -> jax.Array:
    """Random groups over a graph: visit the agents in a random order; an agent not yet placed
    founds a group with up to ``group_size - 1`` of its neighbours not yet placed, drawn at
    random. A founder with no neighbour left unplaced joins instead the group of a random
    neighbour whose group has room (so sizes stay <= ``group_size``; it is then adjacent to
    that neighbour, not necessarily to the founder); only when none has room is it left alone,
    and the model has it sit the round out. Group ids are in [0, N). ``table``: the padded
    neighbour table (padding N). One PRNG draw and no sort inside the scan (each costs seconds
    of XLA compile on CPU)."""
    n, width = table.shape
    u = jax.random.uniform(key, (n, width + 1))
    order = jnp.argsort(u[:, 0])
    # Each row's neighbours in a random order (padding mixed in; it is never open).
    shuffled = jnp.take_along_axis(table, jnp.argsort(u[:, 1:], axis=1), axis=1)

    def found(carry, t):
        group, size = carry  # size: members of each group id (slot n absorbs the rest)
        f = order[t]
        free = group[f] < 0
        row = shuffled[f]
        open_ = (row < n) & (group[row] < 0)
        pick = free & open_ & (jnp.cumsum(open_) <= group_size - 1)
        room = (row < n) & (size[group[row]] < group_size)  # placed neighbours' groups
        stuck = free & ~open_.any()
        j = jnp.argmax(room)  # the first in the random order
        join = stuck & room[j]
        gid = jnp.where(join, group[row[j]], t)
        group = group.at[jnp.where(pick, row, n)].set(t)
        group = group.at[f].set(jnp.where(free, gid, group[f]))
        size = size.at[jnp.where(free, gid, n)].add(1 + pick.sum())
        return (group, size), None

    start = (jnp.full(n + 1, -1, jnp.int32), jnp.zeros(n + 1, jnp.int32))
    (group, _), _ = jax.lax.scan(found, start, jnp.arange(n))
    return group[:n]


def stranger_groups(
    order: jax.Array, turn: jax.Array, group_size: int
) -> tuple[jax.Array, jax.Array]:
    """:func:`partition` on a complete graph, given a random order of the agents (``order``
    and its inverse ``turn``, :func:`sim_core.rng.shuffle`): the order cut into consecutive
    groups of ``group_size`` (the last one smaller; every other group is full, so a last
    group of one sits the round out), the lab's stranger matching. Returns the group ids and
    the ``(N, group_size - 1)`` table of each agent's mates (in the order's, padded with N at
    the end), read off the order by a fixed slot pattern: no graph and no sort."""
    n, g = order.shape[0], group_size
    n_groups = -(-n // g)
    slots = jnp.concatenate([order, jnp.full(n_groups * g - n, n, jnp.int32)]).reshape(-1, g)
    others = np.array([[j for j in range(g) if j != s] for s in range(g)])  # (g, g - 1)
    mates = slots[:, others].reshape(n_groups * g, g - 1)  # the mates of each position
    return turn // g, mates[turn]


def group_peers(group: jax.Array, width: int) -> jax.Array:
    """Each agent's group mates as a ``(N, width)`` table padded with N (in id order)."""
    n = group.shape[0]
    order = jnp.argsort(group, stable=True)
    g_sorted = group[order]
    first = jnp.searchsorted(g_sorted, g_sorted, side="left")
    slot = jnp.arange(n) - first  # position of each agent within its group
    members = jnp.full((n, width + 1), n, jnp.int32).at[g_sorted, slot].set(order, mode="drop")
    rows = members[group]  # (N, width + 1): my group, me included
    me = jnp.arange(n)[:, None]
    drop = (rows == me) | (rows == n)
    pos = jnp.argsort(drop, axis=1, stable=True)[:, :width]  # the others first, in order
    return jnp.where(
        jnp.take_along_axis(drop, pos, axis=1), n, jnp.take_along_axis(rows, pos, axis=1)
    )


def draw(
    key: jax.Array, n: int, table: jax.Array | None, group_size: int
) -> tuple[jax.Array, jax.Array]:
    """A round's random groups of one replicate: group ids and each agent's mates ``(N,
    group_size - 1)`` (padded with N). Over a graph's ``table``, :func:`partition`; well mixed
    (``table`` None), :func:`stranger_groups` of a random order (no graph needed)."""
    if table is None:
        return stranger_groups(*shuffle(key, n), group_size)
    group = partition(table, key, group_size)
    return group, group_peers(group, group_size - 1)


def peer_values(peers: jax.Array, x: jax.Array) -> tuple[jax.Array, jax.Array]:
    """``x`` of each agent's peers ``(N, M)`` (0 at padding) and the mask of real peers."""
    n = x.shape[0]
    mask = peers < n
    return jnp.concatenate([x, jnp.zeros((1,), x.dtype)])[peers] * mask, mask


def sanction(
    p: Any, peers: jax.Array, pay: jax.Array, punish: jax.Array, reward: jax.Array
) -> tuple[jax.Array, jax.Array, jax.Array]:
    """Earnings after sanctions of one replicate, and the points actually assigned (scaled to
    each giver's budget); ``punish``/``reward``: ``(N, M)`` points aligned with ``peers``;
    ``p``: the game's parameters (costs, fine, benefit, max_points)."""
    n = pay.shape[0]
    mask = peers < n
    pun = jnp.where(mask, jnp.clip(punish, 0.0, p.max_points), 0.0)
    rew = jnp.where(mask, jnp.clip(reward, 0.0, p.max_points), 0.0)
    cost = p.punishment_cost * pun.sum(1) + p.reward_cost * rew.sum(1)
    budget = jnp.maximum(pay, 0.0)
    scale = jnp.where(cost > budget, budget / jnp.maximum(cost, 1e-12), 1.0)
    pun, rew = pun * scale[:, None], rew * scale[:, None]

    def received(points):
        return jnp.zeros(n + 1, pay.dtype).at[peers].add(points)[:n]

    final = (
        pay - cost * scale + p.reward_benefit * received(rew) - p.punishment_fine * received(pun)
    )
    return final, pun, rew
