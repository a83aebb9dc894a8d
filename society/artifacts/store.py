"""The artifact store: shared notes, playbooks, strategies and code, with provenance and usefulness.

Durable state is one embedded SQLite database (WAL journal for file databases), so the
whole store is a single file that checkpoints with the run (``snapshot`` copies it with
SQLite's online backup). Hot paths (who may see what, retrieval ranking, usage updates)
run on numpy mirrors of the per-artifact columns plus an incremental BM25 index, so that
no query loops over artifacts in Python.

Identity: an artifact's id is the sha256 of its canonical (kind, content, author, sorted
parents, niche). Publishing the same text by the same author, from the same parents and
for the same niche again returns the existing artifact unchanged (its first created_at,
policy and counts are kept). The same text by another author is a different artifact:
authorship matters for attribution, sharing and usage statistics. Because an id hashes
its parents' ids and parents must exist before a child is published, a cycle would need
a sha256 fixed point; ``is_dag`` still checks.

Concurrency: one ``sqlite3`` connection per store, guarded by a lock, so the store may be
shared by the asyncio scheduler (single-threaded) and by other threads. Other processes
(e.g. Ray workers) open their own ``ArtifactStore`` on the same file: writes serialise in
SQLite (``BEGIN IMMEDIATE``, busy timeout), and each store notices other connections'
commits through ``PRAGMA data_version`` and refreshes its mirrors before reading (new
rows are appended; the usage columns are re-read, O(artifacts), once per foreign commit).
Methods are synchronous and take milliseconds: the scheduler may call them directly from
the event loop, or through ``asyncio.to_thread``.
"""

from __future__ import annotations

import hashlib
import json
import math
import sqlite3
import threading
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from numbers import Integral, Real
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import networkx as nx
import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from society.artifacts._bm25 import BM25Index, Growable, tokenize

POLICIES: tuple[str, ...] = ("private", "neighbours", "broadcast", "strong-to-weak", "inherited")
_CODE = {name: i for i, name in enumerate(POLICIES)}
PRIVATE, NEIGHBOURS, BROADCAST, STRONG_TO_WEAK, INHERITED = range(len(POLICIES))

_COLUMNS = "seq, id, kind, content, author, created_at, niche, policy, uses, successes, alpha, beta, retired"
_SCHEMA = """
CREATE TABLE IF NOT EXISTS artifacts (
    seq INTEGER PRIMARY KEY,
    id TEXT NOT NULL UNIQUE,
    kind TEXT NOT NULL,
    content TEXT NOT NULL,
    author INTEGER NOT NULL,
    created_at REAL NOT NULL,
    niche TEXT,
    policy TEXT NOT NULL,
    uses INTEGER NOT NULL DEFAULT 0,
    successes INTEGER NOT NULL DEFAULT 0,
    alpha REAL NOT NULL,
    beta REAL NOT NULL,
    retired INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE IF NOT EXISTS parents (
    child TEXT NOT NULL REFERENCES artifacts(id),
    parent TEXT NOT NULL REFERENCES artifacts(id),
    PRIMARY KEY (child, parent)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS parents_by_parent ON parents(parent);
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
"""
_SQL_CHUNK = 30_000  # stays under SQLite's bound-variable limit (32766)
_PUBLISH_KEYS = frozenset({"kind", "content", "author", "created_at", "parents", "niche", "policy"})


@runtime_checkable
class SupportsNeighbours(Protocol):
    """Anything that lists an agent's neighbours (``society.topology.Topology`` will)."""

    def neighbours_of(self, agent: int) -> np.ndarray: ...


@dataclass(frozen=True, slots=True)
class Artifact:
    """One stored artifact, as read at one moment (counts are a snapshot, not live)."""

    id: str
    kind: str
    content: str
    author: int
    parents: tuple[str, ...]
    created_at: float
    niche: str | None
    policy: str
    uses: int
    successes: int
    alpha: float
    beta: float
    retired: bool

    @property
    def posterior_mean(self) -> float:
        """Mean of the Beta(alpha, beta) posterior of P(success | used)."""
        return self.alpha / (self.alpha + self.beta)


