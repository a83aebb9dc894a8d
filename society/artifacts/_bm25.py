"""Incremental BM25 over an append-only corpus, in numpy.

Why not ``bm25s``: its index is immutable. It stores precomputed per-posting scores that
embed each term's idf, so every insert changes the scores of all earlier documents that
share a term, and the only way to add documents is a full rebuild (O(corpus) per insert;
see ``benchmarks/bench_artifacts.py`` for the measured cost). Here the index keeps raw
term frequencies, document frequencies and lengths, and applies idf and length
normalisation at query time, so an insert costs O(its own tokens) and the scores are always
exact for the current corpus. The formula is the Lucene variant (``bm25s``' default), and
the tests check the scores against ``bm25s`` on a shared corpus.

Postings live in two parts: a ``main`` part sorted by term (CSR: ``ptr`` into ``doc``/``tf``)
and an unsorted append-only ``tail``. Queries read a term's slice of ``main`` and scan the
tail; the tail is merged into ``main`` lazily, at query time, once it exceeds an eighth of
``main``, so merges cost O(nnz log nnz) amortised over many inserts.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import numpy as np

_TOKEN = re.compile(r"(?u)\b\w\w+\b")  # the scikit-learn / bm25s default token pattern
_MIN_TAIL_BEFORE_MERGE = 4096


def tokenize(text: str) -> list[str]:
    """Lower-cased word tokens of two or more characters (no stemming, no stopwords)."""
    return _TOKEN.findall(text.lower())


class Growable:
    """A 1-D numpy buffer with amortised O(1) appends (capacity doubles); ``.data`` is a view."""

    def __init__(self, dtype: np.dtype | type, capacity: int = 1024) -> None:
        self._buf = np.zeros(capacity, dtype=dtype)
        self._n = 0

    def extend(self, values: np.ndarray | Sequence) -> None:
        values = np.asarray(values, dtype=self._buf.dtype)
        need = self._n + values.size
        if need > self._buf.size:
            grown = np.zeros(max(need, 2 * self._buf.size), dtype=self._buf.dtype)
            grown[: self._n] = self._buf[: self._n]
            self._buf = grown
        self._buf[self._n : need] = values
        self._n = need

    def clear(self) -> None:
        self._n = 0

    @property
    def data(self) -> np.ndarray:
        return self._buf[: self._n]

    def __len__(self) -> int:
        return self._n


class BM25Index:
    """BM25 (Lucene) scores of a query against every document added so far.

    idf(t) = ln(1 + (N - df + 0.5) / (df + 0.5));
    score(d, q) = sum over distinct known terms t of q of
                  idf(t) * tf / (tf + k1 * (1 - b + b * len(d) / avg_len)).
    Statistics (N, df, avg_len) cover every document ever added; callers filter afterwards.
    """

    def __init__(self, k1: float = 1.5, b: float = 0.75) -> None:
        self.k1, self.b = float(k1), float(b)
        self.vocab: dict[str, int] = {}
        self._df = Growable(np.int64)
        self._doc_len = Growable(np.float64)
        self._total_len = 0.0
        self._ptr = np.zeros(1, dtype=np.int64)  # main postings, CSR by term
        self._doc = np.zeros(0, dtype=np.int64)
        self._tf = np.zeros(0, dtype=np.float64)
        self._tail_term = Growable(np.int64)
        self._tail_doc = Growable(np.int64)
        self._tail_tf = Growable(np.float64)

    @property
    def n_docs(self) -> int:
        return len(self._doc_len)

    def add(self, texts: Sequence[str]) -> None:
        """Append documents; they get the next consecutive document numbers."""
        if not texts:
            return
        vocab = self.vocab
        term_ids: list[int] = []
        lens = np.empty(len(texts), dtype=np.int64)
        # Tokenising is per document (string work has no vectorised form); the counting
        # below is vectorised over the whole batch.
        for i, text in enumerate(texts):
            ids = [vocab.setdefault(tok, len(vocab)) for tok in tokenize(text)]
            term_ids.extend(ids)
            lens[i] = len(ids)
        n_vocab = len(vocab)
        docs = np.repeat(np.arange(self.n_docs, self.n_docs + len(texts), dtype=np.int64), lens)
        keys, counts = np.unique(
            docs * n_vocab + np.asarray(term_ids, dtype=np.int64), return_counts=True
        )
        doc, term = np.divmod(keys, n_vocab) if n_vocab else (keys, keys)
        self._df.extend(np.zeros(n_vocab - len(self._df), dtype=np.int64))
        self._df.data[:] += np.bincount(term, minlength=n_vocab)
        self._tail_term.extend(term)
        self._tail_doc.extend(doc)
        self._tail_tf.extend(counts)
        self._doc_len.extend(lens)
        self._total_len += float(lens.sum())

    def scores(self, query: str) -> np.ndarray:
        """Dense BM25 scores of ``query`` for all documents (zeros where no term matches)."""
        out = np.zeros(self.n_docs)
        terms = np.unique(
            np.fromiter((self.vocab.get(t, -1) for t in tokenize(query)), dtype=np.int64)
        )
        terms = terms[terms >= 0]
        if terms.size == 0 or self._total_len == 0:
            return out
        self._maybe_merge()
        in_main = terms[terms < self._ptr.size - 1]
        lo, hi = self._ptr[in_main], self._ptr[in_main + 1]
        # Loop over the query's terms (a handful), not over documents.
        idx = np.concatenate(
            [np.arange(a, z) for a, z in zip(lo, hi, strict=True)] + [np.zeros(0, np.int64)]
        )
        in_tail = np.isin(self._tail_term.data, terms)
        term = np.concatenate([np.repeat(in_main, hi - lo), self._tail_term.data[in_tail]])
        doc = np.concatenate([self._doc[idx], self._tail_doc.data[in_tail]])
        tf = np.concatenate([self._tf[idx], self._tail_tf.data[in_tail]])
        n = self.n_docs
        df = self._df.data[term]
        idf = np.log1p((n - df + 0.5) / (df + 0.5))
        norm = self.k1 * (1.0 - self.b + self.b * self._doc_len.data[doc] / (self._total_len / n))
        return np.bincount(doc, weights=idf * tf / (tf + norm), minlength=n)

    def _maybe_merge(self) -> None:
        if len(self._tail_term) <= max(_MIN_TAIL_BEFORE_MERGE, self._doc.size // 8):
            return
        n_vocab = len(self.vocab)
        term = np.concatenate(
            [np.repeat(np.arange(self._ptr.size - 1), np.diff(self._ptr)), self._tail_term.data]
        )
        order = np.argsort(term, kind="stable")
        self._doc = np.concatenate([self._doc, self._tail_doc.data])[order]
        self._tf = np.concatenate([self._tf, self._tail_tf.data])[order]
        self._ptr = np.zeros(n_vocab + 1, dtype=np.int64)
        np.cumsum(np.bincount(term, minlength=n_vocab), out=self._ptr[1:])
        self._tail_term.clear()
        self._tail_doc.clear()
        self._tail_tf.clear()
