"""Grids (sim_core.space): neighbourhood sums against brute force, and moves with Mesa's
sequential semantics checked against the exact distribution of the sequential process."""

from __future__ import annotations

import itertools
from collections import Counter

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from sim_core.space import Grid


def _brute_sum(values: np.ndarray, grid: Grid) -> np.ndarray:
    w, h = values.shape
    out = np.zeros_like(values)
    for x, y in itertools.product(range(w), range(h)):
        for dx, dy in grid.offsets:
            nx, ny = x + dx, y + dy
            if grid.torus:
                nx, ny = nx % w, ny % h
            elif not (0 <= nx < w and 0 <= ny < h):
                continue
            out[x, y] += values[nx, ny]
    return out


@pytest.mark.parametrize("torus", [False, True])
@pytest.mark.parametrize("neighbourhood", ["moore", "von_neumann"])
@pytest.mark.parametrize("radius", [1, 2])
def test_neighbour_sums_match_brute_force(torus: bool, neighbourhood: str, radius: int) -> None:
    grid = Grid(7, 5, torus=torus, neighbourhood=neighbourhood, radius=radius)
    values = np.random.default_rng(radius).integers(0, 5, (7, 5))
    np.testing.assert_array_equal(np.asarray(grid.neighbour_sum(values)), _brute_sum(values, grid))
    assert len(grid.offsets) == (
        (2 * radius + 1) ** 2 - 1 if neighbourhood == "moore" else 2 * radius * (radius + 1)
    )


def test_random_neighbour_is_uniform_over_the_cells_inside() -> None:
    """A corner of a bounded Moore grid has 3 neighbours: each drawn a third of the time
    (20,000 draws: standard error 0.0033, tolerance 0.02 = 6 standard errors)."""
    grid = Grid(4, 4)
    cells = np.asarray(
        jax.jit(grid.random_neighbour)(jax.random.key(0), jnp.zeros(20_000, jnp.int32))
    )
    shares = np.bincount(cells, minlength=16) / cells.size
    assert set(np.flatnonzero(shares)) == {1, 4, 5}
    np.testing.assert_allclose(shares[[1, 4, 5]], 1 / 3, atol=0.02)


def _mesa_hex_neighbours(width: int, height: int, torus: bool, radius: int) -> list[set[int]]:
    """Each cell's neighbourhood in Mesa's own ``HexGrid`` (as flat ids ``x * height + y``)."""
    from mesa.discrete_space import HexGrid

    grid = HexGrid((width, height), torus=torus, random=__import__("random").Random(0))
    out = [set() for _ in range(width * height)]
    for cell in grid.all_cells:
        x, y = cell.coordinate
        hood = cell.get_neighborhood(radius=radius)
        out[x * height + y] = {c.coordinate[0] * height + c.coordinate[1] for c in hood}
    return out


