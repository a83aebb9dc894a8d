"""Shared artifacts: a content-addressed SQLite store with provenance, sharing policies,
usefulness posteriors, BM25 retrieval, retirement and Parquet export."""

from society.artifacts._bm25 import tokenize
from society.artifacts.quoting import looks_like_injection, quote_for_prompt
from society.artifacts.store import (
    POLICIES,
    Artifact,
    ArtifactStore,
    SupportsNeighbours,
    artifact_id,
)

__all__ = [
    "POLICIES",
    "Artifact",
    "ArtifactStore",
    "SupportsNeighbours",
    "artifact_id",
    "looks_like_injection",
    "quote_for_prompt",
    "tokenize",
]
