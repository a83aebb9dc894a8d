"""The framework's one LLM client: concurrent, cached, budgeted and replayable calls.

    from society.llm import LLMClient, LLMConfig, Request

    async with LLMClient(LLMConfig(model="openai/gpt-4o-mini")) as client:
        completions = await client.complete_many([Request(messages=[...], schema=Action)])

OpenAI-compatible servers are called over an aiohttp fast path; every other provider (and
fallbacks) through litellm, which is imported only then, quietly and offline. The scriptable
test server lives in ``society.llm.testserver``. Importing this package imports neither
litellm nor aiohttp.
"""

from society.llm.archetypes import Archetypes
from society.llm.cache import ResponseCache, request_key
from society.llm.client import (
    Completion,
    LLMClient,
    ReplayMissError,
    Request,
    Usage,
)
from society.llm.config import Endpoint, LLMConfig

__all__ = [
    "Archetypes",
    "Completion",
    "Endpoint",
    "LLMClient",
    "LLMConfig",
    "ReplayMissError",
    "Request",
    "ResponseCache",
    "Usage",
    "request_key",
]
