"""Validation of LLMConfig and the choice between the fast path and litellm."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from society.llm import Endpoint, LLMConfig
from society.llm.prices import token_cost


@pytest.mark.parametrize(
    ("model", "api_base", "fast"),
    [
        ("openai/gpt-4o-mini", None, True),
        ("hosted_vllm/llama-3", "http://127.0.0.1:8000/v1", True),
        ("openai/gemma", "http://127.0.0.1:8080/v1", True),
        ("anthropic/claude-3-5-haiku", None, False),
        ("ollama/llama3", "http://127.0.0.1:11434", False),
        ("gpt-4o-mini", None, False),
        ("local-model", "http://127.0.0.1:8080/v1", True),
    ],
)
def test_the_fast_path_is_chosen_for_openai_compatible_endpoints(model, api_base, fast):
    assert LLMConfig(model=model, api_base=api_base).uses_fast_path is fast


def test_fallbacks_go_through_litellm_and_forcing_the_fast_path_is_refused():
    config = LLMConfig(model="openai/a", fallbacks=["openai/b"])
    assert not config.uses_fast_path
    with pytest.raises(ValidationError, match="fast_path=True needs an OpenAI-compatible model"):
        LLMConfig(model="anthropic/claude", fast_path=True)
    with pytest.raises(ValidationError, match="fast_path=True needs"):
        LLMConfig(model="openai/a", fallbacks=[Endpoint(model="openai/b")], fast_path=True)


def test_api_key_env_must_be_a_variable_name_and_the_key_is_not_echoed():
    key = "sk-proj-abc123-SECRET"
    with pytest.raises(ValidationError) as err:
        LLMConfig(model="openai/m", api_key_env=key)
    assert "NAME of an environment variable" in str(err.value)
    assert key not in str(err.value)
    assert LLMConfig(model="openai/m", api_key_env="MY_KEY").api_key_env == "MY_KEY"


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("api_base", "localhost:8000", "must start with http"),
        ("concurrency", 0, "greater than 0"),
        ("temperature", 3.0, "less than or equal to 2"),
        ("structured_output", "xml", "json_schema"),
        ("replay", True, "replay=True needs cache_path"),
        ("replicas", ["http://127.0.0.1:1/v1"], "replicas need api_base"),
        ("max_tokns", 10, "Extra inputs are not permitted"),
    ],
)
def test_bad_fields_are_named(field, value, message):
    with pytest.raises(ValidationError, match=message) as err:
        LLMConfig(model="openai/m", **{field: value})
    assert field in str(err.value) or field in ("replay", "replicas")


def test_fast_path_cost_comes_from_litellms_price_table():
    cost, priced = token_cost("openai/gpt-4o-mini", 1000, 100)
    assert priced and cost == pytest.approx(1000 * 1.5e-7 + 100 * 6e-7)
    assert token_cost("openai/no-such-model", 1000, 100) == (0.0, False)
