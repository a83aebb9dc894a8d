"""Network statistics of the society's topology: degrees, clustering, path length, modularity.

Every function takes the graph as a ``networkx`` graph, a compiled ``sim_core.graph.Neighbours``
or an integer edge array of shape ``(E, 2)``, and reduces it to one canonical undirected simple
edge list (``u < v``, no duplicates, no self-loops) with :func:`edge_array`. Nodes are the
integers ``0 .. n-1``; for a ``networkx`` graph, node ``i`` is the ``i``-th node of
``list(graph)``, so per-node arrays (traits, labels) must follow that order. Edge weights are
ignored: every statistic here is of the unweighted graph.
"""

from __future__ import annotations

from typing import Any

import networkx as nx
import numpy as np

from sim_core.graph import Neighbours

GraphLike = nx.Graph | Neighbours | np.ndarray


def edge_array(graph: Any, n: int | None = None) -> tuple[int, np.ndarray]:
    """Node count and canonical undirected edges ``(E, 2)`` (``u < v``, unique, no self-loops).

    Canonical form makes every metric independent of whether the caller listed each edge once
    or in both directions. For an edge array, ``n`` defaults to ``max id + 1`` (pass it when
    trailing nodes are isolated); for a graph object ``n`` comes from the graph.
    """
    if isinstance(graph, nx.Graph):
        index = {v: i for i, v in enumerate(graph)}
        m = graph.number_of_edges()
        # Python iteration over networkx's own edge dicts: the graph object is already pure
        # Python, so this conversion costs the same order as building it did.
        flat = np.fromiter((index[x] for e in graph.edges() for x in e[:2]), np.int64, 2 * m)
        nodes, edges = graph.number_of_nodes(), flat.reshape(m, 2)
    elif isinstance(graph, Neighbours):
        edges = np.stack([np.asarray(graph.src), np.asarray(graph.dst)], axis=1).astype(np.int64)
        nodes = graph.n
    else:
        edges = np.asarray(graph)
        if edges.size == 0:
            edges = edges.reshape(0, 2)
        if edges.ndim != 2 or edges.shape[1] != 2:
            raise ValueError(f"graph as an edge array must have shape (E, 2), got {edges.shape}")
        if not np.issubdtype(edges.dtype, np.integer):
            raise TypeError(f"graph edge array must hold integer node ids, got dtype {edges.dtype}")
        edges = edges.astype(np.int64)
        if edges.size and edges.min() < 0:
            raise ValueError(f"graph node ids must be >= 0, got {edges.min()}")
        nodes = int(edges.max()) + 1 if edges.size else 0
        if n is not None:
            if n < nodes:
                raise ValueError(f"n={n} is smaller than the largest node id + 1 ({nodes})")
            nodes = int(n)
    u = np.minimum(edges[:, 0], edges[:, 1])
    v = np.maximum(edges[:, 0], edges[:, 1])
    keep = u != v
    key = np.sort(u[keep] * max(nodes, 1) + v[keep])
    # Sort-and-compare rather than np.unique, whose hash path is ~50x slower on 1e6 keys.
    key = key[np.r_[True, key[1:] != key[:-1]]] if key.size else key
    return int(nodes), np.stack([key // max(nodes, 1), key % max(nodes, 1)], axis=1)


def _degree(n: int, edges: np.ndarray) -> np.ndarray:
    return np.bincount(edges[:, 0], minlength=n) + np.bincount(edges[:, 1], minlength=n)


def _csr(n: int, edges: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """CSR offsets and neighbour ids of the symmetric adjacency."""
    src = np.concatenate([edges[:, 0], edges[:, 1]])
    dst = np.concatenate([edges[:, 1], edges[:, 0]])
    order = np.argsort(src, kind="stable")
    offsets = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(src, minlength=n), out=offsets[1:])
    return offsets, dst[order]


def _sample_nodes(n: int, n_sample: int | None, seed: int, name: str) -> tuple[np.ndarray, bool]:
    """All nodes when ``n_sample`` is None or covers the graph, else a seeded sample."""
    if n_sample is not None and n_sample < 1:
        raise ValueError(f"{name} must be a positive integer or None, got {n_sample}")
    if n_sample is None or n_sample >= n:
        return np.arange(n), True
    return np.sort(np.random.default_rng(seed).choice(n, size=n_sample, replace=False)), False


def degree_stats(graph: GraphLike, n: int | None = None) -> dict[str, float]:
    """Degree distribution summary: ``n_nodes``, ``n_edges``, ``mean``, ``std``, ``min``, ``max``.

    Mean degree is ``2E / n``; ``std`` is the population standard deviation. Raises on a graph
    with no nodes.
    """
    n, edges = edge_array(graph, n)
    if n == 0:
        raise ValueError("degree_stats needs a graph with at least one node")
    deg = _degree(n, edges)
    return {
        "n_nodes": n,
        "n_edges": int(len(edges)),
        "mean": float(deg.mean()),
        "std": float(deg.std()),
        "min": int(deg.min()),
        "max": int(deg.max()),
    }


def clustering(
    graph: GraphLike, n: int | None = None, *, n_sample: int | None = 10_000, seed: int = 0
) -> dict[str, Any]:
    """Average local clustering coefficient (Watts & Strogatz 1998, Nature 393:440).

    ``C = mean_i 2 T_i / (k_i (k_i - 1))`` with ``T_i`` the triangles through node ``i`` and
    nodes of degree < 2 counting as 0 (the networkx convention). Computed by
    ``networkx.average_clustering``; on graphs larger than ``n_sample`` nodes it averages over a
    seeded uniform sample of nodes, evaluated on the subgraph induced by the sample and its
    neighbours (which holds every triangle through a sampled node, so each sampled value is
    exact). Returns ``{"mean", "n_sampled", "exact"}``.
    """
    n, edges = edge_array(graph, n)
    if n == 0:
        raise ValueError("clustering needs a graph with at least one node")
    nodes, exact = _sample_nodes(n, n_sample, seed, "n_sample")
    if not exact:
        near = np.zeros(n, dtype=bool)
        near[nodes] = True
        touches = near[edges[:, 0]] | near[edges[:, 1]]
        near[edges[touches].ravel()] = True
        edges = edges[near[edges[:, 0]] & near[edges[:, 1]]]
    g = nx.Graph()
    g.add_nodes_from(nodes.tolist())
    g.add_edges_from(edges.tolist())
    value = nx.average_clustering(g, nodes=None if exact else nodes.tolist())
    return {"mean": float(value), "n_sampled": int(len(nodes)), "exact": exact}


def _bfs_distances(offsets: np.ndarray, nbrs: np.ndarray, source: int, n: int) -> np.ndarray:
    """Hop distances from ``source`` (-1 where unreachable); one vectorised step per BFS level."""
    dist = np.full(n, -1, dtype=np.int64)
    dist[source] = 0
    frontier = np.array([source], dtype=np.int64)
    level = 0
    while frontier.size:
        level += 1
        starts, lens = offsets[frontier], offsets[frontier + 1] - offsets[frontier]
        total = int(lens.sum())
        if total == 0:
            break
        idx = np.arange(total) + np.repeat(starts - (np.cumsum(lens) - lens), lens)
        cand = nbrs[idx]
        cand = np.unique(cand[dist[cand] < 0])
        dist[cand] = level
        frontier = cand
    return dist


def path_length(
    graph: GraphLike, n: int | None = None, *, n_sources: int | None = 64, seed: int = 0
) -> dict[str, Any]:
    """Mean shortest-path length (hops) over ordered pairs of distinct, mutually reachable nodes.

    Exact (breadth-first search from every node) when the graph has at most ``n_sources``
    nodes; otherwise BFS from a seeded uniform sample of ``n_sources`` sources, an unbiased
    estimate of the mean over reachable pairs. On a disconnected graph unreachable pairs are
    left out (networkx raises instead) and ``reachable_fraction`` says how many pairs counted.
    Cost: one BFS per source, each a numpy step per level (so long chains with a large
    diameter are slow; small-world graphs take a few levels). Returns ``{"mean",
    "reachable_fraction", "n_sources", "exact"}``; ``mean`` is NaN when no pair is reachable.
    """
    n, edges = edge_array(graph, n)
    if n < 2:
        raise ValueError(f"path_length needs a graph with at least 2 nodes, got {n}")
    sources, exact = _sample_nodes(n, n_sources, seed, "n_sources")
    offsets, nbrs = _csr(n, edges)
    total, pairs = 0, 0
    # Loop over sampled sources (a fixed budget, not over agents); each BFS is vectorised.
    for s in sources:
        d = _bfs_distances(offsets, nbrs, int(s), n)
        reached = d > 0
        total += int(d[reached].sum())
        pairs += int(reached.sum())
    mean = total / pairs if pairs else float("nan")
    return {
        "mean": float(mean),
        "reachable_fraction": pairs / (len(sources) * (n - 1)),
        "n_sources": int(len(sources)),
        "exact": exact,
    }


def modularity(graph: GraphLike, labels: Any) -> float:
    """Newman-Girvan modularity of the partition of nodes by ``labels`` (strategy, role, niche).

    ``Q = sum_c [ L_c / m - (D_c / 2m)^2 ]`` with ``m`` edges, ``L_c`` edges inside group ``c``
    and ``D_c`` the total degree of group ``c`` (Newman & Girvan 2004, Phys. Rev. E 69:026113);
    equal to ``networkx.community.modularity`` but computed with bincounts, so it scales to
    millions of edges. ``labels`` has one entry per node (any hashable dtype). NaN for a graph
    without edges (undefined).
    """
    lab = np.asarray(labels)
    if lab.ndim != 1 or lab.size == 0:
        raise ValueError(
            f"labels must be a non-empty 1-D array, one per node, got shape {lab.shape}"
        )
    n, edges = edge_array(graph, len(lab) if isinstance(graph, np.ndarray) else None)
    if len(lab) != n:
        raise ValueError(f"labels must have one entry per node ({n}), got {len(lab)}")
    m = len(edges)
    if m == 0:
        return float("nan")
    _, group = np.unique(lab, return_inverse=True)
    k = int(group.max()) + 1
    gu, gv = group[edges[:, 0]], group[edges[:, 1]]
    inside = np.bincount(gu[gu == gv], minlength=k)
    degree_sum = np.bincount(group, weights=_degree(n, edges), minlength=k)
    return float((inside / m).sum() - ((degree_sum / (2 * m)) ** 2).sum())