def artifact_id(
    kind: str, content: str, author: int, parents: Iterable[str] = (), niche: str | None = None
) -> str:
    """Content address: sha256 hex of canonical JSON of (kind, content, author, sorted parents, niche)."""
    canon = json.dumps(
        [kind, content, int(author), sorted(set(parents)), niche],
        ensure_ascii=False,
        separators=(",", ":"),
    )
    return hashlib.sha256(canon.encode("utf-8")).hexdigest()


def _check_agent(value: Any, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, Integral) or value < 0:
        raise ValueError(f"{name} must be a non-negative integer agent id, got {value!r}")
    return int(value)


def _is_among(values: np.ndarray, members: np.ndarray, bound: int) -> np.ndarray:
    """``values`` (ints in [0, bound)) that are in ``members``: a table lookup, O(n), no sort."""
    table = np.zeros(bound, dtype=bool)
    table[members[(members >= 0) & (members < bound)]] = True
    return table[values]


def _ancestors(agent: int, lineage: Mapping[int, Any]) -> np.ndarray:
    """Agent ids of every ancestor of ``agent`` (lineage maps child -> parent or parents)."""
    seen: set[int] = set()
    frontier = [agent]
    while frontier:  # walks generations of one family, not the population
        nxt = []
        for child in frontier:
            parents = lineage.get(child, ())
            for p in (parents,) if isinstance(parents, Integral) else parents:
                if int(p) not in seen:
                    seen.add(int(p))
                    nxt.append(int(p))
        frontier = nxt
    return np.fromiter(seen, dtype=np.int64, count=len(seen))


