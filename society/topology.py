"""Who can interact with whom: network topologies as edge arrays.

A ``Topology`` is the canonical edge array of a simple graph (each edge once, ``u < v``,
sorted, no self-loops or duplicates). Scenarios author it as a networkx graph, an edge-list
file or a named generator (``make_topology``); the engine reads it through
``sim_core.graph.Neighbours`` for vectorised neighbour operations. Topologies are
immutable: ``rewire`` returns a new one, so the edge array, the compiled neighbours and
``to_networkx()`` can never disagree.

The generators build edge arrays directly with vectorised numpy (no Python loop over nodes
or edges), so populations of a million agents are wired in well under a second; a networkx
graph is built only when ``to_networkx`` is asked for. The random generators follow
networkx's models (see each ``_gen_*`` docstring for where they differ and why).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

import networkx as nx
import numpy as np

from sim_core.errors import ConfigError
from sim_core.graph import Neighbours

# Neighbours stores ids as int32 and edge keys are u * n + v in int64.
_MAX_N = 2**31 - 1
# Dense generators (complete, layered-dag) refuse to build more edges than this: 5e7 edges
# are 800 MB as int64 pairs, and ``neighbours()`` adds 400 MB of int32 src/dst plus a padded
# table of the same size. 10,000 agents all-to-all is 49,995,000 edges, just under the limit.
_MAX_DENSE_EDGES = 50_000_000
_MAX_COMPLETE = 10_000
# Barabasi-Albert: nodes are attached in batches of at most this fraction of the current
# size, each batch sampling targets from the degrees at the batch start (see _gen_scale_free).
_BA_BATCH_FRACTION = 1 / 64
# Random-regular: switch rounds before a fresh pairing is drawn, and fresh pairings before
# giving up. Sparse graphs finish in a few rounds; only tiny dense ones (k close to n) restart.
_RR_ROUNDS = 200
_RR_RESTARTS = 1000

NAMES = (
    "complete",
    "cycle",
    "ring",
    "lattice",
    "random-regular",
    "erdos-renyi",
    "small-world",
    "scale-free",
    "stochastic-block",
    "layered-dag",
)
NEIGHBOURHOODS = ("von-neumann", "moore")
DIRECTIONS = ("both", "out", "in")


def _check_int(name: str, value: Any, lo: int, hi: int | None = None, why: str = "") -> int:
    """``value`` as an int in ``[lo, hi]``; a one-line TypeError/ValueError naming ``name``."""
    if isinstance(value, bool) or not isinstance(value, int | np.integer):
        raise TypeError(f"{name} must be an integer, got {type(value).__name__} {value!r}")
    value = int(value)
    if value < lo or (hi is not None and value > hi):
        accepted = f"in [{lo}, {hi}]" if hi is not None else f">= {lo}"
        raise ValueError(f"{name} must be {accepted}{why}, got {value}")
    return value


def _is_file(path: Path) -> bool:
    """``path.is_file()``, False also for a name the OS refuses (too long, a NUL byte)."""
    try:
        return path.is_file()
    except (OSError, ValueError):
        return False


def _check_prob(name: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float | np.integer | np.floating):
        raise TypeError(f"{name} must be a number in [0, 1], got {type(value).__name__} {value!r}")
    value = float(value)
    if not 0.0 <= value <= 1.0:
        raise ValueError(f"{name} must be in [0, 1], got {value}")
    return value


def _as_pairs(edges: Any, what: str) -> np.ndarray:
    """An ``(E, 2)`` int64 array (a fresh copy) from any integer array-like."""
    arr = np.asarray(edges)
    if arr.size == 0:
        return np.empty((0, 2), dtype=np.int64)
    if arr.dtype.kind not in "iu":
        raise TypeError(f"{what} must be an integer array of shape (E, 2), got dtype {arr.dtype}")
    if arr.ndim != 2 or arr.shape[1] != 2:
        raise ValueError(f"{what} must have shape (E, 2), got {arr.shape}")
    return np.array(arr, dtype=np.int64)


def _pair_keys(n: int, pairs: np.ndarray, directed: bool, what: str) -> np.ndarray:
    """Validated edge keys ``u * n + v`` (``u < v``; undirected pairs are oriented first)."""
    u, v = pairs[:, 0], pairs[:, 1]
    if pairs.size:
        lo, hi = int(pairs.min()), int(pairs.max())
        if lo < 0 or hi >= n:
            bad = pairs[((u < 0) | (u >= n) | (v < 0) | (v >= n)).argmax()]
            raise ValueError(
                f"{what}: node ids must lie in [0, {n}), got edge {tuple(bad.tolist())}"
            )
    loops = u == v
    if loops.any():
        raise ValueError(
            f"{what}: self-loops are not allowed, got edge {tuple(pairs[loops.argmax()].tolist())}"
        )
    back = u > v
    if not back.any():
        return u * n + v
    if directed:
        raise ValueError(
            f"{what}: directed edges must go from a lower to a higher id (ids are a "
            f"topological order), got {tuple(pairs[back.argmax()].tolist())}"
        )
    return np.minimum(u, v) * n + np.maximum(u, v)


def _sorted_unique(keys: np.ndarray, n: int, what: str) -> np.ndarray:
    """``keys`` sorted; a ValueError naming the first edge that appears twice."""
    if keys.size > 1 and not np.all(keys[1:] > keys[:-1]):
        keys = np.sort(keys)
        dup = keys[1:] == keys[:-1]
        if dup.any():
            k = int(keys[1:][dup.argmax()])
            raise ValueError(f"{what}: edge {(k // n, k % n)} appears more than once")
    return keys


def _edges_from_keys(keys: np.ndarray, n: int) -> np.ndarray:
    u = keys // n
    return np.stack([u, keys - u * n], axis=1)


def _undirected_keys(n: int, u: np.ndarray, v: np.ndarray) -> np.ndarray:
    return np.minimum(u, v) * n + np.maximum(u, v)


def _in_sorted(sorted_keys: np.ndarray, keys: np.ndarray) -> np.ndarray:
    """Membership of ``keys`` in the sorted array ``sorted_keys`` (vectorised)."""
    if sorted_keys.size == 0:
        return np.zeros(keys.shape, dtype=bool)
    # searchsorted with sorted needles walks the haystack in order: ~6x faster at 1e5+
    order = np.argsort(keys)
    pos = np.minimum(np.searchsorted(sorted_keys, keys[order]), sorted_keys.size - 1)
    found = np.empty(keys.shape, dtype=bool)
    found[order] = sorted_keys[pos] == keys[order]
    return found


def _unique_sorted(values: np.ndarray) -> np.ndarray:
    """Sorted distinct values (sort-based: numpy 2's hash-based ``np.unique`` is ~5x slower
    on millions of int64 keys)."""
    out = np.sort(values)
    keep = np.ones(out.shape, dtype=bool)
    keep[1:] = out[1:] != out[:-1]
    return out[keep]


def _first_occurrence(values: np.ndarray) -> np.ndarray:
    """Mask that is True at the first occurrence of each value (vectorised)."""
    order = np.argsort(values, kind="stable")
    ordered = values[order]
    starts = np.ones(values.shape, dtype=bool)
    starts[1:] = ordered[1:] != ordered[:-1]
    first = np.zeros(values.shape, dtype=bool)
    first[order[starts]] = True
    return first


@dataclass(frozen=True, eq=False)
class Topology:
    """A simple graph on agents ``0..n-1`` as a canonical edge array.

    ``edges`` is ``(E, 2)`` int64, each edge once with ``u < v``, sorted, without self-loops
    or duplicates (undirected input is oriented and sorted here; duplicates and self-loops
    are errors). ``directed=True`` is for pipelines (layered DAGs): an edge ``u -> v``
    still has ``u < v``, i.e. agent ids are a topological order, which makes every directed
    topology acyclic by construction. The array is read-only; equality compares all fields.
    """

    n: int
    edges: np.ndarray
    directed: bool = False
    name: str = "custom"
    _cache: dict = field(default_factory=dict, init=False, repr=False)

    def __post_init__(self) -> None:
        n = _check_int("n", self.n, 0, _MAX_N)
        if not isinstance(self.directed, bool):
            raise TypeError(f"directed must be a bool, got {type(self.directed).__name__}")
        if not isinstance(self.name, str):
            raise TypeError(f"name must be a str, got {type(self.name).__name__}")
        pairs = _as_pairs(self.edges, "edges")
        raw = _pair_keys(n, pairs, self.directed, "edges")
        keys = _sorted_unique(raw, n, "edges")
        # input already canonical (as from the generators): keep it, skip the division
        canonical = keys is raw and bool(np.all(pairs[:, 0] < pairs[:, 1]))
        edges = pairs if canonical else _edges_from_keys(keys, n)
        edges.flags.writeable = False
        keys.flags.writeable = False
        object.__setattr__(self, "n", n)
        object.__setattr__(self, "edges", edges)
        self._cache["keys"] = keys

    @classmethod
    def _from_generator_keys(cls, n: int, keys: np.ndarray, name: str) -> Topology:
        """An undirected topology from a generator's sorted distinct keys ``u * n + v``
        (``u < v``), without the defensive copy and re-derived keys of ``__init__`` (at 2e7
        edges those cost ~0.8 GB at peak). Keys that are not strictly increasing take the
        validating constructor."""
        if keys.size > 1 and not np.all(keys[1:] > keys[:-1]):
            return cls(n, _edges_from_keys(keys, n), False, name)
        edges = np.empty((keys.size, 2), dtype=np.int64)
        np.floor_divide(keys, n, out=edges[:, 0])
        np.multiply(edges[:, 0], n, out=edges[:, 1])
        np.subtract(keys, edges[:, 1], out=edges[:, 1])
        edges.flags.writeable = False
        keys.flags.writeable = False
        topo = object.__new__(cls)
        for attr, value in (
            ("n", int(n)),
            ("edges", edges),
            ("directed", False),
            ("name", name),
            ("_cache", {"keys": keys}),
        ):
            object.__setattr__(topo, attr, value)
        return topo

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Topology):
            return NotImplemented
        return (
            self.n == other.n
            and self.directed == other.directed
            and self.name == other.name
            and np.array_equal(self.edges, other.edges)
        )

    def __hash__(self) -> int:
        # The edges are read-only, so a graph can key a cache of what is built from it. Cheap
        # and consistent with ==, which tells apart graphs of the same size.
        return hash((self.n, self.directed, self.name, len(self.edges)))

    def __repr__(self) -> str:
        kind = "directed" if self.directed else "undirected"
        return f"Topology(name={self.name!r}, n={self.n}, edges={len(self.edges)}, {kind})"

    def __reduce__(self):  # pickle the fields, not the caches (they rebuild on demand)
        return (Topology, (self.n, np.array(self.edges), self.directed, self.name))

    # ----------------------------------------------------------------- neighbour views
    def _view(self, direction: str) -> str:
        """The cache slot of ``direction``: all three coincide on an undirected topology."""
        if direction not in DIRECTIONS:
            raise ValueError(f"direction must be one of {DIRECTIONS}, got {direction!r}")
        return direction if self.directed else "both"

    def _pairs(self, direction: str) -> tuple[np.ndarray, np.ndarray]:
        u, v = self.edges[:, 0], self.edges[:, 1]
        if self.directed and direction == "out":
            return u, v
        if self.directed and direction == "in":
            return v, u
        return np.concatenate([u, v]), np.concatenate([v, u])

    def neighbours(self, direction: str = "both") -> Neighbours:
        """Compiled adjacency for vectorised neighbour ops (cached per direction).

        ``"both"`` (the default) lists every edge in both directions, so on a DAG it gives
        predecessors and successors together, as undirected operations (gossip, imitation)
        want. On a directed topology ``"out"`` gives successors and ``"in"`` predecessors;
        on an undirected one all three are the same.
        """
        key = ("neighbours", self._view(direction))
        if key not in self._cache:
            if not self.directed:  # canonical edges: the lean builder, same result
                u, v = self.edges[:, 0], self.edges[:, 1]
                self._cache[key] = Neighbours.from_undirected(u, v, self.n)
            else:
                src, dst = self._pairs(direction)
                self._cache[key] = Neighbours.from_edges(src, dst, self.n)
        return self._cache[key]

    def neighbours_of(self, agent: int, direction: str = "both") -> np.ndarray:
        """Sorted neighbour ids of one agent (see ``neighbours`` for ``direction``)."""
        agent = _check_int("agent", agent, 0, self.n - 1)
        key = ("csr", self._view(direction))
        if key not in self._cache:
            nb = self.neighbours(direction)
            self._cache[key] = (np.asarray(nb.offsets), np.asarray(nb.dst, dtype=np.int64))
        offsets, dst = self._cache[key]
        return dst[offsets[agent] : offsets[agent + 1]].copy()

    @property
    def degree(self) -> np.ndarray:
        """Number of neighbours of each agent (in + out degree for a directed topology)."""
        if "degree" not in self._cache:
            deg = np.bincount(self.edges.ravel(), minlength=self.n).astype(np.int64)
            deg.flags.writeable = False
            self._cache["degree"] = deg
        return self._cache["degree"]

    # ---------------------------------------------------------------------- rewiring
    def rewire(self, remove: Any, add: Any) -> Topology:
        """A new topology with the ``remove`` edges taken out, then the ``add`` edges put in.

        Both are ``(E, 2)`` integer arrays (empty is fine). Undirected pairs may be given
        either way round. Removing a missing edge, adding a present one, listing an edge
        twice, self-loops and ids outside ``[0, n)`` are errors, so a rewiring event can
        never silently do less than it says. Run in O(E) without a Python loop over edges.
        """
        n, keys = self.n, self._cache["keys"]
        rem = _sorted_unique(
            _pair_keys(n, _as_pairs(remove, "remove"), self.directed, "remove"), n, "remove"
        )
        missing = ~_in_sorted(keys, rem)
        if missing.any():
            k = int(rem[missing.argmax()])
            raise ValueError(f"remove: edge {(k // n, k % n)} is not in the topology")
        kept = np.delete(keys, np.searchsorted(keys, rem))
        new = _sorted_unique(_pair_keys(n, _as_pairs(add, "add"), self.directed, "add"), n, "add")
        present = _in_sorted(kept, new)
        if present.any():
            k = int(new[present.argmax()])
            raise ValueError(f"add: edge {(k // n, k % n)} is already in the topology")
        merged = np.insert(kept, np.searchsorted(kept, new), new)
        return Topology(n, _edges_from_keys(merged, n), self.directed, self.name)

    # ------------------------------------------------------------ networkx and files
    def to_networkx(self) -> nx.Graph | nx.DiGraph:
        """The same graph in networkx (nodes ``0..n-1``; ``graph['name']`` is ``name``)."""
        g = nx.DiGraph() if self.directed else nx.Graph()
        g.graph["name"] = self.name
        g.add_nodes_from(range(self.n))
        g.add_edges_from(self.edges.tolist())
        return g

    @classmethod
    def from_networkx(cls, g: nx.Graph) -> Topology:
        """A topology from a networkx ``Graph`` or acyclic ``DiGraph``.

        Nodes are relabelled ``0..n-1`` in sorted order, so agent ``i`` is
        ``sorted(g.nodes)[i]`` (integer-labelled graphs keep their labels when they are
        ``0..n-1``). A DiGraph must be acyclic; its nodes are numbered by
        ``nx.lexicographical_topological_sort`` (the sorted order whenever that is already a
        topological order), since directed ids must be a topological order. The name is
        ``g.graph['name']`` when set. Iterating the edges is a Python loop, unavoidable for
        data held in networkx dicts; large graphs should come from ``make_topology``.
        """
        if not isinstance(g, nx.Graph):
            raise TypeError(f"g must be a networkx Graph or DiGraph, got {type(g).__name__}")
        if g.is_multigraph():
            raise ValueError(
                "g must not be a multigraph; collapse parallel edges with nx.Graph(g) first"
            )
        loops = list(nx.selfloop_edges(g))
        if loops:
            raise ValueError(f"g has self-loops (first at node {loops[0][0]!r}); remove them first")
        directed = g.is_directed()
        try:
            if directed:
                order = list(nx.lexicographical_topological_sort(g))
            else:
                order = sorted(g.nodes)
        except nx.NetworkXUnfeasible:
            raise ValueError(
                "a directed g must be acyclic (directed topologies are DAGs)"
            ) from None
        except TypeError:
            raise TypeError(
                "g's node labels must be mutually sortable; relabel with "
                "nx.convert_node_labels_to_integers(g) first"
            ) from None
        index = {node: i for i, node in enumerate(order)}
        flat = np.fromiter(
            (index[x] for e in g.edges for x in e[:2]),
            dtype=np.int64,
            count=2 * g.number_of_edges(),
        )
        name = g.graph.get("name") or "custom"
        return cls(len(order), flat.reshape(-1, 2), directed, str(name))

    @classmethod
    def from_edgelist(cls, path: str | Path, n: int | None = None) -> Topology:
        """An undirected topology from a text file of ``u v`` lines.

        Ids are non-negative integers separated by whitespace; ``#`` starts a comment;
        blank lines are skipped. An edge may be listed once or in both directions (repeats
        collapse). ``n`` defaults to the largest id + 1; when given, ids must be below it
        (agents without edges are isolated). A malformed line, a self-loop or an id out of
        range is a ValueError naming ``file:line``.
        """
        path = Path(path)
        if not _is_file(path):
            raise FileNotFoundError(f"edge-list file {str(path)!r} does not exist")
        if n is not None:
            n = _check_int("n", n, 0, _MAX_N)
        limit = n if n is not None else _MAX_N  # ids >= 2**31 - 1 would overflow the edge keys
        pairs: list[int] = []
        try:
            # utf-8-sig: a byte-order mark (Windows editors) is not part of the first id
            with path.open(encoding="utf-8-sig") as f:
                for lineno, line in enumerate(f, 1):
                    tokens = line.split("#", 1)[0].split()
                    if not tokens:
                        continue
                    try:
                        if len(tokens) != 2 or not all(t.isascii() and t.isdigit() for t in tokens):
                            raise ValueError
                        u, v = int(tokens[0]), int(tokens[1])
                        if u == v or max(u, v) >= limit:
                            raise ValueError
                    except ValueError:
                        shown = line.strip()
                        shown = shown if len(shown) <= 80 else shown[:80] + "..."
                        raise ValueError(
                            f"{path}:{lineno}: expected two distinct non-negative integer ids 'u v'"
                            + f" below {f'n={n}' if n is not None else limit}"
                            + f", got {shown!r}"
                        ) from None
                    pairs += (u, v)
        except UnicodeDecodeError as exc:
            raise ValueError(
                f"{path}: not UTF-8 text ({exc.reason}); an edge list is lines 'u v'"
            ) from None
        except OSError as exc:
            raise ValueError(
                f"edge-list file {str(path)!r} cannot be read: {exc.strerror or exc}"
            ) from None
        arr = np.array(pairs, dtype=np.int64).reshape(-1, 2)
        size = n if n is not None else (int(arr.max()) + 1 if arr.size else 0)
        keys = _unique_sorted(_undirected_keys(size, arr[:, 0], arr[:, 1]))
        return cls(size, _edges_from_keys(keys, size), False, path.name)

    # ---------------------------------------------------------------- serialisation
    def to_dict(self) -> dict:
        """Plain JSON-ready fields. At millions of edges prefer saving ``edges`` with numpy."""
        return {
            "n": self.n,
            "directed": self.directed,
            "name": self.name,
            "edges": self.edges.tolist(),
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Topology:
        """Inverse of ``to_dict`` (``edges`` may also be a numpy array)."""
        if not isinstance(d, Mapping):
            raise TypeError(f"from_dict expects a mapping, got {type(d).__name__}")
        expected = {"n", "directed", "name", "edges"}
        if set(d) != expected:
            raise ValueError(
                f"topology dict must have exactly the keys {sorted(expected)}, got {sorted(d)}"
            )
        return cls(d["n"], np.asarray(d["edges"]), d["directed"], d["name"])


# ------------------------------------------------------------------------ generators
def _gen_complete(n: int) -> np.ndarray:
    if n > _MAX_COMPLETE:
        raise ValueError(
            f"agents must be <= {_MAX_COMPLETE} for 'complete' (n(n-1)/2 edges: {_MAX_COMPLETE} "
            "agents already take ~2 GB with neighbours()), got "
            f"{n}; model all-to-all interaction with population-wide means instead"
        )
    u, v = np.triu_indices(n, 1)
    return u.astype(np.int64) * n + v


def _gen_cycle(n: int) -> np.ndarray:
    u = np.arange(n, dtype=np.int64)
    return np.sort(_undirected_keys(n, u, (u + 1) % n))


def _gen_lattice(n: int, neighbourhood: str, periodic: bool) -> np.ndarray:
    """Square lattice, node ``r * L + c``; torus when ``periodic``, else fixed boundaries."""
    side = math.isqrt(n)
    if side * side != n:
        raise ValueError(f"agents must be a perfect square for 'lattice' (side x side), got {n}")
    if periodic and side < 3:
        raise ValueError(f"agents must be >= 9 for a periodic 'lattice' (side >= 3), got {n}")
    steps = [(0, 1), (1, 0)] + ([(1, 1), (1, -1)] if neighbourhood == "moore" else [])
    r, c = np.divmod(np.arange(n, dtype=np.int64), side)
    keys = []
    for dr, dc in steps:  # 2 or 4 directions, each vectorised over all nodes
        rr, cc = r + dr, c + dc
        if periodic:
            keep = slice(None)
            rr, cc = rr % side, cc % side
        else:
            keep = (rr < side) & (cc >= 0) & (cc < side)
        keys.append(_undirected_keys(n, (r * side + c)[keep], (rr * side + cc)[keep]))
    return np.sort(np.concatenate(keys))


def _gen_random_regular(n: int, k: int, rng: np.random.Generator) -> np.ndarray:
    """Uniform-ish random k-regular graph: pairing model plus repair by edge switches.

    Stubs (each node k times) are paired at random. The few self-loops and repeated
    pairs (about (k^2 - 1) / 4 of them, independent of n) are then switched away: a bad
    edge (a, b) and a random good edge (c, d) become (a, c) and (b, d), which keeps every
    degree, accepted only when both new edges are new. Each round handles all bad edges at
    once; a pairing that stalls (only tiny dense graphs) is redrawn. Like networkx's
    Steger-Wormald sampler this is asymptotically, not exactly, uniform.
    """
    if k == 0:
        return np.empty(0, dtype=np.int64)
    for _ in range(_RR_RESTARTS):
        # Stubs as int32 shuffled in place: the same draws as rng.permutation of the int64
        # array (shuffling depends only on the length), at a quarter of the peak memory.
        stubs = np.repeat(np.arange(n, dtype=np.int32), k)
        rng.shuffle(stubs)
        keys = np.minimum(stubs[0::2], stubs[1::2]).astype(np.int64)
        keys *= n
        keys += np.maximum(stubs[0::2], stubs[1::2])
        del stubs
        keys.sort()
        for _ in range(_RR_ROUNDS):
            bad_mask = keys % (n + 1) == 0  # self-loop (a, a) has key a * (n + 1)
            bad_mask[1:] |= keys[1:] == keys[:-1]
            bad = np.flatnonzero(bad_mask)
            if bad.size == 0:
                return keys
            partner = rng.integers(0, keys.size, size=bad.size)
            a, b = np.divmod(keys[bad], n)
            c, d = np.divmod(keys[partner], n)
            flip = rng.random(bad.size) < 0.5
            c, d = np.where(flip, d, c), np.where(flip, c, d)
            new1, new2 = _undirected_keys(n, a, c), _undirected_keys(n, b, d)
            ok = ~bad_mask[partner] & (a != c) & (b != d)
            ok &= ~_in_sorted(keys, new1) & ~_in_sorted(keys, new2) & _first_occurrence(partner)
            # two switches must not create the same edge: drop any whose new key is shared
            cand = np.flatnonzero(ok)
            both = np.concatenate([new1[cand], new2[cand]])
            uniq, counts = np.unique(both, return_counts=True)
            shared = uniq[counts > 1]
            acc = cand[~(np.isin(new1[cand], shared) | np.isin(new2[cand], shared))]
            keys = np.delete(keys, np.concatenate([bad[acc], partner[acc]]))
            new = np.sort(np.concatenate([new1[acc], new2[acc]]))
            keys = np.insert(keys, np.searchsorted(keys, new), new)
    raise RuntimeError(f"random-regular: no simple {k}-regular graph found on {n} nodes")


def _sample_subset(total: int, size: int, rng: np.random.Generator) -> np.ndarray:
    """Sorted uniformly random ``size``-subset of ``range(total)`` without an O(total) array.

    Draws with replacement until enough distinct values are seen, then drops a uniformly
    random surplus; by symmetry the set is uniform. Dense requests sample the complement.
    """
    if size > total // 2:
        excluded = _sample_subset(total, total - size, rng)
        return np.setdiff1d(np.arange(total, dtype=np.int64), excluded, assume_unique=True)
    got = np.empty(0, dtype=np.int64)
    while got.size < size:
        extra = size - got.size
        draw = rng.integers(0, total, size=extra + extra // 16 + 16, dtype=np.int64)
        got = _unique_sorted(np.concatenate([got, draw]))
    if got.size > size:
        got = np.delete(got, rng.choice(got.size, size=got.size - size, replace=False))
    return got


def _upper_pairs(m: int, t: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Row-major index ``t`` of the strict upper triangle of an m x m matrix -> ``(u, v)``.

    Pairs before row u: S(u) = u (2m - u - 1) / 2; u is the largest with S(u) <= t, found
    from the quadratic formula and corrected by +-1 for floating-point rounding.
    """
    b = 2.0 * m - 1.0
    u = np.floor((b - np.sqrt(np.maximum(b * b - 8.0 * t, 0.0))) / 2.0).astype(np.int64)
    u = np.clip(u, 0, max(m - 2, 0))
    for _ in range(3):
        u -= (u * (2 * m - u - 1) // 2 > t).astype(np.int64)
        u += ((u + 1) * (2 * m - u - 2) // 2 <= t).astype(np.int64)
    start = u * (2 * m - u - 1) // 2
    return u, t - start + u + 1


def _gnp_block_keys(
    n: int, lo: int, hi: int, lo2: int, hi2: int, p: float, rng: np.random.Generator
) -> np.ndarray:
    """Edge keys of G(n, p) restricted to block [lo, hi) x block [lo2, hi2) (same or later)."""
    if lo == lo2:
        m = hi - lo
        total = m * (m - 1) // 2
    else:
        total = (hi - lo) * (hi2 - lo2)
    if total == 0 or p == 0.0:
        return np.empty(0, dtype=np.int64)
    chosen = _sample_subset(total, int(rng.binomial(total, p)), rng)
    if lo == lo2:
        u, v = _upper_pairs(hi - lo, chosen)
    else:
        u, v = np.divmod(chosen, hi2 - lo2)
    return (u + lo) * n + (v + lo2)


def _gen_small_world(n: int, k: int, p: float, rng: np.random.Generator) -> np.ndarray:
    """Watts-Strogatz as in networkx: ring of degree k, each edge (u, u + j) rewired to
    (u, w) with probability p, w uniform, no self-loops or duplicates; an edge whose u
    already touches every node keeps its original end (networkx's ``degree(u) >= n - 1``).

    All rewired edges draw w at once and conflicts are redrawn in later rounds (a handful),
    so an edge is checked against the graph as of its round rather than edge by edge in
    networkx's order; the only effect is on which of two edges that want the same new
    pair gets it, a 1/n-order event.
    """
    half = k // 2
    u = np.tile(np.arange(n, dtype=np.int64), half)  # order (j, u) as in networkx
    v = (u + np.repeat(np.arange(1, half + 1, dtype=np.int64), n)) % n
    orig = _undirected_keys(n, u, v)
    keys = np.sort(orig)
    deg = np.full(n, k, dtype=np.int64)
    pending = np.flatnonzero(rng.random(u.size) < p)
    while pending.size:
        pending = pending[deg[u[pending]] < n - 1]
        pu = u[pending]
        w = rng.integers(0, n, size=pending.size)
        new = _undirected_keys(n, pu, w)
        ok = (w != pu) & ~_in_sorted(keys, new)
        ok[ok] = _first_occurrence(new[ok])
        acc = pending[ok]
        keys = np.delete(keys, np.searchsorted(keys, np.sort(orig[acc])))
        added = np.sort(new[ok])
        keys = np.insert(keys, np.searchsorted(keys, added), added)
        deg -= np.bincount(v[acc], minlength=n)
        deg += np.bincount(w[ok], minlength=n)
        pending = pending[~ok]
    return keys


def _gen_scale_free(n: int, m: int, rng: np.random.Generator) -> np.ndarray:
    """Barabasi-Albert as in networkx: a star on m + 1 nodes, then each new node links to m
    distinct nodes drawn with probability proportional to degree (from the list of nodes
    repeated once per edge end).

    Vectorised approximation: nodes join in batches of at most ``_BA_BATCH_FRACTION`` of
    the current size (batches of 1 for the first 64 nodes, about 900 batches for 1e6), and
    a batch draws from the degrees as of its start, so nodes of one batch never link to
    each other and do not see each other's new edges. That shifts each probability by
    less than the batch fraction (1.6%) and only touches young, low-degree nodes; the
    degree tail (hubs) follows networkx's generator, as the tests check.
    """
    total_edges = m * (n - m)
    rep = np.empty(2 * total_edges, dtype=np.int64)  # node repeated once per edge end
    src = np.empty(total_edges, dtype=np.int64)
    dst = np.empty(total_edges, dtype=np.int64)
    src[:m], dst[:m] = 0, np.arange(1, m + 1)
    rep[:m], rep[m : 2 * m] = 0, np.arange(1, m + 1)
    filled, done, s = 2 * m, m, m + 1
    while s < n:  # loop over batches (O(log n / fraction)), each vectorised
        c = min(n - s, max(1, int(s * _BA_BATCH_FRACTION)))
        t = rep[rng.integers(0, filled, size=(c, m))]
        while True:  # redraw repeated targets within a node's row until all m are distinct
            t.sort(axis=1)
            dup = np.zeros(t.shape, dtype=bool)
            dup[:, 1:] = t[:, 1:] == t[:, :-1]
            n_dup = int(dup.sum())
            if n_dup == 0:
                break
            t[dup] = rep[rng.integers(0, filled, size=n_dup)]
        new = np.repeat(np.arange(s, s + c, dtype=np.int64), m)
        src[done : done + c * m], dst[done : done + c * m] = new, t.ravel()
        rep[filled : filled + c * m], rep[filled + c * m : filled + 2 * c * m] = t.ravel(), new
        filled, done, s = filled + 2 * c * m, done + c * m, s + c
    return np.sort(_undirected_keys(n, src, dst))


def _gen_stochastic_block(
    n: int, blocks: list[int], p_in: float, p_out: float, rng: np.random.Generator
) -> np.ndarray:
    """Blocks of consecutive ids; each pair is an edge with p_in inside a block, p_out across."""
    starts = np.concatenate([[0], np.cumsum(blocks)]).tolist()
    parts = []
    for i in range(len(blocks)):  # loop over block pairs, each pair sampled vectorised
        for j in range(i, len(blocks)):
            p = p_in if i == j else p_out
            parts.append(
                _gnp_block_keys(n, starts[i], starts[i + 1], starts[j], starts[j + 1], p, rng)
            )
    return np.sort(np.concatenate(parts))


def _gen_layered_dag(n: int, layers: int) -> np.ndarray:
    """``layers`` consecutive id ranges (sizes differ by at most one, larger first); every
    node links to every node of the next layer."""
    sizes = np.full(layers, n // layers, dtype=np.int64)
    sizes[: n % layers] += 1
    total = int((sizes[:-1] * sizes[1:]).sum())
    if total > _MAX_DENSE_EDGES:
        raise ValueError(
            f"layers must split {n} agents into layers with at most {_MAX_DENSE_EDGES} edges "
            f"between consecutive layers in total, got layers={layers} ({total} edges)"
        )
    starts = np.concatenate([[0], np.cumsum(sizes)])
    layer = np.repeat(np.arange(layers), sizes)
    senders = np.arange(starts[-2], dtype=np.int64)  # every node but the last layer
    count = sizes[layer[senders] + 1]
    u = np.repeat(senders, count)
    offset = np.arange(total, dtype=np.int64) - np.repeat(np.cumsum(count) - count, count)
    v = np.repeat(starts[layer[senders] + 1], count) + offset
    return u * n + v


def make_topology(
    name: str,
    agents: int,
    *,
    degree: int = 4,
    neighbourhood: str = "von-neumann",
    periodic: bool = True,
    rewire: float = 0.1,
    blocks: list[int] | None = None,
    p_in: float = 0.1,
    p_out: float = 0.01,
    layers: int | None = None,
    seed: int = 0,
) -> Topology:
    """Build a named topology on ``agents`` nodes (same seed, same edges).

    Names and the parameters they use: ``complete``; ``cycle`` (alias ``ring``);
    ``lattice`` (``agents`` a perfect square; ``neighbourhood`` "von-neumann" (4) or
    "moore" (8); ``periodic`` torus or fixed boundaries); ``random-regular`` (every node
    has ``degree`` neighbours; agents * degree even); ``erdos-renyi`` (G(n, p) with mean
    degree ``degree``, p = degree / (agents - 1)); ``small-world`` (Watts-Strogatz from a
    ring of even ``degree``, rewiring probability ``rewire``); ``scale-free``
    (Barabasi-Albert with m = degree // 2 links per new node, mean degree ~ ``degree``);
    ``stochastic-block`` (``blocks`` sizes summing to ``agents``, ``p_in``, ``p_out``);
    ``layered-dag`` (``layers`` layers, each node linked to all of the next; directed).
    Any other string naming an existing file is read with ``Topology.from_edgelist``
    (``agents`` is its ``n``). Parameters a name does not use are checked but ignored.
    """
    if not isinstance(name, str):
        raise TypeError(f"name must be a str, got {type(name).__name__}")
    n = _check_int("agents", agents, 1, _MAX_N)
    if neighbourhood not in NEIGHBOURHOODS:
        raise ValueError(f"neighbourhood must be one of {NEIGHBOURHOODS}, got {neighbourhood!r}")
    if not isinstance(periodic, bool):
        raise TypeError(f"periodic must be a bool, got {type(periodic).__name__}")
    rewire = _check_prob("rewire", rewire)
    p_in, p_out = _check_prob("p_in", p_in), _check_prob("p_out", p_out)
    seed = _check_int("seed", seed, 0)
    rng = np.random.default_rng(seed)

    def k_in(lo: int, why: str = "") -> int:
        return _check_int("degree", degree, lo, n - 1, f" (degree < agents{why})")

    if name == "complete":
        keys = _gen_complete(n)
    elif name in ("cycle", "ring"):
        name = "cycle"
        if n < 3:
            raise ValueError(f"agents must be >= 3 for 'cycle', got {n}")
        keys = _gen_cycle(n)
    elif name == "lattice":
        keys = _gen_lattice(n, neighbourhood, periodic)
    elif name == "random-regular":
        k = k_in(0)
        if (n * k) % 2:
            raise ValueError(f"agents * degree must be even for 'random-regular', got {n} * {k}")
        keys = _gen_random_regular(n, k, rng)
    elif name == "erdos-renyi":
        k = k_in(0)
        keys = _gnp_block_keys(n, 0, n, 0, n, k / (n - 1) if n > 1 else 0.0, rng)
    elif name == "small-world":
        k = k_in(2)
        if k % 2:
            raise ValueError(
                f"degree must be even for 'small-world' (k/2 ring neighbours each side), got {k}"
            )
        keys = _gen_small_world(n, k, rewire, rng)
    elif name == "scale-free":
        k = k_in(2, ", m = degree // 2 >= 1")
        keys = _gen_scale_free(n, k // 2, rng)
    elif name == "stochastic-block":
        if (
            blocks is None
            or isinstance(blocks, str | bytes)
            or not hasattr(blocks, "__len__")
            or len(blocks) == 0
        ):
            raise ValueError(
                f"blocks must be a non-empty list of block sizes for 'stochastic-block', got {blocks!r}"
            )
        sizes = [_check_int(f"blocks[{i}]", b, 1) for i, b in enumerate(blocks)]
        if sum(sizes) != n:
            raise ValueError(f"blocks must sum to agents={n}, got sum {sum(sizes)}")
        keys = _gen_stochastic_block(n, sizes, p_in, p_out, rng)
    elif name == "layered-dag":
        if layers is None:
            raise ValueError("layers must be given for 'layered-dag' (an integer in [1, agents])")
        keys = _gen_layered_dag(n, _check_int("layers", layers, 1, n))
        return Topology(n, _edges_from_keys(keys, n), True, name)
    elif _is_file(Path(name)):
        return Topology.from_edgelist(name, n=n)
    else:
        raise ValueError(
            f"unknown topology name {name!r}; accepted: {', '.join(NAMES)}, or a path to an edge-list file"
        )
    return Topology._from_generator_keys(n, keys, name)


__all__ = ["Topology", "make_topology", "NAMES", "NEIGHBOURHOODS"]


def topology_of(p: Any) -> Topology:
    """The graph of a study's ``GraphFields`` on ``p.population`` nodes, built once per those
    values (an edge-list file edited since is read again). They are user input: a bad
    combination is a one-line ConfigError that names the parameters."""
    file = Path(p.graph)
    stamp = (file.stat().st_mtime_ns, file.stat().st_size) if file.is_file() else None
    return _topology(p.graph, p.population, p.degree, p.neighbourhood, p.periodic, p.rewire,
                     p.graph_seed, stamp)  # fmt: skip


@lru_cache(maxsize=4)
def _topology(graph, n, degree, neighbourhood, periodic, rewire, seed, stamp) -> Topology:  # noqa: ANN001
    try:
        topo = make_topology(graph, n, degree=degree, neighbourhood=neighbourhood,
                             periodic=periodic, rewire=rewire, seed=seed)  # fmt: skip
        if topo.n != n:
            raise ValueError(f"the graph has {topo.n} nodes")
    except (TypeError, ValueError) as exc:  # the topology calls N 'agents'
        msg = str(exc).replace("agents must", "population must")
        raise ConfigError(f"graph={graph}, population={n}: {msg}") from None
    return topo
