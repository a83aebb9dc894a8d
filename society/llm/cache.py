"""Persistent response cache in SQLite, which also makes runs replayable offline.

An entry is keyed by the hash of everything that determines a reply (model, messages,
parameters, schema) plus the sample index, and holds the reply text and its usage: never an
API key, an api_base or a header. Final failures are stored too, so a replay reproduces a run
whose calls sometimes failed; outside replay they are ignored and the call is tried again.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sim_core.errors import ConfigError

_SCHEMA = """
CREATE TABLE IF NOT EXISTS responses (
    key TEXT NOT NULL,
    sample INTEGER NOT NULL,
    model TEXT NOT NULL,
    text TEXT NOT NULL,
    prompt_tokens INTEGER NOT NULL,
    completion_tokens INTEGER NOT NULL,
    cost_usd REAL NOT NULL,
    priced INTEGER NOT NULL,
    error TEXT,
    created_at REAL NOT NULL,
    PRIMARY KEY (key, sample)
)
"""
_COLUMNS = (
    "key", "sample", "model", "text", "prompt_tokens", "completion_tokens", "cost_usd", "priced",
    "error", "created_at",
)  # fmt: skip
_CHUNK = 500  # keys per SELECT, well under SQLite's bound-parameter limit


class CacheError(ConfigError):
    """The cache file cannot be used (corrupt, not a cache, unreadable); one line naming it."""


def _reason(exc: BaseException) -> str:
    return " ".join(str(exc).split()) or type(exc).__name__


def request_key(payload: dict[str, Any]) -> str:
    """sha256 of the canonical JSON of what determines a reply (sample index excluded)."""
    text = json.dumps(payload, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode()).hexdigest()


@dataclass(frozen=True)
class CacheEntry:
    """One stored outcome of one sample of a request."""

    text: str
    prompt_tokens: int
    completion_tokens: int
    cost_usd: float
    priced: bool
    error: str | None = None


class ResponseCache:
    """A SQLite table of outcomes, written in one transaction per batch of calls."""

    def __init__(self, path: str | Path) -> None:
        path = Path(path)
        self.path = path
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            if path.exists() and not path.is_file():
                raise CacheError(f"LLM cache '{path}' is not a file")
            self._db = sqlite3.connect(path)
        except (OSError, sqlite3.Error) as exc:
            raise CacheError(f"LLM cache '{path}' cannot be opened: {_reason(exc)}") from None
        try:
            # Check an existing file before anything writes to it (journal_mode=WAL rewrites
            # the header): a corrupt file or another program's database is left as it was.
            self._check_schema()
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=NORMAL")
            self._db.execute(_SCHEMA)
            self._db.commit()
        except BaseException as exc:
            self._db.close()
            if isinstance(exc, sqlite3.Error | OSError):
                raise CacheError(f"LLM cache '{path}' is unusable: {_reason(exc)}") from None
            raise

    def _check_schema(self) -> None:
        """Raise CacheError unless the file is empty or holds this cache's ``responses`` table."""
        if self.path.stat().st_size == 0:
            return  # a new (or emptied) database: the schema is created next
        with self.path.open("rb") as fh:
            if fh.read(16) != b"SQLite format 3\x00":
                raise CacheError(f"LLM cache '{self.path}' is not an SQLite database")
        try:
            rows = self._db.execute("SELECT name FROM sqlite_master WHERE type='table'")
            tables = {r[0] for r in rows}
            if not tables:
                return
            if "responses" not in tables:
                raise CacheError(
                    f"LLM cache '{self.path}' is an SQLite database without a 'responses' table "
                    "(another program's file?); point cache_path elsewhere"
                )
            columns = [r[1] for r in self._db.execute("PRAGMA table_info(responses)")]
        except sqlite3.Error as exc:
            raise CacheError(f"LLM cache '{self.path}' is corrupt: {_reason(exc)}") from None
        if columns != list(_COLUMNS):
            raise CacheError(
                f"LLM cache '{self.path}' has a 'responses' table with columns "
                f"({', '.join(columns)}), not ({', '.join(_COLUMNS)}); point cache_path elsewhere"
            )

    def get_many(self, keys: Iterable[tuple[str, int]]) -> dict[tuple[str, int], CacheEntry]:
        """The stored entries among ``keys`` (pairs of request key and sample index)."""
        wanted = list(dict.fromkeys(keys))
        found: dict[tuple[str, int], CacheEntry] = {}
        for start in range(0, len(wanted), _CHUNK):
            chunk = wanted[start : start + _CHUNK]
            hashes = sorted({k for k, _ in chunk})
            marks = ",".join("?" * len(hashes))
            want = set(chunk)
            with self._errors("read"):
                rows = self._db.execute(
                    "SELECT key, sample, text, prompt_tokens, completion_tokens, cost_usd, priced, "
                    f"error FROM responses WHERE key IN ({marks})",
                    hashes,
                ).fetchall()
            for key, sample, text, pt, ct, cost, priced, error in rows:
                if (key, sample) in want:
                    found[(key, sample)] = CacheEntry(text, pt, ct, cost, bool(priced), error)
        return found

    def put_many(self, entries: Iterable[tuple[str, int, str, CacheEntry]]) -> None:
        """Store (key, sample, model, entry) rows, replacing older ones, in one transaction."""
        now = time.time()
        rows = [
            (
                key,
                sample,
                model,
                e.text,
                e.prompt_tokens,
                e.completion_tokens,
                e.cost_usd,
                int(e.priced),
                e.error,
                now,
            )
            for key, sample, model, e in entries
        ]
        if not rows:
            return
        with self._errors("write"), self._db:
            self._db.executemany(
                "INSERT OR REPLACE INTO responses VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", rows
            )

    def __len__(self) -> int:
        with self._errors("read"):
            return int(self._db.execute("SELECT COUNT(*) FROM responses").fetchone()[0])

    @contextmanager
    def _errors(self, action: str) -> Iterator[None]:
        """SQLite errors (a file corrupt past its first page, a full disk) as one CacheError."""
        try:
            yield
        except sqlite3.Error as exc:
            raise CacheError(f"LLM cache '{self.path}': cannot {action}: {_reason(exc)}") from None

    def close(self) -> None:
        self._db.close()
