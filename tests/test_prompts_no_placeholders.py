"""Built-in prompts give the form of a reply in words or with real values, never with a
placeholder a small model copies (``{"answer": "..."}`` made every demo answer ``...``)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest
from pydantic import BaseModel

from scenarios.skill_society.prompts import distil_messages, solve_messages
from scenarios.skill_society.tasks import SPLITS, sample_tasks
from society.llm.degenerate import prompt_examples

ROOT = Path(__file__).resolve().parents[1]
PROMPT_FILES = sorted(
    [*ROOT.glob("scenarios/*/prompts.py"), *ROOT.glob("scenarios/*/model.py"), *ROOT.glob("scenarios/*/cohorts.py"),
     ROOT / "society/cohorts/llm.py"]
)  # fmt: skip
# A JSON key followed by a placeholder value: "...", "<...>", <...>, or a list of them.
PLACEHOLDER = re.compile(r'"\w+"\s*:\s*(?:"(?:\.\.\.|…|<[^"]*>)"|<[^>]*>|\[[^\]]*(?:\.\.\.|<))')


def _strings(path: Path) -> list[str]:
    return [
        n.value
        for n in ast.walk(ast.parse(path.read_text()))
        if isinstance(n, ast.Constant) and isinstance(n.value, str)
    ]


@pytest.mark.parametrize("path", PROMPT_FILES, ids=lambda p: str(p.relative_to(ROOT)))
def test_no_prompt_text_shows_a_placeholder_as_an_example_value(path):
    bad = [s for s in _strings(path) if PLACEHOLDER.search(s)]
    assert not bad, f"{path.relative_to(ROOT)}: placeholder example value in {bad[0]!r}"


def _schemas() -> list[type[BaseModel]]:
    import scenarios.commons.prompts
    import scenarios.division_of_labour.prompts
    import scenarios.donor_game.prompts
    import scenarios.epidemic.prompts
    import scenarios.indirect_reciprocity.prompts
    import scenarios.market.prompts
    import scenarios.network_game.model
    import scenarios.public_goods.prompts
    import scenarios.skill_society.prompts

    modules = [
        scenarios.commons.prompts, scenarios.division_of_labour.prompts, scenarios.donor_game.prompts,
        scenarios.epidemic.prompts, scenarios.indirect_reciprocity.prompts, scenarios.market.prompts,
        scenarios.network_game.model, scenarios.public_goods.prompts, scenarios.skill_society.prompts,
    ]  # fmt: skip
    return [
        v for m in modules for v in vars(m).values()
        if isinstance(v, type) and issubclass(v, BaseModel) and v.__module__ == m.__name__ and "Config" not in v.__name__
    ]  # fmt: skip


def test_action_schema_descriptions_hold_no_placeholder():
    """The schema goes to the model too (grammar or system note): its descriptions are words."""
    schemas = _schemas()
    assert len(schemas) >= 10
    for schema in schemas:
        for name, f in schema.model_fields.items():
            text = f.description or ""
            assert "..." not in text and "…" not in text and not re.search(r"<[^>]*>", text), (
                schema.__name__,
                name,
                text,
            )


def test_skill_society_prompts_give_the_reply_form_without_an_example_value():
    import numpy as np

    rng = np.random.default_rng(1)
    for split in SPLITS:
        for task in sample_tasks(split, 4, 1, rng):
            for messages in (
                solve_messages(task, []),
                distil_messages(task, "abc", False),
                distil_messages(task, "abc", True, kind="code"),
            ):
                text = "\n".join(m["content"] for m in messages)
                assert not PLACEHOLDER.search(text), text
                assert prompt_examples(messages) == {}, text  # nothing to copy
                assert "JSON object" in text
