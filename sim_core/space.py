"""Grids as a topology a world holds: neighbourhood sums and counts, random neighbour cells,
and moves to empty cells with the semantics of Mesa's sequential moves, all vectorised.

A :class:`Grid` is static (a frozen, hashable description: size, torus, neighbourhood,
radius), so studies pass it into compiled code freely. Cells are flat integer ids
``x * height + y`` (Mesa's ``(x, y)`` order); per-cell values are arrays of shape
``(width, height)``.

Neighbourhoods are sums of shifted copies of a cell array, one shift per offset: exact for
any radius, Moore or von Neumann, torus or bounded (a bounded grid pads with zeros), and one
fused XLA loop over the cells. Measured against a summed-area table on this project's
machines, the shifts win up to radius 3 at 1e4-1e6 cells; both are exact.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Literal

import jax
import jax.numpy as jnp
import numpy as np

Neighbourhood = Literal["moore", "von_neumann"]


@dataclass(frozen=True)
class Grid:
    """A ``width`` x ``height`` orthogonal grid (Mesa's ``OrthogonalMooreGrid`` and
    ``OrthogonalVonNeumannGrid``): ``radius`` cells around each, torus or bounded."""

    width: int
    height: int
    torus: bool = False
    neighbourhood: Neighbourhood = "moore"
    radius: int = 1

    def __post_init__(self) -> None:
        for name in ("width", "height", "radius"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int | np.integer) or v < 1:
                raise ValueError(f"Grid {name} must be an integer >= 1, got {v!r}")
        if self.neighbourhood not in ("moore", "von_neumann"):
            raise ValueError(
                f"Grid neighbourhood must be 'moore' or 'von_neumann', got {self.neighbourhood!r}"
            )

    @property
    def cells(self) -> int:
        return self.width * self.height

    @cached_property
    def offsets(self) -> tuple[tuple[int, int], ...]:
        """The neighbourhood's ``(dx, dy)`` offsets, the cell itself excluded."""
        r = self.radius
        out = []
        for dx in range(-r, r + 1):
            for dy in range(-r, r + 1):
                if (dx, dy) == (0, 0) or (
                    self.neighbourhood == "von_neumann" and abs(dx) + abs(dy) > r
                ):
                    continue
                out.append((dx, dy))
        return tuple(out)

    # -- cell arrays ----------------------------------------------------------------------
    def neighbour_sum(self, values: jax.Array) -> jax.Array:
        """Sum of ``values`` (shape ``(width, height, ...)``) over each cell's neighbours."""
        values = jnp.asarray(values)
        if self.torus:
            return sum(jnp.roll(values, (-dx, -dy), axis=(0, 1)) for dx, dy in self.offsets)
        r, w, h = self.radius, self.width, self.height
        pad = jnp.pad(values, ((r, r), (r, r)) + ((0, 0),) * (values.ndim - 2))
        return sum(pad[r + dx : r + dx + w, r + dy : r + dy + h] for dx, dy in self.offsets)

    def neighbour_count(self, occupied: jax.Array) -> jax.Array:
        """Number of occupied neighbours of each cell (``occupied``: booleans per cell)."""
        return self.neighbour_sum(jnp.asarray(occupied, jnp.int32))

    def neighbour_mean(self, values: jax.Array, occupied: jax.Array) -> jax.Array:
        """Mean of ``values`` over each cell's occupied neighbours (0 where it has none)."""
        occ = jnp.asarray(occupied, values.dtype)
        n = self.neighbour_sum(occ)
        return jnp.where(n > 0, self.neighbour_sum(values * occ) / jnp.maximum(n, 1), 0)

    # -- agents on cells ------------------------------------------------------------------
    def xy(self, cell: jax.Array) -> tuple[jax.Array, jax.Array]:
        return cell // self.height, cell % self.height

    def cell(self, x: jax.Array, y: jax.Array) -> jax.Array:
        return x * self.height + y

    def random_neighbour(self, key: jax.Array, cell: jax.Array) -> jax.Array:
        """One neighbouring cell of each ``cell``, uniform over those inside the grid
        (Mesa's ``cell.neighborhood.select_random_cell()``)."""
        off = jnp.asarray(self.offsets, jnp.int32)  # (K, 2)
        x, y = self.xy(cell)
        nx, ny = x[:, None] + off[:, 0], y[:, None] + off[:, 1]
        if self.torus:
            ok = jnp.ones(nx.shape, bool)
            nx, ny = nx % self.width, ny % self.height
        else:
            ok = (nx >= 0) & (nx < self.width) & (ny >= 0) & (ny < self.height)
        score = jnp.where(ok, jax.random.uniform(key, nx.shape), -1.0)
        pick = jnp.argmax(score, axis=1)
        take = lambda a: jnp.take_along_axis(a, pick[:, None], axis=1)[:, 0]  # noqa: E731
        return self.cell(take(nx), take(ny))

    def move_to_empty(
        self, key: jax.Array, cell: jax.Array, moving: jax.Array, alive: jax.Array
    ) -> jax.Array:
        """New cells after every ``moving`` agent, in a random order, moves to a cell chosen
        uniformly among those empty at its turn (Mesa's ``select_random_empty_cell`` inside
        ``shuffle_do``), one agent per cell. Exact in distribution, and vectorised: the empty
        cells form a list of fixed length; at its turn a mover takes a uniformly drawn slot
        of it and leaves its old cell there. So the movers that drew one slot take, in turn
        order, the slot's cell and then each other's old cells: resolved in rounds, one
        mover per slot each, as many rounds as the largest group (a few). XLA's CPU sorts
        cost 10x numpy's, so none is used."""
        n, cells = cell.shape[0], self.cells
        occupied = jnp.zeros(cells, bool).at[jnp.where(alive, cell, cells)].set(True, mode="drop")
        rank = jnp.cumsum(~occupied) - 1
        empties = (
            jnp.zeros(cells, cell.dtype)
            .at[jnp.where(~occupied, rank, cells)]
            .set(jnp.arange(cells, dtype=cell.dtype), mode="drop")
        )
        m = cells - occupied.sum()
        moving = moving & alive & (m > 0)
        # One 24-bit uniform u per agent gives both its slot, floor(u m), and its turn among
        # the movers of that slot (u itself: uniform within the slot, independent of it).
        turn = (jax.random.bits(key, (n,)) >> 8).astype(jnp.int32)
        slot = jnp.minimum(
            (turn.astype(jnp.float32) * (m / 2.0**24)).astype(jnp.int32), jnp.maximum(m - 1, 0)
        )
        ids = jnp.arange(n)

        def round_(state):
            free, pending, new = state
            where = jnp.where(pending, slot, cells)
            first = jnp.full(cells, 2**31 - 1).at[where].min(turn, mode="drop")
            go = pending & (first[slot] == turn)
            one = (
                jnp.full(cells, n).at[jnp.where(go, slot, cells)].min(ids, mode="drop")
            )  # equal u: lowest id
            go = go & (one[slot] == ids)
            new = jnp.where(go, free[slot], new)
            free = free.at[jnp.where(go, slot, cells)].set(cell, mode="drop")
            return free, pending & ~go, new

        return jax.lax.while_loop(lambda s: s[1].any(), round_, (empties, moving, cell))[2]
