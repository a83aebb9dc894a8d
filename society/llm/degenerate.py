"""Degenerate replies: valid JSON that says nothing.

A small model given ``Reply as {"answer": "..."}`` copies it: the reply parses, validates,
and every number of the run then describes a copy machine. These checks name such a reply
so the run can count it (``degenerate`` beside failures and fallbacks) instead of trusting it:

- ``empty``: a free-text field (or a reply without a schema) is blank;
- ``placeholder``: a free-text field holds the schema's placeholder (``...``, ``<answer>``,
  ``string``, the field's name or description);
- ``example``: a free-text field repeats the example value the prompt gave for it;
- ``repeated``: the same reply to distinct prompts far beyond chance (more than
  ``REPEAT_MIN`` of them and more than half of the cohort's distinct prompts so far), for
  replies with a free-text field that is not null (a choice among few repeats by chance).

Numbers and booleans alone are never judged: a copied example number looks like a choice.
"""

from __future__ import annotations

import json
import re
import types
import typing
from typing import Any

from pydantic import BaseModel

KINDS = ("empty", "placeholder", "example", "repeated")
REPEAT_MIN = 3  # a reply given to this many distinct prompts may still be chance
MAX_TRACKED = 100_000  # distinct prompts tracked per cohort; beyond, no new "repeated"
_PLACEHOLDERS = {"...", "…", "string", "str", "text", "<string>", "<text>", "<...>", "todo", "tbd"}
_DOTS = re.compile(r"^[\s.…]*$")
# A JSON object that a prompt offers as the form of the reply ("Reply as {...}", "e.g. {...}").
_EXAMPLE = re.compile(
    r"(?:reply|respond|answer|return|output|e\.g\.|example|for instance|such as|like)\b[^{}\n]{0,40}(\{[^{}]*\})",
    re.IGNORECASE,
)
_PAIR = re.compile(r'"(\w+)"\s*:\s*"((?:[^"\\]|\\.)*)"')


def text_fields(schema: type[BaseModel]) -> list[str]:
    """The free-text fields of a schema: ``str`` (or optional ``str``) without choices."""
    out = []
    for name, f in schema.model_fields.items():
        ann = f.annotation
        if typing.get_origin(ann) in (typing.Union, types.UnionType):
            args = [a for a in typing.get_args(ann) if a is not type(None)]
            ann = args[0] if len(args) == 1 else None
        pattern = any(getattr(m, "pattern", None) for m in f.metadata)
        if ann is str and not pattern:
            out.append(name)
    return out


def prompt_examples(messages: list[dict[str, Any]]) -> dict[str, set[str]]:
    """Field -> the string values a prompt's reply instructions give as examples."""
    out: dict[str, set[str]] = {}
    for m in messages:
        content = m.get("content")
        if not isinstance(content, str):
            continue
        for obj in _EXAMPLE.findall(content):
            for key, value in _PAIR.findall(obj):
                out.setdefault(key, set()).add(_norm(value))
    return out


def classify(
    parsed: BaseModel | None,
    text: str,
    messages: list[dict[str, Any]],
    schema: type[BaseModel] | None,
) -> str | None:
    """The kind of degenerate reply (``empty``, ``placeholder``, ``example``) or None."""
    if schema is None or parsed is None:
        return (
            "empty" if not text.strip() else "placeholder" if _norm(text) in _PLACEHOLDERS else None
        )
    fields = text_fields(schema)
    if not fields:
        return None
    examples: dict[str, set[str]] | None = None
    for name in fields:
        value = getattr(parsed, name)
        if value is None:
            continue
        v = _norm(value)
        if not v:
            return "empty"
        info = schema.model_fields[name]
        if (
            _DOTS.match(v)
            or v in _PLACEHOLDERS
            or v in (name, f"<{name}>", _norm(info.description or ""))
        ):
            return "placeholder"
        if examples is None:
            examples = prompt_examples(messages)
        if v in examples.get(name, ()):
            return "example"
    return None


def _norm(value: str) -> str:
    return " ".join(str(value).split()).strip("\"'`").lower()


class RepeatTracker:
    """Which replies of a cohort answered which distinct prompts (for ``repeated``)."""

    def __init__(self) -> None:
        self.prompts: dict[str, set[str]] = {}  # cohort -> distinct prompt keys
        self.replies: dict[tuple[str, str], set[str]] = {}  # (cohort, reply) -> prompt keys

    def see(self, cohort: str, prompt: str, parsed: BaseModel) -> bool:
        """Count a reply to a prompt; True when it is repeated far beyond chance. A reply
        whose text fields are all null (a choice that needs no text) is a choice: not judged."""
        if all(getattr(parsed, f) is None for f in text_fields(type(parsed))):
            return False
        key = prompt[:24]  # a prefix of the request key is distinct enough, and small
        seen = self.prompts.setdefault(cohort, set())
        if key not in seen and len(seen) >= MAX_TRACKED:
            return False
        seen.add(key)
        reply = json.dumps(parsed.model_dump(mode="json"), sort_keys=True).lower()
        same = self.replies.setdefault((cohort, reply), set())
        same.add(key)
        return len(same) > REPEAT_MIN and len(same) > len(seen) / 2

    def state_dict(self) -> dict[str, Any]:
        return {
            "prompts": {c: sorted(s) for c, s in self.prompts.items()},
            "replies": [[c, r, sorted(s)] for (c, r), s in self.replies.items()],
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.prompts = {c: set(s) for c, s in state.get("prompts", {}).items()}
        self.replies = {(c, r): set(s) for c, r, s in state.get("replies", [])}