class ArtifactStore:
    """Content-addressed artifacts with provenance, sharing policies, usefulness and retrieval.

    ``path`` is a database file (created if missing, WAL journal) or ``":memory:"``.
    ``prior`` is the Beta(alpha0, beta0) prior of each artifact's usefulness; a new file
    records it and reopening with a different prior is an error (``None`` = stored or (1, 1)).
    Use as a context manager or call ``close()``.
    """

    def __init__(
        self,
        path: str | Path,
        *,
        prior: tuple[float, float] | None = None,
        k1: float = 1.5,
        b: float = 0.75,
    ) -> None:
        if not isinstance(path, str | Path):
            raise TypeError(f"path must be a str, a Path or ':memory:', got {type(path).__name__}")
        if prior is not None:
            if (
                not isinstance(prior, tuple | list)
                or len(prior) != 2
                or not all(isinstance(x, Real) and math.isfinite(x) and x > 0 for x in prior)
            ):
                raise ValueError(
                    f"prior must be two positive finite numbers (alpha0, beta0), got {prior!r}"
                )
            prior = (float(prior[0]), float(prior[1]))
        if not (isinstance(k1, Real) and k1 >= 0 and isinstance(b, Real) and 0 <= b <= 1):
            raise ValueError(f"BM25 needs k1 >= 0 and b in [0, 1], got k1={k1!r}, b={b!r}")
        self.path = str(path)
        self._lock = threading.RLock()
        self._conn = sqlite3.connect(
            self.path, timeout=30.0, isolation_level=None, check_same_thread=False
        )
        try:
            prior = self._init_db(prior)
        except BaseException:
            self._conn.close()
            raise
        self.prior: tuple[float, float] = prior
        self._bm25 = (k1, b)
        with self._lock:
            self._reset_mirrors()

    def _reset_mirrors(self) -> None:
        """Empty the in-memory mirrors (index, columns) and load them from the database."""
        k1, b = self._bm25
        self._index = BM25Index(k1=k1, b=b)
        self._ids: list[str] = []
        self._pos: dict[str, int] = {}
        self._kinds: dict[str, int] = {}
        self._niches: dict[str, int] = {}
        self._col = {
            "seq": Growable(np.int64),
            "author": Growable(np.int64),
            "policy": Growable(np.int8),
            "kind": Growable(np.int32),
            "niche": Growable(np.int32),  # -1: no niche
            "created_at": Growable(np.float64),
            "uses": Growable(np.int64),
            "successes": Growable(np.int64),
            "alpha": Growable(np.float64),
            "beta": Growable(np.float64),
            "retired": Growable(np.bool_),
        }
        self._author_bound = 0  # 1 + largest author id stored
        self._data_version = -1
        self._sync()

    # ------------------------------------------------------------------ plumbing

    def _init_db(self, prior: tuple[float, float] | None) -> tuple[float, float]:
        """Set pragmas, create the schema, and reconcile ``prior`` with the stored one."""
        if self.path != ":memory:":
            mode = self._conn.execute("PRAGMA journal_mode=WAL").fetchone()[0]
            if mode.lower() != "wal":
                raise ValueError(f"path {self.path!r} cannot use a WAL journal (got {mode!r})")
            # NORMAL is safe from corruption under WAL; a power cut may lose the last commits.
            self._conn.execute("PRAGMA synchronous=NORMAL")
        self._conn.execute("PRAGMA foreign_keys=ON")
        with self._write():
            for stmt in _SCHEMA.split(";"):
                if stmt.strip():
                    self._conn.execute(stmt)
            stored = dict(self._conn.execute("SELECT key, value FROM meta").fetchall())
            if "prior" not in stored:
                prior = prior or (1.0, 1.0)
                self._conn.execute("INSERT INTO meta VALUES ('prior', ?)", (json.dumps(prior),))
                return prior
        stored_prior = tuple(json.loads(stored["prior"]))
        if prior is not None and prior != stored_prior:
            raise ValueError(
                f"prior {prior} differs from the prior {stored_prior} this store was created with"
            )
        return stored_prior

    def close(self) -> None:
        """Close the database connection (idempotent)."""
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None

    def __enter__(self) -> ArtifactStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __len__(self) -> int:
        with self._lock:
            self._sync()
            return len(self._ids)

    def __contains__(self, artifact_id: object) -> bool:
        with self._lock:
            self._sync()
            return artifact_id in self._pos

    @property
    def journal_mode(self) -> str:
        """SQLite journal mode in force ("wal" for file databases, "memory" in memory)."""
        with self._lock:
            return self._db.execute("PRAGMA journal_mode").fetchone()[0].lower()

    @property
    def _db(self) -> sqlite3.Connection:
        if self._conn is None:
            raise ValueError("the artifact store is closed")
        return self._conn

    @contextmanager
    def _write(self) -> Iterator[None]:
        """Lock + write transaction (BEGIN IMMEDIATE takes SQLite's write lock up front)."""
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                yield
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            self._db.execute("COMMIT")

    def _sync(self) -> None:
        """Bring the mirrors up to date with commits by other connections (caller holds the lock)."""
        version = self._db.execute("PRAGMA data_version").fetchone()[0]
        if version == self._data_version:
            return
        if self._db.in_transaction:
            self._read_snapshot(version)
            return
        self._db.execute("BEGIN")  # one snapshot: another connection may commit in between
        try:
            self._read_snapshot(version)
        finally:
            self._db.execute("COMMIT")

    def _read_snapshot(self, version: int) -> None:
        self._data_version = version
        self._load_new_rows()
        if self._ids:
            uses, succ, alpha, beta, retired = (
                np.asarray(c)
                for c in zip(
                    *self._db.execute(
                        "SELECT uses, successes, alpha, beta, retired FROM artifacts ORDER BY seq"
                    ),
                    strict=True,
                )
            )
            for name, values in zip(
                ("uses", "successes", "alpha", "beta", "retired"),
                (uses, succ, alpha, beta, retired),
                strict=True,
            ):
                self._col[name].data[:] = values

    def _load_new_rows(self) -> None:
        """Append rows committed since the last load (seq order = commit order) to the mirrors."""
        last = int(self._col["seq"].data[-1]) if self._ids else 0
        rows = self._db.execute(
            f"SELECT {_COLUMNS} FROM artifacts WHERE seq > ? ORDER BY seq", (last,)
        ).fetchall()
        if not rows:
            return
        (
            seq,
            ids,
            kinds,
            contents,
            authors,
            created,
            niches,
            policies,
            uses,
            succ,
            alpha,
            beta,
            retired,
        ) = zip(*rows, strict=True)
        start = len(self._ids)
        self._ids.extend(ids)
        self._pos.update(zip(ids, range(start, start + len(ids)), strict=True))
        kind_codes = [self._kinds.setdefault(k, len(self._kinds)) for k in kinds]
        niche_codes = [
            -1 if n is None else self._niches.setdefault(n, len(self._niches)) for n in niches
        ]
        c = self._col
        c["seq"].extend(seq)
        c["author"].extend(authors)
        self._author_bound = max(self._author_bound, max(authors) + 1)
        c["policy"].extend([_CODE[p] for p in policies])
        c["kind"].extend(kind_codes)
        c["niche"].extend(niche_codes)
        c["created_at"].extend(created)
        c["uses"].extend(uses)
        c["successes"].extend(succ)
        c["alpha"].extend(alpha)
        c["beta"].extend(beta)
        c["retired"].extend(retired)
        self._index.add(contents)

    def _fetch(self, ids: Sequence[str]) -> list[Artifact]:
        """Artifacts for ``ids`` in the given order (caller holds the lock; ids exist)."""
        rows: dict[str, tuple] = {}
        parents: dict[str, list[str]] = {i: [] for i in ids}
        for lo in range(0, len(ids), _SQL_CHUNK):
            chunk = list(ids[lo : lo + _SQL_CHUNK])
            marks = ",".join("?" * len(chunk))
            for row in self._db.execute(
                f"SELECT {_COLUMNS} FROM artifacts WHERE id IN ({marks})", chunk
            ):
                rows[row[1]] = row
            for child, parent in self._db.execute(
                f"SELECT child, parent FROM parents WHERE child IN ({marks}) ORDER BY parent", chunk
            ):
                parents[child].append(parent)
        out = []
        for i in ids:
            _, aid, kind, content, author, created, *fields, retired = rows[i]
            parents_of = tuple(parents[i])
            out.append(
                Artifact(aid, kind, content, author, parents_of, created, *fields, bool(retired))
            )
        return out

    # ------------------------------------------------------------------ writing

    def publish(
        self,
        kind: str,
        content: str,
        author: int,
        *,
        created_at: float,
        parents: Iterable[str] = (),
        niche: str | None = None,
        policy: str = "neighbours",
    ) -> Artifact:
        """Store one artifact (or find the identical one already stored) and return it."""
        (aid,) = self.publish_many(
            [
                dict(
                    kind=kind,
                    content=content,
                    author=author,
                    created_at=created_at,
                    parents=parents,
                    niche=niche,
                    policy=policy,
                )
            ]
        )
        return self.get(aid)

    def publish_many(self, items: Iterable[Mapping[str, Any]]) -> list[str]:
        """Store many artifacts in one transaction; returns their ids in order.

        Each item has the keyword arguments of ``publish`` (kind, content, author,
        created_at, and optionally parents, niche, policy). Parents may be earlier items
        of the same batch. Nothing is stored if any item is invalid.
        """
        with self._lock:  # held across the commit and the mirror update
            with self._write():
                self._sync()
                prior_a, prior_b = self.prior
                new: dict[str, float] = {}  # id -> created_at, for parents within the batch
                rows, edges, out = [], [], []
                for n, item in enumerate(items):
                    aid, row, parents = self._validate(n, item, new)
                    out.append(aid)
                    if aid in self._pos or aid in new:
                        continue  # identical artifact: idempotent
                    new[aid] = row[5]
                    rows.append((*row, prior_a, prior_b))
                    edges.extend((aid, p) for p in parents)
                self._db.executemany(
                    "INSERT INTO artifacts (id, kind, content, author, policy, created_at, niche, alpha, beta) VALUES (?,?,?,?,?,?,?,?,?)",
                    rows,
                )
                self._db.executemany("INSERT INTO parents (child, parent) VALUES (?, ?)", edges)
            self._load_new_rows()
        return out

    def _validate(
        self, n: int, item: Mapping[str, Any], new: Mapping[str, float]
    ) -> tuple[str, tuple, tuple[str, ...]]:
        where = f"artifact #{n}"
        if not isinstance(item, Mapping):
            raise TypeError(
                f"{where}: each item must be a mapping of publish() arguments, got {type(item).__name__}"
            )
        unknown = set(item) - _PUBLISH_KEYS
        if unknown:
            raise ValueError(
                f"{where}: unknown field(s) {sorted(unknown)}; accepted: {sorted(_PUBLISH_KEYS)}"
            )
        for key in ("kind", "content", "author", "created_at"):
            if key not in item:
                raise ValueError(f"{where}: missing required field {key!r}")
        kind, content, policy = item["kind"], item["content"], item.get("policy", "neighbours")
        niche = item.get("niche")
        if not isinstance(kind, str) or not kind:
            raise ValueError(
                f"{where}: kind must be a non-empty string (e.g. 'note', 'playbook', 'code'), got {kind!r}"
            )
        if not isinstance(content, str):
            raise TypeError(f"{where}: content must be a str, got {type(content).__name__}")
        author = _check_agent(item["author"], f"{where}: author")
        created_at = item["created_at"]
        if (
            isinstance(created_at, bool)
            or not isinstance(created_at, Real)
            or not math.isfinite(created_at)
        ):
            raise ValueError(
                f"{where}: created_at must be a finite simulated time, got {created_at!r}"
            )
        if policy not in _CODE:
            raise ValueError(f"{where}: policy must be one of {list(POLICIES)}, got {policy!r}")
        if niche is not None and (not isinstance(niche, str) or not niche):
            raise ValueError(f"{where}: niche must be a non-empty string or None, got {niche!r}")
        if policy == "strong-to-weak" and niche is None:
            raise ValueError(
                f"{where}: policy 'strong-to-weak' needs a niche (the task the performance is measured on)"
            )
        raw_parents = item.get("parents", ())
        if isinstance(raw_parents, str) or not all(isinstance(p, str) for p in raw_parents):
            raise TypeError(
                f"{where}: parents must be an iterable of artifact id strings, got {raw_parents!r}"
            )
        parents = tuple(sorted(set(raw_parents)))
        for p in parents:
            if p in new:
                parent_time = new[p]
            elif p in self._pos:
                parent_time = float(self._col["created_at"].data[self._pos[p]])
            else:
                raise ValueError(f"{where}: parent {p!r} is not in the store")
            if parent_time > created_at:
                raise ValueError(
                    f"{where}: created_at {created_at} precedes its parent {p[:12]}'s created_at {parent_time}"
                )
        aid = artifact_id(kind, content, author, parents, niche)
        if aid in parents:  # would need a sha256 fixed point; checked for the record
            raise ValueError(f"{where}: an artifact cannot be its own parent")
        return aid, (aid, kind, content, author, policy, float(created_at), niche), parents

    def record_use(self, ids: Sequence[str], success: Any) -> None:
        """Count one use of each ``ids[i]`` and whether it was followed by success.

        Updates uses, successes and the Beta posterior (alpha += successes, beta +=
        failures) for the whole batch at once; an id may appear several times.
        """
        success = np.asarray(success)
        if success.dtype != np.bool_ or success.ndim != 1:
            raise ValueError(
                f"success must be a 1-D array of bool, got dtype {success.dtype} and shape {success.shape}"
            )
        if isinstance(ids, str) or len(ids) != success.size:
            raise ValueError(
                f"ids must be a sequence of artifact ids as long as success ({success.size}), got {ids!r:.80}"
            )
        with self._lock:
            self._record_use(ids, success)

    def _record_use(self, ids: Sequence[str], success: np.ndarray) -> None:
        with self._write():
            self._sync()
            try:
                pos = np.fromiter((self._pos[i] for i in ids), dtype=np.int64, count=len(ids))
            except KeyError as e:
                raise ValueError(f"ids contains an unknown artifact id {e.args[0]!r}") from None
            uniq, inv = np.unique(pos, return_inverse=True)
            used = np.bincount(inv, minlength=uniq.size)
            won = np.bincount(inv, weights=success, minlength=uniq.size).astype(np.int64)
            seqs = self._col["seq"].data[uniq]
            self._db.executemany(
                "UPDATE artifacts SET uses = uses + ?, successes = successes + ?, alpha = alpha + ?, beta = beta + ? WHERE seq = ?",
                zip(
                    used.tolist(),
                    won.tolist(),
                    won.tolist(),
                    (used - won).tolist(),
                    seqs.tolist(),
                    strict=True,
                ),
            )
        c = self._col
        c["uses"].data[uniq] += used
        c["successes"].data[uniq] += won
        c["alpha"].data[uniq] += won
        c["beta"].data[uniq] += used - won

    def retire(self, *, min_uses: int, max_posterior_mean: float) -> list[str]:
        """Retire artifacts used at least ``min_uses`` times whose posterior mean is at most
        ``max_posterior_mean``: they stop being retrieved (they stay in the provenance DAG)."""
        if isinstance(min_uses, bool) or not isinstance(min_uses, Integral) or min_uses < 1:
            raise ValueError(
                f"min_uses must be a positive integer (evidence before judging), got {min_uses!r}"
            )
        if not isinstance(max_posterior_mean, Real) or not 0.0 <= max_posterior_mean <= 1.0:
            raise ValueError(
                f"max_posterior_mean must be a number in [0, 1], got {max_posterior_mean!r}"
            )
        with self._write():
            self._sync()
            rows = self._db.execute(
                "UPDATE artifacts SET retired = 1 WHERE retired = 0 AND uses >= ? AND alpha / (alpha + beta) <= ? RETURNING id",
                (int(min_uses), float(max_posterior_mean)),
            ).fetchall()
            retired = sorted((r[0] for r in rows), key=self._pos.__getitem__)
            self._col["retired"].data[[self._pos[i] for i in retired]] = True
        return retired

    # ------------------------------------------------------------------ reading

    def get(self, artifact_id: str) -> Artifact:
        """The artifact with this id (ValueError if absent)."""
        with self._lock:
            self._sync()
            if artifact_id not in self._pos:
                raise ValueError(f"artifact_id {artifact_id!r} is not in the store")
            return self._fetch([artifact_id])[0]

    def get_many(self, ids: Sequence[str]) -> list[Artifact]:
        """Artifacts in the order of ``ids`` (ValueError naming the first unknown id)."""
        with self._lock:
            self._sync()
            missing = next((i for i in ids if i not in self._pos), None)
            if missing is not None:
                raise ValueError(f"ids contains an unknown artifact id {missing!r}")
            return self._fetch(list(ids))

    def _visible(
        self,
        agent: int,
        topology: SupportsNeighbours,
        lineage: Mapping[int, Any] | None,
        performance: Mapping[str, Any] | None,
    ) -> np.ndarray:
        """Boolean mask over stored artifacts of those ``agent`` may see (caller holds the lock)."""
        agent = _check_agent(agent, "agent")
        if not isinstance(topology, SupportsNeighbours):
            raise TypeError(
                f"topology must have a neighbours_of(agent) method, got {type(topology).__name__}"
            )
        c = self._col
        author, policy = c["author"].data, c["policy"].data
        mask = (author == agent) | (policy == BROADCAST)
        # 'neighbours': readers take from the authors they are linked to (symmetric graphs
        # make this the same as authors pushing to their neighbours).
        neighbours = np.asarray(topology.neighbours_of(agent), dtype=np.int64).ravel()
        bound = self._author_bound
        mask |= (policy == NEIGHBOURS) & _is_among(author, neighbours, bound)
        if lineage:
            mask |= (policy == INHERITED) & _is_among(author, _ancestors(agent, lineage), bound)
        if performance:
            mask |= self._strong_to_weak(agent, performance)
        return mask

    def _strong_to_weak(self, agent: int, performance: Mapping[str, Any]) -> np.ndarray:
        """Artifacts whose author outperforms ``agent`` on the artifact's niche.

        ``performance`` maps niche -> per-agent scores indexed by agent id; NaN (or an id
        past the end) means the agent is not in that niche and neither gives nor receives.
        """
        c = self._col
        out = np.zeros(len(self._ids), dtype=bool)
        rows = np.flatnonzero(c["policy"].data == STRONG_TO_WEAK)
        niche_of = c["niche"].data[rows]
        for name, scores in performance.items():  # loop over niches, not agents
            code = self._niches.get(name)
            if code is None:
                continue
            scores = np.asarray(scores, dtype=np.float64)
            if scores.ndim != 1:
                raise ValueError(
                    f"performance[{name!r}] must be a 1-D array of per-agent scores, got shape {scores.shape}"
                )
            sel = rows[niche_of == code]
            authors = c["author"].data[sel]
            theirs = np.full(sel.size, np.nan)
            inside = authors < scores.size
            theirs[inside] = scores[authors[inside]]
            mine = scores[agent] if agent < scores.size else np.nan
            out[sel] = mine < theirs  # NaN on either side compares False
        return out

    def visible_to(
        self,
        agent: int,
        topology: SupportsNeighbours,
        *,
        lineage: Mapping[int, Any] | None = None,
        performance: Mapping[str, Any] | None = None,
        include_retired: bool = False,
    ) -> list[str]:
        """Ids of the artifacts ``agent`` may see, oldest first.

        Policies: ``private`` (author only), ``neighbours`` (artifacts of the authors in
        the agent's own ``topology.neighbours_of``), ``broadcast`` (everyone),
        ``strong-to-weak`` (agents of the artifact's niche scoring strictly lower than the
        author in ``performance[niche]``), ``inherited`` (the author's descendants under
        ``lineage``, a map child -> parent id or ids). The author always sees its own.
        Without ``lineage``/``performance``, those policies reach the author only.
        """
        with self._lock:
            self._sync()
            mask = self._visible(agent, topology, lineage, performance)
            if not include_retired:
                mask &= ~self._col["retired"].data
            return [self._ids[i] for i in np.flatnonzero(mask)]

    def retrieve(
        self,
        agent: int,
        query: str,
        k: int,
        *,
        topology: SupportsNeighbours,
        lineage: Mapping[int, Any] | None = None,
        performance: Mapping[str, Any] | None = None,
        kinds: Iterable[str] | None = None,
        posterior_weight: float = 1.0,
        newest: bool = False,
    ) -> list[Artifact]:
        """The ``k`` best non-retired artifacts visible to ``agent`` for ``query``.

        score = (bm25 / max bm25 over the agent's candidates) * posterior_mean ** posterior_weight.
        Both factors lie in [0, 1]: relevance decides among artifacts of similar usefulness
        and usefulness among equally relevant ones; ``posterior_weight=0`` ranks by BM25
        alone. Artifacts sharing no term with the query are not returned; a query with no
        word tokens ranks every visible artifact by posterior mean. Ties go to the older, or with
        ``newest`` to the newer (an empty query then reads like a feed: the latest first).
        """
        if isinstance(k, bool) or not isinstance(k, Integral) or k < 1:
            raise ValueError(f"k must be a positive integer, got {k!r}")
        if not isinstance(query, str):
            raise TypeError(f"query must be a str, got {type(query).__name__}")
        if not isinstance(posterior_weight, Real) or not posterior_weight >= 0:
            raise ValueError(f"posterior_weight must be a number >= 0, got {posterior_weight!r}")
        with self._lock:
            self._sync()
            c = self._col
            mask = self._visible(agent, topology, lineage, performance) & ~c["retired"].data
            if kinds is not None:
                kinds = [kinds] if isinstance(kinds, str) else list(kinds)
                codes = [self._kinds[kd] for kd in kinds if kd in self._kinds]
                mask &= _is_among(c["kind"].data, np.asarray(codes, np.int64), len(self._kinds))
            if tokenize(query):
                relevance = np.where(mask, self._index.scores(query), 0.0)
                top = relevance.max(initial=0.0)
                if top <= 0.0:
                    return []
                relevance /= top
            else:
                relevance = mask.astype(np.float64)
            cand = np.flatnonzero(relevance > 0.0)
            alpha, beta = c["alpha"].data[cand], c["beta"].data[cand]
            score = relevance[cand] * (alpha / (alpha + beta)) ** posterior_weight
            if cand.size > k:  # keep every candidate tied with the k-th so ties break by age
                kth = np.partition(score, cand.size - k)[cand.size - k]
                keep = score >= kth
                cand, score = cand[keep], score[keep]
            order = np.lexsort((-cand if newest else cand, -score))[:k]
            return self._fetch([self._ids[i] for i in cand[order]])

    # ------------------------------------------------------------------ provenance

    def _walk(self, artifact_id: str, up: bool) -> tuple[str, ...]:
        a, b = ("parent", "child") if up else ("child", "parent")
        with self._lock:
            self._sync()
            if artifact_id not in self._pos:
                raise ValueError(f"artifact_id {artifact_id!r} is not in the store")
            rows = self._db.execute(
                f"""WITH RECURSIVE walk(id) AS (
                        SELECT {a} FROM parents WHERE {b} = ?
                        UNION SELECT p.{a} FROM parents p JOIN walk w ON p.{b} = w.id)
                    SELECT walk.id FROM walk JOIN artifacts USING (id) ORDER BY artifacts.seq""",
                (artifact_id,),
            ).fetchall()
        return tuple(r[0] for r in rows)

    def provenance(self, artifact_id: str) -> tuple[str, ...]:
        """Ids of every ancestor (parents, their parents, ...), oldest first."""
        return self._walk(artifact_id, up=True)

    def descendants(self, artifact_id: str) -> tuple[str, ...]:
        """Ids of every artifact derived from this one, directly or not, oldest first."""
        return self._walk(artifact_id, up=False)

    def lineage_graph(self) -> nx.DiGraph:
        """Provenance as a networkx DiGraph, edges parent -> child, nodes carry author/kind/created_at."""
        with self._lock:
            self._sync()
            c = self._col
            kinds = list(self._kinds)
            g = nx.DiGraph()
            g.add_nodes_from(
                (aid, {"author": int(au), "kind": kinds[kd], "created_at": float(t)})
                for aid, au, kd, t in zip(
                    self._ids, c["author"].data, c["kind"].data, c["created_at"].data, strict=True
                )
            )
            g.add_edges_from(self._db.execute("SELECT parent, child FROM parents"))
        return g

    def is_dag(self) -> bool:
        """Whether provenance is acyclic (content addressing should make it always so)."""
        return nx.is_directed_acyclic_graph(self.lineage_graph())

    # ------------------------------------------------------------------ export

    def to_arrow(self) -> pa.Table:
        """All artifacts as an Arrow table (one row each, ``parents`` a list column), oldest first."""
        with self._lock:
            self._sync()
            rows = self._db.execute(f"SELECT {_COLUMNS} FROM artifacts ORDER BY seq").fetchall()
            parents: dict[str, list[str]] = {}
            for child, parent in self._db.execute(
                "SELECT child, parent FROM parents ORDER BY child, parent"
            ):
                parents.setdefault(child, []).append(parent)
        names = [n.strip() for n in _COLUMNS.split(",")][1:]
        cols = list(zip(*rows, strict=True)) if rows else [()] * 13
        data = dict(zip(names, cols[1:], strict=True))
        data["retired"] = [bool(x) for x in data["retired"]]
        types = {
            "id": pa.string(), "kind": pa.string(), "content": pa.string(), "author": pa.int64(),
            "created_at": pa.float64(), "niche": pa.string(), "policy": pa.string(), "uses": pa.int64(),
            "successes": pa.int64(), "alpha": pa.float64(), "beta": pa.float64(), "retired": pa.bool_(),
        }  # fmt: skip
        arrays = {n: pa.array(list(data[n]), type=types[n]) for n in names}
        arrays["parents"] = pa.array(
            [parents.get(i, []) for i in data["id"]], type=pa.list_(pa.string())
        )
        return pa.table(arrays)

    def to_dataframe(self) -> pd.DataFrame:
        """All artifacts as a pandas DataFrame (see ``to_arrow``)."""
        return self.to_arrow().to_pandas()

    def to_parquet(self, path: str | Path) -> None:
        """Write all artifacts to a Parquet file (see ``to_arrow`` for the columns)."""
        pq.write_table(self.to_arrow(), str(path))

    def to_bytes(self) -> bytes:
        """The whole store as one SQLite database image: what a run checkpoint keeps, so a
        resumed run rolls the store back to the checkpoint's moment."""
        with self._lock:
            mem = sqlite3.connect(":memory:")
            try:
                self._db.backup(mem)
                image = bytearray(mem.serialize())
            finally:
                mem.close()
        image[18:20] = b"\x01\x01"  # a rollback-journal header: an image cannot be in WAL mode
        return bytes(image)

    def load_bytes(self, image: bytes) -> None:
        """Replace the whole store by an image from :meth:`to_bytes` (its prior included)."""
        mem = sqlite3.connect(":memory:")
        try:
            mem.deserialize(image)
            stored = dict(mem.execute("SELECT key, value FROM meta").fetchall())
            with self._lock:
                mem.backup(self._db)
                self.prior = tuple(json.loads(stored["prior"]))
                self._reset_mirrors()
        except (sqlite3.DatabaseError, KeyError, ValueError) as exc:
            raise ValueError(f"not an artifact store image ({type(exc).__name__}: {exc})") from None
        finally:
            mem.close()

    def snapshot(self, path: str | Path) -> None:
        """Copy the whole store to a new SQLite file with the online backup API (a checkpoint)."""
        with self._lock:
            dest = sqlite3.connect(str(path))
            try:
                self._db.backup(dest)
            finally:
                dest.close()
