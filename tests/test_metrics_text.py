"""Lexical diversity (MATTR, Covington & McFall 2010) against its definition, on text."""

import numpy as np
import pytest

from society.artifacts import tokenize
from society.metrics import lexical_diversity


def _by_definition(texts: list[str], window: int) -> float:
    words = [w for t in texts for w in tokenize(t)]
    if len(words) <= window:
        return len(set(words)) / len(words)
    runs = [words[s : s + window] for s in range(len(words) - window + 1)]
    return float(np.mean([len(set(r)) / window for r in runs]))


def test_equals_the_mean_over_windows_of_distinct_words() -> None:
    rng = np.random.default_rng(0)
    for _ in range(100):
        texts = [
            " ".join(f"w{x}" for x in rng.integers(0, rng.integers(2, 80), rng.integers(1, 40)))
            for _ in range(rng.integers(1, 6))
        ]
        window = int(rng.integers(1, 60))
        assert lexical_diversity(texts, window) == pytest.approx(_by_definition(texts, window))


def test_known_values_and_no_text() -> None:
    assert lexical_diversity(["to be or not to be"]) == pytest.approx(4 / 6)  # plain ratio
    assert lexical_diversity(["ha ha ha ha"]) == 0.25
    assert np.isnan(lexical_diversity([])) and np.isnan(lexical_diversity(["", "!"]))
    with pytest.raises(ValueError, match="window must be a positive number"):
        lexical_diversity(["a b"], 0)


def test_unlike_the_type_token_ratio_it_does_not_fall_with_more_text() -> None:
    """Words drawn uniformly from 500: a window of 50 holds 47.7 distinct on average
    (500 * (1 - (499/500)**50)), however long the text; the plain ratio falls from 0.9 to
    0.4. Tolerance 0.02: the windows' mean over 2,000 words has a standard error under 0.005."""
    rng = np.random.default_rng(1)
    words = [f"w{x}" for x in rng.integers(0, 500, 2000)]
    short, long_ = lexical_diversity([" ".join(words[:200])]), lexical_diversity([" ".join(words)])
    expected = 500 * (1 - (499 / 500) ** 50) / 50
    assert short == pytest.approx(expected, abs=0.02) and long_ == pytest.approx(expected, abs=0.02)
    assert len(set(words)) / len(words) < 0.5