@pytest.mark.parametrize("torus", [False, True])
@pytest.mark.parametrize("radius", [1, 2, 3])
def test_hex_neighbourhoods_are_mesas(torus: bool, radius: int) -> None:
    """A hex grid's neighbourhood sums and random neighbours cover exactly the cells Mesa's
    ``HexGrid`` connects within ``radius`` steps (its row-parity offsets, bounded or torus)."""
    w, h = 7, 6
    grid = Grid(w, h, torus=torus, neighbourhood="hex", radius=radius)
    mesa = _mesa_hex_neighbours(w, h, torus, radius)
    # one-hot values: the sum at each cell says which cells are its neighbours
    sums = np.asarray(grid.neighbour_sum(np.eye(w * h, dtype=np.int32).reshape(w, h, -1)))
    ours = [set(np.flatnonzero(sums[c // h, c % h])) for c in range(w * h)]
    assert ours == mesa
    cells = np.repeat(np.arange(w * h, dtype=np.int32), 200)
    drawn = np.asarray(jax.jit(grid.random_neighbour)(jax.random.key(radius), jnp.asarray(cells)))
    assert all(set(drawn[cells == c]) <= mesa[c] for c in range(w * h))
    if torus and h > 2 * radius:  # every cell has all 3r(r+1) where the torus does not fold
        assert {len(n) for n in mesa} == {3 * radius * (radius + 1)}


def test_hex_torus_needs_an_even_height() -> None:
    with pytest.raises(ValueError, match="even height"):
        Grid(6, 5, torus=True, neighbourhood="hex")


def _sequential_law(cell: list[int], moving: list[bool], cells: int) -> dict[tuple, float]:
    """The exact distribution of final cells when movers, in a uniformly random order,
    each move to a uniformly chosen empty cell (enumerated)."""
    law: Counter = Counter()
    movers = [i for i, m in enumerate(moving) if m]
    orders = list(itertools.permutations(movers))

    def go(pos: list[int], rest: tuple, p: float) -> None:
        if not rest:
            law[tuple(pos)] += p
            return
        empty = sorted(set(range(cells)) - set(pos))
        for e in empty:
            nxt = list(pos)
            nxt[rest[0]] = e
            go(nxt, rest[1:], p / len(empty))

    for order in orders:
        go(list(cell), order, 1 / len(orders))
    return law


def test_moves_to_empty_cells_follow_the_sequential_law() -> None:
    """Three movers and one agent staying, on 6 cells: every final arrangement has the
    probability of the sequential process (200,000 draws; the largest standard error of a
    probability is 0.0011, tolerance 0.006)."""
    grid = Grid(2, 3)
    cell, moving = [0, 1, 2, 3], [True, True, False, True]
    law = _sequential_law(cell, moving, grid.cells)
    draws = 200_000
    move = jax.jit(
        jax.vmap(
            lambda k: grid.move_to_empty(k, jnp.array(cell), jnp.array(moving), jnp.ones(4, bool))
        )
    )
    out = np.asarray(move(jax.random.split(jax.random.key(1), draws)))
    assert (np.sort(out, axis=1)[:, 1:] != np.sort(out, axis=1)[:, :-1]).all()  # one agent per cell
    assert (out[:, 2] == 2).all()  # the agent that stays, stays
    got = Counter(map(tuple, out))
    for arrangement, p in law.items():
        assert abs(got[arrangement] / draws - p) < 0.006, (arrangement, got[arrangement] / draws, p)
    assert set(got) <= set(law)


def test_moves_keep_dead_agents_and_a_full_grid_still() -> None:
    grid = Grid(2, 2)
    cell = jnp.array([0, 1, 2, 3])
    out = grid.move_to_empty(jax.random.key(0), cell, jnp.ones(4, bool), jnp.ones(4, bool))
    np.testing.assert_array_equal(out, cell)  # no empty cell: nobody moves
    out = grid.move_to_empty(
        jax.random.key(0), cell, jnp.ones(4, bool), jnp.array([True, False, True, True])
    )
    alive = np.asarray(out)[[0, 2, 3]]
    assert int(out[1]) == 1 and len(set(alive.tolist())) == 3  # the dead agent is not moved
    # No living mover (only a dead agent asks): nothing moves, alone or in a batch.
    cell, moving = jnp.array([0, 1, 2]), jnp.array([False, True, False])
    alive = jnp.array([True, False, True])
    out = grid.move_to_empty(jax.random.key(0), cell, moving, alive)
    np.testing.assert_array_equal(out, cell)
    move = jax.vmap(lambda k, m: grid.move_to_empty(k, cell, m, alive))
    out = move(jax.random.split(jax.random.key(0), 2), jnp.stack([moving, jnp.ones(3, bool)]))
    np.testing.assert_array_equal(out[0], cell)  # beside a replicate whose agents move
    a, dead, b = out[1].tolist()  # both living agents moved (a dead agent's cell is empty)
    assert dead == 1 and a != 0 and b != 2 and a != b
