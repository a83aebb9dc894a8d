"""Validated configuration of the LLM client.

The config names the environment variable that holds an API key, never the key itself, so a
config can be written to a run directory, logged or hashed without leaking a secret.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

# litellm providers that speak the OpenAI chat-completions protocol over HTTP: the fast path
# can send their requests itself. ("ollama/" and "ollama_chat/" use Ollama's native API in
# litellm; point "openai/<model>" at Ollama's "/v1" to use the fast path.)
OPENAI_COMPATIBLE_PROVIDERS = frozenset(
    {"openai", "hosted_vllm", "llamafile", "lm_studio", "openai_like", "custom_openai"}
)
OPENAI_API_BASE = "https://api.openai.com/v1"

_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def _check_env_name(value: str | None) -> str | None:
    # Never echo the value: a user who puts the key itself here must not see it in a traceback.
    if value is not None and not _ENV_NAME.fullmatch(value):
        raise ValueError(
            "api_key_env must be the NAME of an environment variable holding the key "
            "(letters, digits, underscores, e.g. OPENAI_API_KEY), not the key itself"
        )
    return value


class Endpoint(BaseModel):
    """A model on a server, used as a fallback through litellm's Router."""

    # hide_input_in_errors: a key pasted into api_key_env must not reappear in a traceback.
    model_config = ConfigDict(extra="forbid", frozen=True, hide_input_in_errors=True)

    model: str = Field(min_length=1)
    api_base: str | None = None
    api_key_env: str | None = None

    @field_validator("api_key_env")
    @classmethod
    def _check_key_env(cls, value: str | None) -> str | None:
        return _check_env_name(value)


class LLMConfig(BaseModel):
    """How the framework calls its language model.

    ``model`` is any litellm model string ("openai/gpt-4o-mini", "anthropic/claude-...",
    "hosted_vllm/llama", ...). ``api_base`` points it at a server (a local OpenAI-compatible
    one for example); ``replicas`` are more servers of the same model, shared round-robin.
    ``fallbacks`` are tried, through litellm's Router, when a call to ``model`` fails; a plain
    string shares ``api_base`` and ``api_key_env`` with the primary model.

    ``structured_output`` says how an action schema is sent: "json_schema" (OpenAI, vLLM),
    "json_object" with the schema inside (what llama.cpp's server accepts), or "prompt" (the
    schema in a system message, for servers without constrained decoding). ``fast_path``
    None picks the aiohttp fast path for OpenAI-compatible models without fallbacks.
    ``budget_tokens`` / ``budget_usd`` count cached replies at their recorded usage.
    ``shards`` > 1 makes the network calls in that many Ray actors (``society.llm.shards``).
    """

    # hide_input_in_errors: a key pasted into api_key_env must not reappear in a traceback.
    model_config = ConfigDict(extra="forbid", frozen=True, hide_input_in_errors=True)

    model: str = Field(min_length=1)
    api_base: str | None = None
    api_key_env: str | None = None
    replicas: list[str] = Field(default_factory=list)
    temperature: float = Field(default=0.0, ge=0.0, le=2.0)
    max_tokens: int = Field(default=256, gt=0)
    seed: int | None = None
    timeout_s: float = Field(default=60.0, gt=0)
    max_retries: int = Field(default=3, ge=0, le=20)
    backoff_base_s: float = Field(default=0.5, ge=0)
    backoff_max_s: float = Field(default=30.0, ge=0)
    concurrency: int = Field(default=256, gt=0)
    per_model_concurrency: int | None = Field(default=None, gt=0)
    structured_output: Literal["json_schema", "json_object", "prompt"] = "json_schema"
    cache_path: Path | None = None
    replay: bool = False
    budget_tokens: int | None = Field(default=None, gt=0)
    budget_usd: float | None = Field(default=None, gt=0)
    fast_path: bool | None = None
    fallbacks: list[str | Endpoint] = Field(default_factory=list)
    shards: int = Field(default=1, ge=1, le=1024)

    @field_validator("api_key_env")
    @classmethod
    def _check_key_env(cls, value: str | None) -> str | None:
        return _check_env_name(value)

    @field_validator("api_base", "replicas")
    @classmethod
    def _check_urls(cls, value: str | list[str] | None) -> str | list[str] | None:
        for url in [value] if isinstance(value, str) else value or []:
            if not url.startswith(("http://", "https://")):
                raise ValueError(f"api_base must start with http:// or https://, got {url!r}")
        return value

    @model_validator(mode="after")
    def _check_combination(self) -> LLMConfig:
        if self.replay and self.cache_path is None:
            raise ValueError("replay=True needs cache_path: replay answers only from the cache")
        if self.replicas and self.api_base is None:
            raise ValueError("replicas need api_base: they are more servers of the same model")
        if self.fast_path and not self.fast_path_possible:
            raise ValueError(
                "fast_path=True needs an OpenAI-compatible model "
                f"(provider one of {sorted(OPENAI_COMPATIBLE_PROVIDERS)}, or a bare model name "
                "with api_base) and no fallbacks; use fast_path=None or False"
            )
        return self

    @property
    def provider(self) -> str | None:
        """The litellm provider prefix of ``model`` ("openai" in "openai/gpt-4o"), if any."""
        head, sep, _ = self.model.partition("/")
        return head if sep else None

    @property
    def model_name(self) -> str:
        """The model as the server knows it (the provider prefix removed)."""
        return self.model.partition("/")[2] if self.provider else self.model

    @property
    def fast_path_possible(self) -> bool:
        if self.fallbacks:
            return False
        if self.provider is None:
            return self.api_base is not None
        return self.provider in OPENAI_COMPATIBLE_PROVIDERS

    @property
    def uses_fast_path(self) -> bool:
        """True when calls go over the aiohttp fast path rather than through litellm."""
        return self.fast_path_possible if self.fast_path is None else self.fast_path

    @property
    def api_bases(self) -> list[str]:
        """Every server of the primary model, in round-robin order."""
        return [self.api_base or OPENAI_API_BASE, *self.replicas]
