"""Topologies: invariants against networkx's generators, views kept in sync, I/O, errors."""

from __future__ import annotations

import json
import math
import pickle

import networkx as nx
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sim_core.errors import ConfigError
from society.fields import GraphFields
from society.topology import NAMES, Topology, make_topology, topology_of


def canonical(edges) -> np.ndarray:
    """Edges of a networkx graph (or pairs) as a sorted (E, 2) array with u < v."""
    e = np.array(sorted((min(u, v), max(u, v)) for u, v in edges), dtype=np.int64)
    return e.reshape(-1, 2)


def assert_simple(t: Topology) -> None:
    e = t.edges
    assert e.dtype == np.int64 and e.ndim == 2 and e.shape[1] == 2
    assert np.all(e[:, 0] < e[:, 1])  # no self-loops, oriented
    keys = e[:, 0] * t.n + e[:, 1]
    assert np.all(np.diff(keys) > 0)  # sorted, no duplicates
    assert e.size == 0 or (e.min() >= 0 and e.max() < t.n)


def neighbour_sets(t: Topology, direction: str = "both") -> list[set[int]]:
    """Neighbour sets read from the compiled CSR arrays (what the engine uses)."""
    nb = t.neighbours(direction)
    off, dst = np.asarray(nb.offsets), np.asarray(nb.dst)
    return [set(dst[off[i] : off[i + 1]].tolist()) for i in range(t.n)]


def nx_sets(g: nx.Graph) -> list[set[int]]:
    return [set(g.neighbors(i)) for i in range(g.number_of_nodes())]


def ks_distance(a: np.ndarray, b: np.ndarray) -> float:
    """Two-sample Kolmogorov-Smirnov statistic (max gap between empirical CDFs)."""
    x = np.union1d(a, b)
    fa = np.searchsorted(np.sort(a), x, side="right") / a.size
    fb = np.searchsorted(np.sort(b), x, side="right") / b.size
    return float(np.abs(fa - fb).max())


def nx_degrees(g: nx.Graph) -> np.ndarray:
    return np.array([d for _, d in sorted(g.degree())])


# ------------------------------------------------------------------ deterministic shapes
def test_complete_equals_networkx():
    t = make_topology("complete", 30)
    assert_simple(t)
    assert np.array_equal(t.edges, canonical(nx.complete_graph(30).edges))


@pytest.mark.parametrize("name", ["cycle", "ring"])
def test_cycle_and_ring_alias_equal_networkx(name):
    t = make_topology(name, 25)
    assert t.name == "cycle"
    assert np.array_equal(t.edges, canonical(nx.cycle_graph(25).edges))


@pytest.mark.parametrize("periodic", [True, False])
def test_von_neumann_lattice_equals_networkx_grid(periodic):
    side = 6
    t = make_topology("lattice", side * side, periodic=periodic)
    g = nx.grid_2d_graph(side, side, periodic=periodic)
    expected = canonical((r1 * side + c1, r2 * side + c2) for (r1, c1), (r2, c2) in g.edges)
    assert_simple(t)
    assert np.array_equal(t.edges, expected)


def lattice_expected(side: int, moore: bool, periodic: bool) -> list[set[int]]:
    steps = [(dr, dc) for dr in (-1, 0, 1) for dc in (-1, 0, 1) if (dr, dc) != (0, 0)]
    if not moore:
        steps = [s for s in steps if 0 in s]
    out = []
    for r in range(side):
        for c in range(side):
            nbrs = set()
            for dr, dc in steps:
                rr, cc = r + dr, c + dc
                if periodic:
                    nbrs.add((rr % side) * side + cc % side)
                elif 0 <= rr < side and 0 <= cc < side:
                    nbrs.add(rr * side + cc)
            out.append(nbrs)
    return out


@pytest.mark.parametrize("neighbourhood", ["moore", "von-neumann"])
@pytest.mark.parametrize("periodic,side", [(True, 5), (False, 4)])
def test_lattice_neighbour_sets_exact(neighbourhood, periodic, side):
    t = make_topology("lattice", side * side, neighbourhood=neighbourhood, periodic=periodic)
    expected = lattice_expected(side, neighbourhood == "moore", periodic)
    assert neighbour_sets(t) == expected
    assert [set(t.neighbours_of(i).tolist()) for i in range(t.n)] == expected
    if periodic:
        assert np.all(t.degree == (8 if neighbourhood == "moore" else 4))


