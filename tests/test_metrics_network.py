"""Network statistics against closed forms and networkx on the same graphs."""

from __future__ import annotations

import networkx as nx
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sim_core.graph import Neighbours
from society.metrics import clustering, degree_stats, edge_array, modularity, path_length

FAST = settings(max_examples=50, deadline=None)


def ring_lattice(n: int, k: int) -> np.ndarray:
    """Each node linked to its k/2 nearest neighbours on each side."""
    i = np.arange(n)
    return np.concatenate([np.c_[i, (i + s) % n] for s in range(1, k // 2 + 1)])


def test_edge_array_canonicalises_every_input_form():
    e = np.array([[0, 1], [1, 0], [2, 1], [3, 3], [1, 2]])
    n, canon = edge_array(e, n=5)
    assert n == 5
    np.testing.assert_array_equal(canon, [[0, 1], [1, 2]])  # dedup, self-loop dropped
    nb = Neighbours.from_edges(np.r_[canon[:, 0], canon[:, 1]], np.r_[canon[:, 1], canon[:, 0]], 5)
    np.testing.assert_array_equal(edge_array(nb)[1], canon)
    g = nx.Graph([("a", "b"), ("b", "c")])
    np.testing.assert_array_equal(edge_array(g)[1], [[0, 1], [1, 2]])
    with pytest.raises(ValueError, match=r"shape \(E, 2\)"):
        edge_array(np.zeros((3, 3), dtype=int))
    with pytest.raises(TypeError, match="integer"):
        edge_array(np.zeros((3, 2)))
    with pytest.raises(ValueError, match="smaller than"):
        edge_array(e, n=2)


def test_degree_stats():
    out = degree_stats(ring_lattice(50, 4))
    assert out == {"n_nodes": 50, "n_edges": 100, "mean": 4.0, "std": 0.0, "min": 4, "max": 4}
    star = degree_stats(nx.star_graph(4))  # hub degree 4, four leaves of degree 1
    assert star["mean"] == pytest.approx(8 / 5) and star["max"] == 4 and star["min"] == 1
    assert degree_stats(np.zeros((0, 2), dtype=int), n=3)["mean"] == 0.0
    with pytest.raises(ValueError, match="at least one node"):
        degree_stats(nx.Graph())


def test_clustering_closed_forms_and_sampling():
    assert clustering(nx.complete_graph(6))["mean"] == pytest.approx(1.0)
    # Ring lattice, k neighbours: C = 3(k - 2) / (4(k - 1)) = 0.5 for k = 4 at every node,
    # so a sampled estimate is exact too.
    lat = clustering(ring_lattice(3000, 4), n_sample=200, seed=1)
    assert lat["mean"] == pytest.approx(0.5) and lat["exact"] is False and lat["n_sampled"] == 200
    g = nx.gnm_random_graph(300, 1500, seed=2)
    assert clustering(g)["mean"] == pytest.approx(nx.average_clustering(g))
    # Sampled values are exact per node: equal to networkx on the same nodes.
    nodes = np.sort(np.random.default_rng(4).choice(300, 50, replace=False))
    assert clustering(g, n_sample=50, seed=4)["mean"] == pytest.approx(
        nx.average_clustering(g, nodes=nodes.tolist())
    )


def test_path_length_closed_forms_and_networkx():
    assert path_length(nx.complete_graph(7))["mean"] == pytest.approx(1.0)
    assert path_length(nx.path_graph(10))["mean"] == pytest.approx(11 / 3)  # (n + 1) / 3
    g = nx.connected_watts_strogatz_graph(120, 6, 0.2, seed=5)
    assert path_length(g, n_sources=None)["mean"] == pytest.approx(
        nx.average_shortest_path_length(g)
    )
    # Cycle of even n: mean distance n^2 / (4 (n - 1)); vertex-transitive, so any sampled
    # source gives the exact value.
    n = 2000
    out = path_length(nx.cycle_graph(n), n_sources=5, seed=0)
    assert out["mean"] == pytest.approx(n * n / (4 * (n - 1))) and out["exact"] is False
    split = path_length(nx.disjoint_union(nx.complete_graph(3), nx.complete_graph(3)))
    assert split["mean"] == 1.0 and split["reachable_fraction"] == pytest.approx(2 / 5)
    with pytest.raises(ValueError, match="n_sources"):
        path_length(g, n_sources=0)


def test_modularity_closed_form_and_networkx():
    two = nx.disjoint_union(nx.complete_graph(5), nx.complete_graph(5))
    labels = np.repeat([0, 1], 5)
    assert modularity(two, labels) == pytest.approx(0.5)  # 1 - 2 (1/2)^2
    assert modularity(two, np.zeros(10)) == pytest.approx(0.0)
    g = nx.karate_club_graph()
    club = [g.nodes[i]["club"] for i in g]
    parts = [{i for i in g if g.nodes[i]["club"] == c} for c in set(club)]
    assert modularity(g, club) == pytest.approx(nx.community.modularity(g, parts, weight=None))
    assert np.isnan(modularity(np.zeros((0, 2), dtype=int), [0, 1]))
    with pytest.raises(ValueError, match="one entry per node"):
        modularity(two, labels[:-1])


@FAST
@given(st.integers(0, 10_000))
def test_network_metrics_invariant_to_node_relabelling(seed):
    rng = np.random.default_rng(seed)
    n = 30
    e = rng.integers(0, n, size=(80, 2))
    labels = rng.integers(0, 3, n)
    perm = rng.permutation(n)
    lab2 = np.empty_like(labels)
    lab2[perm] = labels
    q, q2 = modularity(e, labels), modularity(perm[e], lab2)
    assert q2 == pytest.approx(q, abs=1e-12)
    assert -0.5 - 1e-12 <= q <= 1.0
    assert degree_stats(e, n=n) == pytest.approx(degree_stats(perm[e], n=n))
    assert path_length(perm[e], n=n)["mean"] == pytest.approx(
        path_length(e, n=n)["mean"], nan_ok=True
    )
    assert clustering(perm[e], n=n)["mean"] == pytest.approx(clustering(e, n=n)["mean"])
