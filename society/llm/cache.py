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
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

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
_CHUNK = 500  # keys per SELECT, well under SQLite's bound-parameter limit


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
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self._db = sqlite3.connect(path)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")
        self._db.execute(_SCHEMA)
        self._db.commit()

    def get_many(self, keys: Iterable[tuple[str, int]]) -> dict[tuple[str, int], CacheEntry]:
        """The stored entries among ``keys`` (pairs of request key and sample index)."""
        wanted = list(dict.fromkeys(keys))
        found: dict[tuple[str, int], CacheEntry] = {}
        for start in range(0, len(wanted), _CHUNK):
            chunk = wanted[start : start + _CHUNK]
            hashes = sorted({k for k, _ in chunk})
            marks = ",".join("?" * len(hashes))
            rows = self._db.execute(
                "SELECT key, sample, text, prompt_tokens, completion_tokens, cost_usd, priced, "
                f"error FROM responses WHERE key IN ({marks})",
                hashes,
            )
            want = set(chunk)
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
        with self._db:
            self._db.executemany(
                "INSERT OR REPLACE INTO responses VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", rows
            )

    def __len__(self) -> int:
        return int(self._db.execute("SELECT COUNT(*) FROM responses").fetchone()[0])

    def close(self) -> None:
        self._db.close()
