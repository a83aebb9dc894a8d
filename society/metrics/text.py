"""How varied the words are that agents write (posts, notes): lexical diversity."""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from society.artifacts import tokenize


def lexical_diversity(texts: Iterable[str], window: int = 50) -> float:
    """Moving-average type-token ratio (MATTR; Covington & McFall 2010) of the texts' words
    (``society.artifacts.tokenize``) read in order: the mean over every run of ``window``
    consecutive words of its distinct words / ``window``. Unlike the plain type-token ratio
    it does not fall as more text is written, so steps with many and with few posts compare.
    With fewer words than ``window``: the plain ratio; with none: NaN.

    Vectorised: the windows that count word ``i`` as new are those starting after the
    previous occurrence of the same word and at most ``window - 1`` words before ``i``.
    """
    if window < 1:
        raise ValueError(f"window must be a positive number of words, got {window!r}")
    words = [w for t in texts for w in tokenize(t)]
    n = len(words)
    if n == 0:
        return float("nan")
    ids = np.unique(np.asarray(words), return_inverse=True)[1].ravel()
    if n <= window:
        return float(np.unique(ids).size / n)
    order = np.lexsort((np.arange(n), ids))  # by word, then position
    prev = np.full(n, -1)
    same = ids[order[1:]] == ids[order[:-1]]
    prev[order[1:][same]] = order[:-1][same]
    i = np.arange(n)
    first = np.maximum(prev + 1, i - window + 1)  # window starts counting word i as new
    last = np.minimum(i, n - window)
    return float(np.maximum(last - first + 1, 0).sum() / ((n - window + 1) * window))