def test_lattice_clustering():
    # king's-move torus: 12 of the 28 pairs among a node's 8 neighbours touch -> 3/7 exactly;
    # von Neumann torus with side >= 4 has no triangles.
    moore = make_topology("lattice", 36, neighbourhood="moore").to_networkx()
    assert nx.average_clustering(moore) == pytest.approx(3 / 7)
    assert nx.average_clustering(make_topology("lattice", 36).to_networkx()) == 0.0


def test_layered_dag_structure():
    t = make_topology("layered-dag", 10, layers=3)  # layer sizes 4, 3, 3
    assert t.directed and t.name == "layered-dag"
    g = t.to_networkx()
    assert isinstance(g, nx.DiGraph) and nx.is_directed_acyclic_graph(g)
    layers = [range(0, 4), range(4, 7), range(7, 10)]
    expected = {(u, v) for a, b in zip(layers, layers[1:], strict=False) for u in a for v in b}
    assert set(map(tuple, t.edges.tolist())) == expected
    assert t.neighbours_of(5, "out").tolist() == [7, 8, 9]
    assert t.neighbours_of(5, "in").tolist() == [0, 1, 2, 3]
    assert t.neighbours_of(5).tolist() == [0, 1, 2, 3, 7, 8, 9]
    assert neighbour_sets(t, "out") == [set(g.successors(i)) for i in range(10)]
    assert neighbour_sets(t, "in") == [set(g.predecessors(i)) for i in range(10)]
    assert t.degree.tolist() == [3] * 4 + [7] * 3 + [3] * 3


# ----------------------------------------------------------------------- random models
def test_random_regular_is_simple_and_exactly_regular():
    for n, k in [(1000, 4), (999, 6), (60, 3), (5, 4), (12, 11)]:
        t = make_topology("random-regular", n, degree=k, seed=3)
        assert_simple(t)
        assert len(t.edges) == n * k // 2
        assert np.all(t.degree == k)
    assert nx.is_connected(make_topology("random-regular", 1000, degree=4).to_networkx())


def test_random_regular_triangles_match_uniform_model():
    # Random k-regular graphs have Poisson((k-1)^3/6) triangles (4.5 for k = 4). Over 30
    # graphs the mean has sd sqrt(4.5/30) = 0.39; 4 sd = 1.55 leaves room for the repair's
    # O(1/n) bias while a biased sampler (e.g. clustered pairing) would sit far outside.
    counts = [
        sum(nx.triangles(make_topology("random-regular", 1000, seed=s).to_networkx()).values()) / 3
        for s in range(30)
    ]
    assert abs(np.mean(counts) - 4.5) < 1.55


def test_erdos_renyi_edge_count_and_degree_distribution():
    n, k = 2000, 4
    p = k / (n - 1)
    ours = [make_topology("erdos-renyi", n, degree=k, seed=s) for s in range(5)]
    for t in ours:
        assert_simple(t)
    # total edges over 5 graphs ~ Binomial(5 N, p): mean 20000, sd ~141; allow 5 sd
    total = sum(len(t.edges) for t in ours)
    assert abs(total - 5 * n * k / 2) < 5 * math.sqrt(5 * n * (n - 1) / 2 * p)
    theirs = np.concatenate([nx_degrees(nx.fast_gnp_random_graph(n, p, seed=s)) for s in range(5)])
    # two samples of 10000 degrees: the 0.1% KS critical value is 1.95 * sqrt(2 / 10000) = 0.028
    assert ks_distance(np.concatenate([t.degree for t in ours]), theirs) < 0.028


def test_erdos_renyi_dense_uses_complement():
    n, k = 60, 50  # p ~ 0.85: sampled as the complement of a sparse set
    t = make_topology("erdos-renyi", n, degree=k, seed=1)
    assert_simple(t)
    total, p = n * (n - 1) // 2, k / (n - 1)
    assert abs(len(t.edges) - total * p) < 5 * math.sqrt(total * p * (1 - p))


