"""Grids as a topology a world holds: neighbourhood sums and counts, random neighbour cells,
moves to empty cells and onto resources with the semantics of Mesa's sequential moves, all
vectorised.

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

import functools
from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property, partial
from typing import Literal

import jax
import jax.numpy as jnp
import numpy as np

Neighbourhood = Literal["moore", "von_neumann", "hex"]


@dataclass(frozen=True)
class Grid:
    """A ``width`` x ``height`` grid, torus or bounded, each cell's neighbourhood the cells
    within ``radius`` steps: orthogonal (Mesa's ``OrthogonalMooreGrid`` and
    ``OrthogonalVonNeumannGrid``) or hexagonal (Mesa's ``HexGrid``: rows of even ``y`` sit
    half a cell right of odd rows, so a cell's six neighbours depend on its row's parity)."""

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
        if self.neighbourhood not in ("moore", "von_neumann", "hex"):
            raise ValueError(
                "Grid neighbourhood must be 'moore', 'von_neumann' or 'hex', "
                f"got {self.neighbourhood!r}"
            )
        if self.neighbourhood == "hex" and self.torus and self.height % 2:
            raise ValueError(
                f"a hexagonal torus needs an even height (rows alternate), got {self.height}"
            )

    @property
    def cells(self) -> int:
        return self.width * self.height

    @cached_property
    def offsets(self) -> tuple[tuple[int, int], ...]:
        """The neighbourhood's ``(dx, dy)`` offsets, the cell itself excluded (on a hex grid,
        those of either row parity: :attr:`row_offsets` says which apply to which rows)."""
        if self.neighbourhood == "hex":
            even, odd = self.row_offsets
            return tuple(sorted(set(even) | set(odd)))
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

    @cached_property
    def row_offsets(self) -> tuple[tuple[tuple[int, int], ...], ...]:
        """The offsets of cells in even and in odd rows (the same on orthogonal grids). On a
        hex grid: those within ``radius`` hex steps, by axial coordinates ``q = x - ceil(y/2)``
        (even rows shifted right)."""
        if self.neighbourhood != "hex":
            return self.offsets, self.offsets
        r = self.radius

        def within(y0: int) -> tuple[tuple[int, int], ...]:
            q0 = -((y0 + 1) // 2)
            out = []
            for dy in range(-r, r + 1):
                for dx in range(-r - 1, r + 2):
                    dq, y = dx - ((y0 + dy + 1) // 2) - q0, dy
                    if 0 < (abs(dq) + abs(y) + abs(dq + y)) // 2 <= r:
                        out.append((dx, dy))
            return tuple(out)

        return within(0), within(1)

    # -- cell arrays ----------------------------------------------------------------------
    def neighbour_sum(self, values: jax.Array) -> jax.Array:
        """Sum of ``values`` (shape ``(width, height, ...)``) over each cell's neighbours."""
        return sum(self._around(jnp.asarray(values), 0)[1:])

    def _around(self, values: jax.Array, fill: float) -> list[jax.Array]:
        """``values`` at each cell itself, then at each neighbourhood offset from it (cell
        arrays; ``fill`` off a bounded grid and, on a hex grid, in rows where that offset is
        not a neighbour)."""
        r, w, h = self.radius, self.width, self.height
        if self.torus:
            shifted = lambda dx, dy: jnp.roll(values, (-dx, -dy), axis=(0, 1))  # noqa: E731
        else:
            pad = jnp.pad(
                values, ((r, r), (r, r)) + ((0, 0),) * (values.ndim - 2), constant_values=fill
            )
            shifted = lambda dx, dy: pad[r + dx : r + dx + w, r + dy : r + dy + h]  # noqa: E731
        even, odd = self.row_offsets
        row = (jnp.arange(h) % 2).reshape((1, -1) + (1,) * (values.ndim - 2))
        out = [values]
        for off in self.offsets:  # hex: an offset of one row parity only is masked elsewhere
            v = shifted(*off)
            out.append(v if off in even and off in odd else jnp.where(row == (off in odd), v, fill))
        return out

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
        off = jnp.asarray(self.row_offsets, jnp.int32)  # (2 row parities, K, 2)
        x, y = self.xy(cell)
        off = off[y % 2]
        nx, ny = x[:, None] + off[..., 0], y[:, None] + off[..., 1]
        if self.torus:
            ok = jnp.ones(nx.shape, bool)
            nx, ny = nx % self.width, ny % self.height
        else:
            ok = (nx >= 0) & (nx < self.width) & (ny >= 0) & (ny < self.height)
        score = jnp.where(ok, jax.random.uniform(key, nx.shape), -1.0)
        pick = jnp.argmax(score, axis=1)
        take = lambda a: jnp.take_along_axis(a, pick[:, None], axis=1)[:, 0]  # noqa: E731
        return self.cell(take(nx), take(ny))

    def around(self, cell: jax.Array) -> tuple[jax.Array, jax.Array]:
        """Each agent's neighbouring cells, then its own: ``(agents, K + 1)`` cells, and
        whether each is on the grid (always on a torus; off a bounded grid, a cell id that
        must not be used)."""
        x, y = self.xy(cell)
        off = jnp.asarray([(*o, (0, 0)) for o in self.row_offsets], jnp.int32)[y % 2]
        nx, ny = x[:, None] + off[..., 0], y[:, None] + off[..., 1]
        inside = (nx >= 0) & (nx < self.width) & (ny >= 0) & (ny < self.height)
        if self.torus:
            return self.cell(nx % self.width, ny % self.height), jnp.ones(nx.shape, bool)
        return self.cell(jnp.clip(nx, 0, self.width - 1), jnp.clip(ny, 0, self.height - 1)), inside

    def take_turns(
        self,
        turn: jax.Array,
        cand: jax.Array,
        ok: jax.Array,
        acting: jax.Array,
        u: jax.Array,
        full: jax.Array,
        take: Callable[[jax.Array, jax.Array], jax.Array],
    ) -> tuple[jax.Array, jax.Array, jax.Array]:
        """Mesa's sequential moves onto a resource: every ``acting`` agent, lowest ``turn``
        first (ties by slot), moves to one of its candidate cells ``cand`` (:meth:`around`)
        allowed by ``ok``, uniformly by ``u`` among those whose resource ``full`` (a flat
        cell array) is above 0, if any, else among all allowed; there it ``take(full,
        cells)``s what it finds (a sheep eats the grass, a wolf one sheep). Returns (cells,
        took, full after). Exact and vectorised: an agent depends on earlier ones only
        through the resources of its candidate cells, so each round every agent first in
        turn at all of its own acts; once few are left, the rounds run over those alone, in
        stages that keep an eighth of the slots of the last."""
        n, m = turn.shape[0], max(turn.shape[0] // 8, 1)
        ok = jnp.broadcast_to(ok, cand.shape)

        def firsts(turn, slot, cell, pending):
            """Per cell, the least turn of the pending agents on it, and the least slot of
            those with that turn."""
            at = jnp.where(pending, cell, self.cells)
            first = jnp.full(self.cells, _LAST).at[at].min(turn, mode="drop")
            tied = pending & (first.at[cell].get(mode="fill", fill_value=_LAST) == turn)
            at = jnp.where(tied, cell, self.cells)
            return first, jnp.full(self.cells, _LAST).at[at].min(slot, mode="drop")

        def first_near(turn, slot, cell, pending, cand):
            """At each of ``cand``, the slot of the pending agent first in turn on it or
            around it: over the whole grid (many agents pending) ..."""

            def grid(turn, slot, cell, pending):
                first, least = firsts(turn, slot, cell, pending)
                shape = (self.width, self.height)
                near = self._around(first.reshape(shape), _LAST)
                best = functools.reduce(jnp.minimum, near)
                pick = zip(near, self._around(least.reshape(shape), _LAST), strict=True)
                at = [jnp.where(f == best, s, _LAST) for f, s in pick]
                return functools.reduce(jnp.minimum, at).ravel()

            # Inside a cond, the grid is computed once, then gathered: XLA would otherwise
            # fuse it into the gather, every candidate reading nine grids at random (4x
            # slower at 1e5 cells and more, measured; pending is never empty here).
            none = lambda *a: jnp.full(self.cells, _LAST)  # noqa: E731
            return jax.lax.cond(pending.any(), grid, none, turn, slot, cell, pending)[cand]

        def first_near_few(turn, slot, cell, pending, cand):
            """... or at the cells around ``cand`` alone (few pending: a round then costs
            what they do, not a pass over every cell)."""
            first, least = firsts(turn, slot, cell, pending)
            nb, inside = self.around(cand.ravel())
            f = jnp.where(inside, first[nb], _LAST)
            best = f.min(1, keepdims=True)
            at = jnp.where(inside & (f == best), least[nb], _LAST).min(1)
            return at.reshape(cand.shape)

        def round_(near, a, s):
            turn, slot, cand, ok, u = a
            pending, full, to, took = s
            want = ok & (full[cand] > 0)
            first = near(turn, slot, cand[:, -1], pending, cand)
            go = pending & ~(want & (first != slot[:, None])).any(1)
            new = _choose(cand, jnp.where(want.any(1, keepdims=True), want, ok), u)
            eat = go & (full[new] > 0)
            to, took = jnp.where(go, new, to), took | eat
            return pending & ~go, take(full, jnp.where(eat, new, full.shape[0])), to, took

        a = (turn, jnp.arange(n), cand, ok, u)
        s = (acting, full, cand[:, -1], jnp.zeros(n, bool))
        s = jax.lax.while_loop(lambda s: s[0].sum() > m, partial(round_, first_near, a), s)
        to, took = s[2], s[3]
        sizes = [m]  # the few left shrink ~4-8x a round: each stage keeps an 8th of the last
        while sizes[-1] // 8 >= _FEW:
            sizes.append(sizes[-1] // 8)
        for size, after in zip(sizes, [*sizes[1:], 0], strict=True):
            at = jnp.nonzero(s[0], size=size, fill_value=s[0].shape[0])[0]  # the pending
            part = lambda x, fill=0, at=at: x.at[at].get(mode="fill", fill_value=fill)  # noqa: E731
            a = (part(a[0]), part(a[1], n), *map(part, a[2:]))  # a[1]: their slots (n: none)
            s = jax.lax.while_loop(
                lambda s, after=after: s[0].sum() > after,
                partial(round_, first_near_few, a),
                (part(s[0], False), s[1], part(s[2]), part(s[3])),
            )
            to, took = to.at[a[1]].set(s[2], mode="drop"), took.at[a[1]].set(s[3], mode="drop")
        return to, took, s[1]

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
        cost 10x numpy's, so none is used. When no living agent moves, nothing is computed
        (a settled world's step; in a vmapped batch of replicates both branches run)."""
        moving = moving & alive
        return jax.lax.cond(
            moving.any(), self._move_to_empty, lambda *a: cell, key, cell, moving, alive
        )

    def _move_to_empty(
        self, key: jax.Array, cell: jax.Array, moving: jax.Array, alive: jax.Array
    ) -> jax.Array:
        n, cells = cell.shape[0], self.cells
        occupied = jnp.zeros(cells, bool).at[jnp.where(alive, cell, cells)].set(True, mode="drop")
        rank = jnp.cumsum(~occupied) - 1
        empties = (
            jnp.zeros(cells, cell.dtype)
            .at[jnp.where(~occupied, rank, cells)]
            .set(jnp.arange(cells, dtype=cell.dtype), mode="drop")
        )
        m = cells - occupied.sum()
        moving = moving & (m > 0)  # movers are alive (move_to_empty)
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


_LAST = 2**31 - 1
_FEW = 512  # take_turns: the smallest stage of its few rounds (more stages: more to compile)


def _choose(cand: jax.Array, pool: jax.Array, u: jax.Array) -> jax.Array:
    """A uniform choice (``u``) of each row's candidates in ``pool``, without a gather."""
    k = (u * pool.sum(1)).astype(jnp.int32)
    before = [sum(pool[:, i].astype(jnp.int32) for i in range(j)) for j in range(pool.shape[1])]
    return sum(
        jnp.where(pool[:, j] & (before[j] == k), cand[:, j], 0) for j in range(pool.shape[1])
    )


def random_cellmate(
    key: jax.Array, order: jax.Array, turn: jax.Array, new: jax.Array, old: jax.Array
) -> jax.Array:
    """A random agent sharing each agent's cell at its turn (-1: none), when every agent
    moves from ``old`` to ``new`` at its turn of a shuffled order (``sim_core.rng.shuffle``):
    the earlier agents by their new cell, the later ones by their old cell, as Mesa's
    ``cell.agents`` would hold them. Two sorted keys ``cell * n + turn``, no Python loop."""
    n = new.shape[0]
    sa, sb = jnp.sort(new * n + turn), jnp.sort(old * n + turn)
    find = partial(jnp.searchsorted, method="compare_all" if n <= 2048 else "scan")  # measured
    lo_a = find(sa, new * n)
    before = find(sa, new * n + turn) - lo_a
    lo_b = find(sb, new * n + turn + 1)
    after = find(sb, new * n + n) - lo_b
    u = (jax.random.uniform(key, new.shape) * (before + after)).astype(jnp.int32)
    at = jnp.where(
        u < before, sa[jnp.clip(lo_a + u, 0, n - 1)], sb[jnp.clip(lo_b + u - before, 0, n - 1)]
    )
    return jnp.where(before + after > 0, order[at % n], -1)


@dataclass(frozen=True)
class Continuous:
    """A ``width`` x ``height`` continuous space (Mesa's ``ContinuousSpace``), torus or
    bounded; positions are arrays of shape ``(n, 2)``.

    Neighbour queries reduce a per-pair function over the agents within a radius. Two
    methods, both exact: dense (every pair at once) and cell lists (agents binned into cells
    at least ``radius`` wide, the 3 x 3 cells around each agent scanned in lockstep, one
    member per cell per round; the bins are filled without a sort, since XLA's CPU sort
    costs 10x numpy's). Cell lists are used from :data:`CELL_LIST_FROM` agents when 3 cells
    fit across: measured on this project's 2-core CPU, a neighbour sum over 200 agents took
    1.8x less time than dense (about the same at 100 agents, 4.6x less at 2,000).
    """

    width: float
    height: float
    torus: bool = False

    def __post_init__(self) -> None:
        for name in ("width", "height"):
            v = getattr(self, name)
            if (
                isinstance(v, bool)
                or not isinstance(v, int | float | np.integer | np.floating)
                or not v > 0
            ):
                raise ValueError(f"Continuous {name} must be a number > 0, got {v!r}")

    @property
    def size(self) -> jax.Array:
        return jnp.array([self.width, self.height], jnp.float32)

    def displacement(self, a: jax.Array, b: jax.Array) -> jax.Array:
        """``b - a``, the shortest way round on a torus (Mesa's ``calculate_difference_vector``)."""
        d = jnp.asarray(b) - jnp.asarray(a)
        return d - self.size * jnp.round(d / self.size) if self.torus else d

    def distance(self, a: jax.Array, b: jax.Array) -> jax.Array:
        d = self.displacement(a, b)
        return jnp.sqrt(_norm2(d))

    def wrap(self, pos: jax.Array) -> jax.Array:
        """Positions back in the space: around a torus, clipped to the edges otherwise."""
        return jnp.mod(pos, self.size) if self.torus else jnp.clip(pos, 0, self.size)

    def neighbours(self, pos: jax.Array, radius: float) -> jax.Array:
        """``(n, n)`` booleans: agent j is within ``radius`` of agent i (j != i)."""
        d = self.displacement(pos[:, None], pos[None])
        return (_norm2(d) <= radius * radius) & ~jnp.eye(pos.shape[0], dtype=bool)

    def k_nearest(self, pos: jax.Array, k: int) -> tuple[jax.Array, jax.Array]:
        """Indices ``(n, k)`` and distances of each agent's ``k`` nearest other agents."""
        d = self.displacement(pos[:, None], pos[None])
        d2 = jnp.where(jnp.eye(pos.shape[0], dtype=bool), jnp.inf, _norm2(d))
        neg, idx = jax.lax.top_k(-d2, k)
        return idx, jnp.sqrt(-neg)

    def neighbour_sum(self, pos, radius, f, *, at=None, include=None, method="auto"):  # noqa: ANN001, ANN201
        """For each agent i, the sum of ``f(d, j)`` over the agents ``j != i`` within
        ``radius`` of ``at[i]`` (default: its own position) for which ``include(i, j)``
        holds; ``d`` is the displacement from ``at[i]`` to ``pos[j]``, shape ``(..., 2)``, and
        ``f`` returns a pytree of arrays of shape ``d.shape[:-1] + extra`` (written with
        broadcasting: ``j`` is an index array). ``method``: "dense", "cells" or "auto"."""
        at = pos if at is None else at
        n = pos.shape[0]
        nx, ny = int(self.width // radius), int(self.height // radius)
        cells_fit = min(nx, ny) >= 3  # fewer cells and the 3 x 3 neighbourhood repeats itself
        if method == "cells" or (method == "auto" and cells_fit and n >= CELL_LIST_FROM):
            if not cells_fit:
                raise ValueError(f"cell lists need radius <= a third of the space, got {radius}")
            return self._cells_sum(pos, radius, f, at, include, nx, ny)
        i, j = jnp.arange(n)[:, None], jnp.arange(n)[None, :]
        d = self.displacement(at[:, None], pos[None])
        ok = (_norm2(d) <= radius * radius) & (i != j)
        if include is not None:
            ok = ok & include(i, j)
        return jax.tree_util.tree_map(lambda v: _masked_sum(v, ok), f(d, j))

    def neighbour_mean(
        self, pos: jax.Array, radius: float, values: jax.Array, **kw
    ) -> tuple[jax.Array, jax.Array]:
        """Mean of ``values`` over each agent's neighbours (0 where none) and their number."""
        s = self.neighbour_sum(pos, radius, lambda d, j: (jnp.ones(d.shape[:-1]), values[j]), **kw)
        n = s[0].reshape(s[0].shape + (1,) * (values.ndim - 1))
        return jnp.where(n > 0, s[1] / jnp.maximum(n, 1), 0), s[0]

    def _cells_sum(self, pos, radius, f, at, include, nx, ny):  # noqa: ANN001, ANN202
        n, cells = pos.shape[0], nx * ny
        scale = jnp.array([nx / self.width, ny / self.height], jnp.float32)
        xy = jnp.clip(
            jnp.floor(self.wrap(pos) * scale).astype(jnp.int32), 0, jnp.array([nx - 1, ny - 1])
        )
        cell = xy[:, 0] * ny + xy[:, 1]

        # Each cell's members in id order without a sort: each round every cell takes its
        # lowest remaining id (rounds: the most agents in a cell).
        def place(state):
            rank, r = state
            lowest = (
                jnp.full(cells, n)
                .at[jnp.where(rank < 0, cell, cells)]
                .min(jnp.arange(n), mode="drop")
            )
            return jnp.where((rank < 0) & (lowest[cell] == jnp.arange(n)), r, rank), r + 1

        rank, rounds = jax.lax.while_loop(lambda s: (s[0] < 0).any(), place, (jnp.full(n, -1), 0))
        count = jnp.zeros(cells, jnp.int32).at[cell].add(1)
        start = jnp.cumsum(count) - count
        members = jnp.zeros(n, jnp.int32).at[start[cell] + rank].set(jnp.arange(n))
        # The 3 x 3 cells around each query point (off the edge of a bounded space: none).
        q = jnp.clip(
            jnp.floor(self.wrap(at) * scale).astype(jnp.int32), 0, jnp.array([nx - 1, ny - 1])
        )
        off = jnp.array([(a, b) for a in (-1, 0, 1) for b in (-1, 0, 1)], jnp.int32)
        cx, cy = q[:, None, 0] + off[:, 0], q[:, None, 1] + off[:, 1]  # (n, 9)
        inside = self.torus | ((cx >= 0) & (cx < nx) & (cy >= 0) & (cy < ny))
        near = jnp.where(inside, (cx % nx) * ny + cy % ny, 0)
        i = jnp.arange(n)[:, None]
        zero = jax.tree_util.tree_map(
            lambda s: jnp.zeros((n,) + s.shape[2:], s.dtype),
            jax.eval_shape(
                f,
                jax.ShapeDtypeStruct((n, 9, 2), jnp.float32),
                jax.ShapeDtypeStruct((n, 9), jnp.int32),
            ),
        )

        def scan(k, acc):
            j = members[jnp.minimum(start[near] + k, n - 1)]
            d = self.displacement(at[:, None], pos[j])
            ok = inside & (k < count[near]) & (_norm2(d) <= radius * radius) & (j != i)
            if include is not None:
                ok = ok & include(i, j)
            return jax.tree_util.tree_map(lambda a, v: a + _masked_sum(v, ok), acc, f(d, j))

        return jax.lax.fori_loop(0, rounds, scan, zero)


CELL_LIST_FROM = 100
"""Agents from which :meth:`Continuous.neighbour_sum` uses cell lists (see the class)."""


def _norm2(d: jax.Array) -> jax.Array:
    """Squared length of displacements ``(..., 2)``, written per axis: XLA's CPU sum over a
    size-2 axis of a pairwise array is 8-20x slower (200 agents: 1.3 ms against 67 us)."""
    return d[..., 0] * d[..., 0] + d[..., 1] * d[..., 1]


def _masked_sum(v: jax.Array, ok: jax.Array) -> jax.Array:
    """Sum over axis 1 of ``v`` where ``ok`` (``v`` broadcast to ``ok``'s shape first)."""
    extra = max(v.ndim - ok.ndim, 0)
    return jnp.where(ok.reshape(ok.shape + (1,) * extra), v, 0).sum(1)
