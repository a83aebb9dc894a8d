"""Artifact store benchmark: insert and retrieve 1e5 artifacts (ops/s, p95 latency).

Run: ``.venv/bin/python benchmarks/bench_artifacts.py`` (1e5 artifacts) or ``--quick`` (1e4).

Baselines, run in the same process on the same data, and reported as ratios:
- bulk insert vs a bare ``executemany`` of the same rows into a plain SQLite table
  (the cost of ids, validation, the numpy mirrors and the BM25 index);
- one-by-one insert vs rebuilding a ``bm25s`` index over the corpus (what a static BM25
  library would need per insert) and vs an SQLite FTS5 insert (an incremental full-text index);
- retrieval vs ``bm25s.retrieve`` with the same visibility mask (a static index, no
  posterior) and vs an FTS5 ``MATCH ... ORDER BY bm25`` query (no visibility, no posterior).
bm25s rows are skipped when it is not installed.
"""

from __future__ import annotations

import argparse
import sqlite3
import tempfile
import time
from pathlib import Path

import networkx as nx
import numpy as np

from society.artifacts import POLICIES, ArtifactStore
from society.artifacts._bm25 import tokenize


class TableTopology:
    """Neighbours from a padded table (what a compiled topology offers)."""

    def __init__(self, graph: nx.Graph) -> None:
        n = graph.number_of_nodes()
        deg = max(d for _, d in graph.degree)
        self.table = np.full((n, deg), -1, dtype=np.int64)
        for node in graph.nodes:  # setup only, not timed
            nb = list(graph.neighbors(node))
            self.table[node, : len(nb)] = nb

    def neighbours_of(self, agent: int) -> np.ndarray:
        row = self.table[agent]
        return row[row >= 0]


def corpus(n: int, rng: np.random.Generator) -> list[str]:
    """Documents of 8-30 words drawn from a Zipf-like vocabulary of 5000 words."""
    vocab = np.array([f"w{i:04d}" for i in range(5000)])
    p = 1.0 / np.arange(1, vocab.size + 1)
    lens = rng.integers(8, 31, size=n)
    words = vocab[rng.choice(vocab.size, size=int(lens.sum()), p=p / p.sum())]
    cuts = np.cumsum(lens)[:-1]
    return [" ".join(doc) for doc in np.split(words, cuts)]