def test_small_world_matches_watts_strogatz():
    n, k = 2000, 4
    ring = make_topology("small-world", n, degree=k, rewire=0.0)
    assert np.array_equal(ring.edges, canonical(nx.watts_strogatz_graph(n, k, 0.0).edges))
    ours = [make_topology("small-world", n, degree=k, rewire=0.1, seed=s) for s in range(4)]
    for t in ours:
        assert_simple(t)
        assert len(t.edges) == n * k // 2
        assert t.degree.min() >= k // 2  # each node keeps its own k/2 ring edges' start
    theirs = [nx.watts_strogatz_graph(n, k, 0.1, seed=s) for s in range(4)]
    # clustering ~ 0.5 (1 - p)^3 = 0.364; per-graph sd ~ 0.005, so 4-graph means agree to 0.02
    c_ours = np.mean([nx.average_clustering(t.to_networkx()) for t in ours])
    c_nx = np.mean([nx.average_clustering(g) for g in theirs])
    assert 0.33 < c_ours < 0.40 and abs(c_ours - c_nx) < 0.02
    d_ours = np.concatenate([t.degree for t in ours])
    d_nx = np.concatenate([nx_degrees(g) for g in theirs])
    # 8000 degrees each: 0.1% KS critical value 1.95 * sqrt(2 / 8000) = 0.031
    assert ks_distance(d_ours, d_nx) < 0.031


def test_small_world_dense_full_rewiring_terminates_simple():
    t = make_topology("small-world", 10, degree=8, rewire=1.0, seed=2)
    assert_simple(t)
    assert len(t.edges) == 40


def test_scale_free_matches_barabasi_albert():
    n, k = 5000, 4
    m = k // 2
    ours = [make_topology("scale-free", n, degree=k, seed=s) for s in range(5)]
    theirs = [nx.barabasi_albert_graph(n, m, seed=s) for s in range(5)]
    for t, g in zip(ours, theirs, strict=True):
        assert_simple(t)
        assert len(t.edges) == g.number_of_edges() == m * (n - m)
        assert t.degree.min() == m
    assert nx.is_connected(ours[0].to_networkx())
    d_ours = np.concatenate([t.degree for t in ours])
    d_nx = np.concatenate([nx_degrees(g) for g in theirs])
    assert d_ours.mean() == d_nx.mean()
    # 25000 degrees each: the 0.1% KS critical value is 1.95 * sqrt(2 / 25000) = 0.017
    # (conservative for discrete data; nx against itself gives ~0.006, ours ~0.007).
    assert ks_distance(d_ours, d_nx) < 0.017
    # heavy tail: share of hubs (degree >= 20, ~1.4%) within 30% of networkx's, and the
    # largest hub of the same order (BA max degree ~ m sqrt(n) = 141; runs vary ~x2)
    assert abs((d_ours >= 20).mean() / (d_nx >= 20).mean() - 1) < 0.3
    max_ours = np.mean([t.degree.max() for t in ours])
    max_nx = np.mean([nx_degrees(g).max() for g in theirs])
    assert 0.5 < max_ours / max_nx < 2


