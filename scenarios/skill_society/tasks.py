"""The task world of skill-society: procedurally generated tasks with hidden rules.

A *domain* (a niche) is a family of rules indexed by an integer parameter ``p``: shifting
letters by ``p``, adding ``p`` to numbers, repeating letters ``p`` times, continuing a
sequence with step ``p``, rotating a word by ``p``. An instance shows a few worked examples
of one rule and asks for the output of a new input; :func:`verify` scores an answer
exactly. Splits:

- ``train``: instances of the training rules (``TRAIN_PARAMS``) that agents practise on;
- ``heldout``: new instances of the same rules, never practised (in distribution);
- ``ood``: shifted parameters (``OOD_PARAMS``) of the trained domains, plus the domain
  ``rotate`` that no agent trains on.

Difficulty (0..1) sets how many examples are shown (4 down to 1) and how long inputs are,
so a strong API model improves visibly while a small local model sometimes succeeds. A
rule is stated in one canonical sentence (:func:`describe_rule`) that :func:`parse_rule`
reads back: that is what a useful note says, and what the scripted test server looks for.
Pure Python and deterministic in the ``numpy`` generator it is given.
"""

from __future__ import annotations

import re
import string
from dataclasses import dataclass

import numpy as np

DOMAINS = ("shift", "add", "repeat", "step")
"""Domains agents train on (the niches of the skill model)."""
OOD_DOMAIN = "rotate"
"""A domain that appears only in the out-of-distribution split."""
TRAIN_PARAMS = {
    "shift": (1, 2, 3),
    "add": (2, 3, 5),
    "repeat": (2, 3),
    "step": (2, 3, 4),
    "rotate": (),
}
OOD_PARAMS = {"shift": (7, 9), "add": (11, 17), "repeat": (4,), "step": (9, 12), "rotate": (1, 2)}
SPLITS = ("train", "heldout", "ood")

_PHRASES = {
    "shift": "shift each letter {p} places forward in the alphabet",
    "add": "add {p} to each number",
    "repeat": "repeat each letter {p} times",
    "step": "continue the sequence: each number is {p} more than the one before",
    "rotate": "rotate the word left by {p} letters",
}
_PARSE = {
    d: re.compile(re.escape(t).replace(r"\{p\}", r"(\d+)"), re.I) for d, t in _PHRASES.items()
}


@dataclass(frozen=True)
class Task:
    """One instance: the rule (domain, p), worked examples, the query and its answer."""

    domain: str
    p: int
    examples: tuple[tuple[str, str], ...]
    query: str
    answer: str

    @property
    def rule(self) -> tuple[str, int]:
        return self.domain, self.p

    def prompt(self) -> str:
        lines = [f"Task domain: {self.domain}. Find the hidden rule from the examples."]
        lines += [f"  {x} -> {y}" for x, y in self.examples]
        lines.append(f"What is the output for: {self.query}")
        return "\n".join(lines)


def describe_rule(domain: str, p: int) -> str:
    """The canonical sentence stating a rule: ``"add: add 3 to each number"``."""
    return f"{domain}: {_PHRASES[domain].format(p=p)}"


def parse_rule(text: str) -> list[tuple[str, int]]:
    """Every rule stated in ``text`` (canonical sentences only), in order of appearance."""
    found = []
    for domain, pattern in _PARSE.items():
        found += [(m.start(), domain, int(m.group(1))) for m in pattern.finditer(text)]
    return [(d, p) for _, d, p in sorted(found)]


def apply_rule(domain: str, p: int, x: str) -> str:
    """The rule's output for input ``x`` (the world's ground truth)."""
    if domain == "shift":
        a = string.ascii_lowercase
        return "".join(a[(a.index(c) + p) % 26] for c in x)
    if domain == "add":
        return " ".join(str(int(v) + p) for v in x.split())
    if domain == "repeat":
        return "".join(c * p for c in x)
    if domain == "step":
        return str(int(x.split()[-1]) + p)
    if domain == "rotate":
        k = p % len(x)
        return x[k:] + x[:k]
    raise ValueError(f"unknown domain {domain!r}; known: {', '.join((*DOMAINS, OOD_DOMAIN))}")


def infer_rule(domain: str, examples: tuple[tuple[str, str], ...], max_p: int = 30) -> int | None:
    """The smallest ``p`` in 1..max_p consistent with every example (what a solver would find)."""
    for p in range(1, max_p + 1):
        if all(apply_rule(domain, p, x) == y for x, y in examples):
            return p
    return None


def _input(domain: str, p: int, length: int, rng: np.random.Generator) -> str:
    if domain in ("shift", "repeat", "rotate"):
        return "".join(rng.choice(list(string.ascii_lowercase), size=length))
    if domain == "add":
        return " ".join(str(v) for v in rng.integers(0, 50, size=max(2, length // 2)))
    start = int(rng.integers(0, 20))  # step: a prefix of the sequence
    return " ".join(str(start + i * p) for i in range(max(3, length // 2)))


def make_task(domain: str, p: int, difficulty: float, rng: np.random.Generator) -> Task:
    """One instance of rule (domain, p) at ``difficulty`` in [0, 1]."""
    shown = max(1, round(4 - 3 * difficulty))
    length = 3 + round(4 * difficulty)
    xs = [_input(domain, p, length, rng) for _ in range(shown + 1)]
    examples = tuple((x, apply_rule(domain, p, x)) for x in xs[:-1])
    return Task(domain, p, examples, xs[-1], apply_rule(domain, p, xs[-1]))


def sample_tasks(split: str, n: int, difficulty: float, rng: np.random.Generator) -> list[Task]:
    """``n`` instances of ``split``; ``train`` and ``heldout`` draw the same rules, from
    different generators (the caller's streams), so held-out instances are new."""
    if split not in SPLITS:
        raise ValueError(f"split must be one of {', '.join(SPLITS)}, got {split!r}")
    params = TRAIN_PARAMS if split != "ood" else OOD_PARAMS
    rules = [(d, p) for d, ps in params.items() for p in ps]
    picks = rng.integers(0, len(rules), size=n)
    return [make_task(*rules[i], difficulty, rng) for i in picks.tolist()]


def train_task(domain: str, difficulty: float, rng: np.random.Generator) -> Task:
    """A training instance of ``domain`` (a random training rule)."""
    params = TRAIN_PARAMS[domain]
    return make_task(domain, params[int(rng.integers(0, len(params)))], difficulty, rng)


def _normalise(text: str) -> str:
    return " ".join(str(text).strip().strip("\"'`.").lower().split())


def verify(task: Task, answer: str) -> bool:
    """Exact match after trimming quotes, case and spacing."""
    return _normalise(answer) == _normalise(task.answer)