def pct(lat: list[float], q: float) -> float:
    return float(np.percentile(np.asarray(lat) * 1e3, q))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="1e4 artifacts instead of 1e5")
    args = ap.parse_args()
    n = 10_000 if args.quick else 100_000
    n_one, n_queries, n_agents = (500, 200, 1_000) if args.quick else (2_000, 500, 10_000)
    rng = np.random.default_rng(0)
    docs = corpus(n + n_one, rng)
    authors = rng.integers(0, n_agents, size=n + n_one)
    policies = rng.choice(POLICIES, size=n + n_one, p=[0.1, 0.4, 0.3, 0.1, 0.1])
    niches = rng.choice(["farm", "fish", "trade", "build", "heal"], size=n + n_one)
    items = [
        {
            "kind": "note",
            "content": docs[i],
            "author": int(authors[i]),
            "created_at": float(i),
            "niche": str(niches[i]),
            "policy": str(policies[i]),
        }
        for i in range(n + n_one)
    ]
    topology = TableTopology(nx.random_regular_graph(6, n_agents, seed=0))
    lineage = {
        c: int(p)
        for c, p in zip(range(1, n_agents), rng.integers(0, n_agents, n_agents - 1), strict=True)
        if p < c
    }
    performance = {
        name: rng.random(n_agents) for name in ["farm", "fish", "trade", "build", "heal"]
    }
    print(f"artifact store benchmark: {n} artifacts, {n_agents} agents, {n_queries} queries")

    with tempfile.TemporaryDirectory() as tmp:
        store = ArtifactStore(Path(tmp) / "bench.db")

        t0 = time.perf_counter()
        ids = store.publish_many(items[:n])
        bulk = time.perf_counter() - t0
        raw = sqlite3.connect(Path(tmp) / "raw.db", isolation_level=None)
        raw.execute("PRAGMA journal_mode=WAL")
        raw.execute(
            "CREATE TABLE a (id TEXT PRIMARY KEY, kind TEXT, content TEXT, author INT, created_at REAL, niche TEXT, policy TEXT)"
        )
        rows = [
            (
                str(i),
                it["kind"],
                it["content"],
                it["author"],
                it["created_at"],
                it["niche"],
                it["policy"],
            )
            for i, it in enumerate(items[:n])
        ]
        t0 = time.perf_counter()
        raw.execute("BEGIN")
        raw.executemany("INSERT INTO a VALUES (?,?,?,?,?,?,?)", rows)
        raw.execute("COMMIT")
        raw_bulk = time.perf_counter() - t0
        print(
            f"bulk insert    : {n / bulk:10.0f} artifacts/s ({bulk:.2f} s)   x{bulk / raw_bulk:.1f} the time of a bare SQLite executemany"
        )

        lat = []
        for it in items[n:]:
            t0 = time.perf_counter()
            store.publish(**it)
            lat.append(time.perf_counter() - t0)
        one = float(np.mean(lat))
        print(
            f"one-by-one     : {1 / one:10.0f} artifacts/s  p50 {pct(lat, 50):.2f} ms  p95 {pct(lat, 95):.2f} ms  (store of {n})"
        )

        fts = sqlite3.connect(":memory:", isolation_level=None)
        fts.execute("CREATE VIRTUAL TABLE t USING fts5(content)")
        fts.execute("BEGIN")
        fts.executemany("INSERT INTO t(content) VALUES (?)", ((d,) for d in docs[:n]))
        fts.execute("COMMIT")
        fts_lat = []
        for d in docs[n:]:
            t0 = time.perf_counter()
            fts.execute("INSERT INTO t(content) VALUES (?)", (d,))
            fts_lat.append(time.perf_counter() - t0)
        print(
            f"  vs FTS5 one-by-one insert (in memory, no WAL fsync): ours x{one / np.mean(fts_lat):.1f} its latency"
        )
        try:
            import bm25s
        except ImportError:
            bm25s = None
        if bm25s is not None:
            tokens = [tokenize(d) for d in docs[:n]]
            t0 = time.perf_counter()
            model = bm25s.BM25(k1=1.5, b=0.75, method="lucene")
            model.index(tokens, show_progress=False)
            rebuild = time.perf_counter() - t0
            print(
                f"  vs bm25s rebuild per insert ({rebuild * 1e3:.0f} ms, tokens pre-split): incremental insert {rebuild / one:.0f}x faster"
            )

        queries = [
            " ".join(f"w{w:04d}" for w in rng.integers(0, 300, size=rng.integers(1, 4)))
            for _ in range(n_queries)
        ]
        agents = rng.integers(0, n_agents, size=n_queries)
        store.retrieve(
            0, queries[0], 10, topology=topology, lineage=lineage, performance=performance
        )  # warm-up (index merge)
        lat, masks = [], []
        for a, q in zip(agents, queries, strict=True):
            t0 = time.perf_counter()
            store.retrieve(
                int(a), q, 10, topology=topology, lineage=lineage, performance=performance
            )
            lat.append(time.perf_counter() - t0)
        ours = float(np.mean(lat))
        print(
            f"retrieve (k=10): {1 / ours:10.0f} queries/s    p50 {pct(lat, 50):.2f} ms  p95 {pct(lat, 95):.2f} ms"
        )
        fts_lat = []
        for q in queries:
            t0 = time.perf_counter()
            fts.execute(
                "SELECT rowid FROM t WHERE t MATCH ? ORDER BY bm25(t) LIMIT 10",
                (" OR ".join(q.split()),),
            ).fetchall()
            fts_lat.append(time.perf_counter() - t0)
        print(
            f"  vs FTS5 MATCH ... ORDER BY bm25 (no visibility/posterior): ours x{ours / np.mean(fts_lat):.2f} its latency"
        )
        if bm25s is not None:
            for a in agents:  # masks precomputed outside the timed loop
                visible = set(
                    store.visible_to(int(a), topology, lineage=lineage, performance=performance)
                )
                masks.append(np.fromiter((i in visible for i in ids), dtype=np.float32, count=n))
            b_lat = []
            for mask, q in zip(masks, queries, strict=True):
                t0 = time.perf_counter()
                model.retrieve([tokenize(q)], k=10, weight_mask=mask, show_progress=False)
                b_lat.append(time.perf_counter() - t0)
            print(
                f"  vs bm25s.retrieve with the visibility mask (static index): ours x{ours / np.mean(b_lat):.2f} its latency"
            )

        uses = rng.choice(np.asarray(ids), size=(20, 1000))
        t0 = time.perf_counter()
        for batch in uses:
            store.record_use(list(batch), rng.random(batch.size) < 0.5)
        rec = time.perf_counter() - t0
        print(f"record_use     : {uses.size / rec:10.0f} uses/s in batches of 1000")
        t0 = time.perf_counter()
        store.to_parquet(Path(tmp) / "a.parquet")
        print(f"to_parquet     : {time.perf_counter() - t0:.2f} s for {len(store)} artifacts")
        store.close()


if __name__ == "__main__":
    main()