def test_stochastic_block_counts():
    blocks, p_in, p_out = [300, 200, 100], 0.05, 0.005
    t = make_topology("stochastic-block", 600, blocks=blocks, p_in=p_in, p_out=p_out, seed=4)
    assert_simple(t)
    label = np.repeat(np.arange(3), blocks)
    same = label[t.edges[:, 0]] == label[t.edges[:, 1]]
    n_in = sum(b * (b - 1) // 2 for b in blocks)
    n_out = 600 * 599 // 2 - n_in
    # binomial counts: expectation +- 5 sd
    for count, pairs, p in [(same.sum(), n_in, p_in), (len(same) - same.sum(), n_out, p_out)]:
        assert abs(count - pairs * p) < 5 * math.sqrt(pairs * p * (1 - p))
    block_pair = {(0, 1): 300 * 200, (0, 2): 300 * 100, (1, 2): 200 * 100}
    for (a, b), pairs in block_pair.items():
        count = np.sum((label[t.edges[:, 0]] == a) & (label[t.edges[:, 1]] == b))
        assert abs(count - pairs * p_out) < 5 * math.sqrt(pairs * p_out)


def test_stochastic_block_matches_networkx_extremes():
    full = make_topology("stochastic-block", 9, blocks=[4, 5], p_in=1.0, p_out=0.0)
    g = nx.stochastic_block_model([4, 5], [[1.0, 0.0], [0.0, 1.0]])
    assert np.array_equal(full.edges, canonical(g.edges))


@pytest.mark.parametrize(
    "name,kw",
    [
        ("random-regular", {}),
        ("erdos-renyi", {}),
        ("small-world", {}),
        ("scale-free", {}),
        ("stochastic-block", {"blocks": [100, 100]}),
    ],
)
def test_determinism_by_seed(name, kw):
    a = make_topology(name, 200, seed=7, **kw)
    b = make_topology(name, 200, seed=7, **kw)
    c = make_topology(name, 200, seed=8, **kw)
    assert a == b and np.array_equal(a.edges, b.edges)
    assert not np.array_equal(a.edges, c.edges)


@pytest.mark.parametrize(
    "name,kw",
    [
        ("complete", {}),
        ("cycle", {}),
        ("lattice", {"neighbourhood": "moore"}),
        ("random-regular", {}),
        ("erdos-renyi", {}),
        ("small-world", {}),
        ("scale-free", {}),
        ("stochastic-block", {"blocks": [40, 24]}),
    ],
)
def test_every_generator_views_agree(name, kw):
    t = make_topology(name, 64, **kw)
    assert_simple(t)
    g = t.to_networkx()
    assert neighbour_sets(t) == nx_sets(g)
    assert t.degree.tolist() == nx_degrees(g).tolist()
    assert Topology.from_networkx(g) == t


# ------------------------------------------------------------- construction and views
def test_constructor_canonicalises_and_freezes():
    t = Topology(4, np.array([[3, 1], [0, 2], [1, 0]]))
    assert t.edges.tolist() == [[0, 1], [0, 2], [1, 3]]
    with pytest.raises(ValueError):
        t.edges[0, 0] = 5
    assert Topology(3, []).edges.shape == (0, 2)
    assert t.neighbours_of(1).tolist() == [0, 3]
    assert t.neighbours_of(np.int64(2)).tolist() == [0]


@pytest.mark.parametrize(
    "n,edges,directed,match",
    [
        (3, [[0, 0]], False, "self-loops"),
        (3, [[0, 1], [1, 0]], False, "more than once"),
        (3, [[0, 3]], False, r"\[0, 3\)"),
        (3, [[-1, 2]], False, r"\[0, 3\)"),
        (3, [[2, 1]], True, "lower to a higher id"),
        (3, [[0, 1, 2]], False, r"shape \(E, 2\)"),
        (-1, [], False, "n must be"),
    ],
)
def test_constructor_errors(n, edges, directed, match):
    with pytest.raises(ValueError, match=match):
        Topology(n, np.array(edges), directed)


def test_constructor_type_errors():
    with pytest.raises(TypeError, match="integer array"):
        Topology(3, np.array([[0.0, 1.0]]))
    with pytest.raises(TypeError, match="n must be an integer"):
        Topology(2.0, [])
    with pytest.raises(ValueError, match="agent must be in"):
        Topology(3, [[0, 1]]).neighbours_of(3)
    t = Topology(3, [[0, 1]])
    t.neighbours()
    with pytest.raises(ValueError, match="direction must be one of"):
        t.neighbours("sideways")
    with pytest.raises(ValueError, match="direction must be one of"):
        t.neighbours_of(0, "up")


def test_from_networkx_relabels_in_sorted_order():
    g = nx.Graph([("b", "c"), ("a", "c")])
    g.add_node("d")
    g.graph["name"] = "letters"
    t = Topology.from_networkx(g)
    assert t.n == 4 and t.name == "letters"
    assert t.edges.tolist() == [[0, 2], [1, 2]]  # a=0, b=1, c=2, d=3 (isolated)
    dag = nx.DiGraph([(5, 1), (1, 9)])  # sorted order is not topological: 5 -> 1 -> 9
    td = Topology.from_networkx(dag)
    assert td.directed and td.edges.tolist() == [[0, 1], [1, 2]]
    assert nx.is_isomorphic(td.to_networkx(), dag)


def test_from_networkx_errors():
    with pytest.raises(ValueError, match="multigraph"):
        Topology.from_networkx(nx.MultiGraph([(0, 1)]))
    with pytest.raises(ValueError, match="self-loops"):
        Topology.from_networkx(nx.Graph([(0, 0)]))
    with pytest.raises(ValueError, match="acyclic"):
        Topology.from_networkx(nx.DiGraph([(0, 1), (1, 0)]))
    with pytest.raises(TypeError, match="sortable"):
        Topology.from_networkx(nx.Graph([(0, "a")]))
    with pytest.raises(TypeError, match="networkx Graph"):
        Topology.from_networkx([(0, 1)])


def test_networkx_and_dict_round_trips():
    for t in [
        make_topology("small-world", 50, seed=1),
        make_topology("layered-dag", 9, layers=3),
        Topology(5, [], name="empty"),
    ]:
        assert Topology.from_networkx(t.to_networkx()) == t
        d = json.loads(json.dumps(t.to_dict()))
        assert Topology.from_dict(d) == t
        assert pickle.loads(pickle.dumps(t)) == t
    with pytest.raises(ValueError, match="exactly the keys"):
        Topology.from_dict({"n": 3, "edges": []})


@settings(max_examples=20, deadline=None)
@given(
    n=st.integers(1, 12),
    pairs=st.lists(st.tuples(st.integers(0, 11), st.integers(0, 11)), max_size=40),
)
def test_round_trip_any_simple_graph(n, pairs):
    g = nx.Graph()
    g.add_nodes_from(range(n))
    g.add_edges_from((u, v) for u, v in pairs if u != v and u < n and v < n)
    t = Topology.from_networkx(g)
    back = t.to_networkx()
    assert list(back.nodes) == list(range(n))
    assert canonical(back.edges).tolist() == canonical(g.edges).tolist()
    assert neighbour_sets(t) == nx_sets(g)


# -------------------------------------------------------------------------- edge lists
def test_from_edgelist(tmp_path):
    path = tmp_path / "net.txt"
    path.write_text("# a comment\n0 1\n\n1\t2   # trailing\n2 1\n 3 0\n")
    t = Topology.from_edgelist(path)
    assert t.n == 4 and t.name == "net.txt"
    assert t.edges.tolist() == [[0, 1], [0, 3], [1, 2]]
    assert Topology.from_edgelist(str(path), n=6).n == 6
    assert make_topology(str(path), 5) == Topology.from_edgelist(path, n=5)


@pytest.mark.parametrize("line", ["0 1 2", "0 x", "0 -1", "3 3", "1.5 2", "7"])
def test_from_edgelist_malformed_line_names_file_and_line(tmp_path, line):
    path = tmp_path / "bad.txt"
    path.write_text(f"0 1\n# ok\n{line}\n")
    with pytest.raises(ValueError, match=r"bad\.txt:3: expected two distinct"):
        Topology.from_edgelist(path)


def test_from_edgelist_id_beyond_n(tmp_path):
    path = tmp_path / "big.txt"
    path.write_text("0 1\n1 9\n")
    with pytest.raises(ValueError, match=r"big\.txt:2: .*below n=5"):
        Topology.from_edgelist(path, n=5)
    with pytest.raises(FileNotFoundError):
        Topology.from_edgelist(tmp_path / "missing.txt")


# ----------------------------------------------------------------------------- rewire
def test_rewire_keeps_views_consistent():
    t = make_topology("erdos-renyi", 300, degree=6, seed=5)
    t.neighbours()  # populate the cache: rewire must not reuse it
    rng = np.random.default_rng(0)
    remove = t.edges[rng.choice(len(t.edges), size=100, replace=False)][:, ::-1]  # reversed
    g = t.to_networkx()
    g.remove_edges_from(remove.tolist())
    candidates = rng.integers(0, 300, size=(400, 2))
    fresh = {(min(u, v), max(u, v)) for u, v in candidates.tolist() if u != v}
    add = sorted(e for e in fresh if not g.has_edge(*e))[:150]
    r = t.rewire(remove, np.array(add))
    g.add_edges_from(add)
    assert_simple(r)
    assert len(r.edges) == len(t.edges) - 100 + len(add)
    assert neighbour_sets(r) == nx_sets(g) == nx_sets(r.to_networkx())
    assert r.degree.tolist() == nx_degrees(g).tolist()
    assert [r.neighbours_of(i).tolist() for i in range(300)] == [sorted(s) for s in nx_sets(g)]
    assert neighbour_sets(t) != neighbour_sets(r)  # the original is untouched


def test_rewire_swap_and_errors():
    t = make_topology("cycle", 6)
    r = t.rewire([[0, 1]], [[1, 0]])  # removing then re-adding is allowed
    assert r == t
    r = t.rewire([[0, 1], [3, 4]], [[0, 3], [1, 4]])
    assert r.degree.tolist() == [2] * 6
    with pytest.raises(ValueError, match=r"remove: edge \(0, 2\) is not in the topology"):
        t.rewire([[0, 2]], [])
    with pytest.raises(ValueError, match=r"add: edge \(1, 2\) is already in the topology"):
        t.rewire([], [[2, 1]])
    with pytest.raises(ValueError, match="remove: edge .* more than once"):
        t.rewire([[0, 1], [1, 0]], [])
    with pytest.raises(ValueError, match="add: self-loops"):
        t.rewire([], [[2, 2]])
    dag = make_topology("layered-dag", 6, layers=3)
    with pytest.raises(ValueError, match="lower to a higher"):
        dag.rewire([], [[5, 0]])
    assert dag.rewire([[0, 2]], [[0, 4]]).neighbours_of(0, "out").tolist() == [3, 4]


# ----------------------------------------------------------------------------- errors
@pytest.mark.parametrize(
    "name,agents,kw,exc,match",
    [
        ("hexagonal", 10, {}, ValueError, "unknown topology name 'hexagonal'; accepted: complete"),
        ("random-regular", 5, {"degree": 5}, ValueError, r"degree must be in \[0, 4\]"),
        ("random-regular", 5, {"degree": 3}, ValueError, "agents \\* degree must be even"),
        ("erdos-renyi", 10, {"degree": -1}, ValueError, "degree must be in"),
        ("small-world", 10, {"degree": 3}, ValueError, "degree must be even"),
        ("small-world", 10, {"rewire": -0.1}, ValueError, r"rewire must be in \[0, 1\]"),
        ("complete", 10, {"rewire": 2}, ValueError, "rewire must be in"),
        ("scale-free", 10, {"degree": 1}, ValueError, "m = degree // 2 >= 1"),
        ("lattice", 10, {}, ValueError, "perfect square"),
        ("lattice", 4, {}, ValueError, "periodic 'lattice'"),
        ("lattice", 9, {"neighbourhood": "hex"}, ValueError, "neighbourhood must be one of"),
        ("stochastic-block", 10, {}, ValueError, "blocks must be a non-empty list"),
        ("stochastic-block", 10, {"blocks": [4, 5]}, ValueError, "blocks must sum to agents=10"),
        ("stochastic-block", 10, {"blocks": [10], "p_in": 1.5}, ValueError, "p_in must be in"),
        ("stochastic-block", 10, {"blocks": [0, 10]}, ValueError, r"blocks\[0\] must be >= 1"),
        ("layered-dag", 10, {}, ValueError, "layers must be given"),
        ("layered-dag", 10, {"layers": 11}, ValueError, r"layers must be in \[1, 10\]"),
        ("layered-dag", 20_000, {"layers": 2}, ValueError, "edges between consecutive layers"),
        ("complete", 20_000, {}, ValueError, "agents must be <= 10000 for 'complete'"),
        ("cycle", 2, {}, ValueError, "agents must be >= 3"),
        ("cycle", 0, {}, ValueError, "agents must be in"),
        ("cycle", 10, {"seed": -1}, ValueError, "seed must be >= 0"),
        ("cycle", 10.0, {}, TypeError, "agents must be an integer"),
        ("random-regular", 10, {"degree": 2.5}, TypeError, "degree must be an integer"),
        ("lattice", 9, {"periodic": "yes"}, TypeError, "periodic must be a bool"),
    ],
)
def test_make_topology_errors(name, agents, kw, exc, match):
    with pytest.raises(exc, match=match) as info:
        make_topology(name, agents, **kw)
    assert "\n" not in str(info.value)


def test_unknown_name_lists_all_names():
    with pytest.raises(ValueError) as info:
        make_topology("nope", 10)
    assert all(name in str(info.value) for name in NAMES)


class _Town(GraphFields):
    population: int = 30


def test_a_study_builds_one_graph_per_graph_values_and_names_population_in_errors():
    """topology_of: the same values give the same graph object (what a study builds from it
    is cached by it); equal graphs built apart hash alike; bad sizes name `population`."""
    p = _Town(graph="small-world", degree=4, graph_seed=1)
    assert topology_of(p) is topology_of(_Town(graph="small-world", degree=4, graph_seed=1))
    again = make_topology("small-world", 30, degree=4, seed=1)
    assert again == topology_of(p) and hash(again) == hash(topology_of(p))
    assert len({again: 1, topology_of(p): 2}) == 1
    assert topology_of(_Town(graph="small-world", degree=4, graph_seed=2)) != topology_of(p)
    with pytest.raises(ConfigError, match="graph=lattice, population=50: population must be"):
        topology_of(_Town(graph="lattice", population=50))
