"""The two ways a request reaches a model: an aiohttp fast path and litellm.

Both take the same OpenAI-style request parameters and return a ``RawReply`` or raise a
``TransportError`` that says whether a retry may help, so the client's retry, cache and
accounting logic is one code path whatever the transport.

litellm is imported here only, lazily, quietly and offline (see ``import_litellm``).
"""

from __future__ import annotations

import asyncio
import email.utils
import gc
import json
import logging
import os
import sys
import time
import warnings
from dataclasses import dataclass
from types import ModuleType
from typing import TYPE_CHECKING, Any

from sim_core.errors import RunError
from society.llm.config import LLMConfig
from society.llm.prices import token_cost

if TYPE_CHECKING:
    import aiohttp

# Set before litellm is imported: use the bundled price table instead of fetching one from the
# internet, skip other remote catalogs and tokenizer downloads, and keep its proxy telemetry off.
_LITELLM_QUIET_ENV = {
    "LITELLM_LOCAL_MODEL_COST_MAP": "True",
    "LITELLM_OFFLINE_MODE": "true",
    "LITELLM_LOCAL_ANTHROPIC_BETA_HEADERS": "true",
    "LITELLM_TELEMETRY_DISABLED": "true",
}
_LITELLM_LOGGERS = ("LiteLLM", "LiteLLM Router", "LiteLLM Proxy")
_NO_KEY = "no-key"  # litellm's OpenAI client insists on a key; local servers ignore it


def import_litellm() -> ModuleType:
    """Import litellm without network access, telemetry, warnings or log noise.

    Environment defaults are set only where the user has not set them, so
    ``LITELLM_LOCAL_MODEL_COST_MAP=False`` still lets a user fetch a fresh price table.
    """
    if "litellm" not in sys.modules:
        for name, value in _LITELLM_QUIET_ENV.items():
            os.environ.setdefault(name, value)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            import litellm  # noqa: F401
        # litellm's import leaves ~380k long-lived objects for the cyclic GC to walk on every
        # full collection; measured, that tripled the client CPU per call of the *fast* path
        # in the same process. Move them (and everything else alive now) out of its sight.
        gc.collect()
        gc.freeze()
    import litellm

    litellm.suppress_debug_info = True  # no "Give Feedback / Get Help" banner on errors
    litellm.telemetry = False
    for name in _LITELLM_LOGGERS:
        logging.getLogger(name).setLevel(logging.CRITICAL)  # the client reports failures itself
    # litellm imports modules lazily during its first calls; pydantic warns about their types,
    # and about litellm's response objects on some providers. Narrow filters, litellm's only.
    for message in (r".*using the `ReadOnly` qualifier", r"Pydantic serializer warnings"):
        warnings.filterwarnings("ignore", message=message, category=UserWarning)
    return litellm


@dataclass(frozen=True)
class RawReply:
    """What a transport got back: one text per choice and the call's usage and cost."""

    texts: list[str]
    prompt_tokens: int
    completion_tokens: int
    cost_usd: float
    priced: bool


class TransportError(Exception):
    """A failed call: ``retryable`` says whether trying again may help."""

    def __init__(
        self,
        message: str,
        *,
        retryable: bool,
        retry_after: float | None = None,
        status: int | None = None,
    ) -> None:
        super().__init__(message)
        self.retryable = retryable
        self.retry_after = retry_after
        self.status = status


AUTH_STATUSES = (401, 403)


class AuthError(RunError):
    """The server refused the API key (HTTP 401/403). Every later call would be refused the
    same way, so the run stops at once with this one line instead of retrying or falling
    back; the server's text is left out (it may quote the key)."""


def auth_error(status: int, api_base: str | None, key_env: str | None) -> AuthError:
    where = f"the server at {api_base}" if api_base else "the model's provider"
    if key_env and os.environ.get(key_env):
        fix = f"the key in ${key_env} was refused; put a valid key in it"
    elif key_env:
        fix = f"${key_env} is not set, so no key was sent; export the API key in it"
    else:
        fix = "no key was sent; name the environment variable holding one with --api-key-env NAME"
    return AuthError(f"{where} refused the request with HTTP {status} (authentication): {fix}")


def is_retryable_status(status: int) -> bool:
    """Timeouts, rate limits and server errors are worth retrying; other 4xx are not."""
    return status in (408, 425, 429) or status >= 500


def parse_retry_after(value: str | None) -> float | None:
    """Seconds from a Retry-After header (a number of seconds or an HTTP date)."""
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


def _check_texts(texts: list[Any]) -> list[str]:
    if not texts or any(not isinstance(t, str) or not t.strip() for t in texts):
        raise TransportError("empty reply from the model", retryable=True)
    return texts


def _api_key(env_name: str | None) -> str | None:
    """The key, read from the environment at call time and never kept."""
    return os.environ.get(env_name) if env_name else None


class FastTransport:
    """OpenAI-compatible chat completions over one shared aiohttp session.

    About 0.2-0.4 ms of client CPU per call where litellm spends several ms, which is what
    lets one process keep thousands of agent calls in flight.
    """

    def __init__(self, config: LLMConfig) -> None:
        import aiohttp

        self._aiohttp = aiohttp
        self._urls = [base.rstrip("/") + "/chat/completions" for base in config.api_bases]
        self._turn = 0
        self._model = config.model
        self._name = config.model_name
        # OpenAI itself needs a key; without api_key_env use the variable the openai SDK reads.
        self._key_env = config.api_key_env or (
            "OPENAI_API_KEY" if config.api_base is None else None
        )
        self._timeout = aiohttp.ClientTimeout(total=config.timeout_s)
        self._session: aiohttp.ClientSession | None = None

    async def send(self, params: dict[str, Any]) -> RawReply:
        if self._session is None:
            # Our semaphores bound concurrency; the connector must not add its own limit.
            connector = self._aiohttp.TCPConnector(limit=0, limit_per_host=0)
            self._session = self._aiohttp.ClientSession(connector=connector)
        url = self._urls[self._turn % len(self._urls)]
        self._turn += 1
        headers = {"Content-Type": "application/json"}
        key = _api_key(self._key_env)
        if key:
            headers["Authorization"] = f"Bearer {key}"
        data = json.dumps({"model": self._name, **params}).encode()
        try:
            async with self._session.post(
                url, data=data, headers=headers, timeout=self._timeout
            ) as resp:
                raw = await resp.read()
                status = resp.status
                retry_after = resp.headers.get("Retry-After")
        except TimeoutError as e:
            raise TransportError(
                f"timeout after {self._timeout.total:g} s", retryable=True, status=408
            ) from e
        except self._aiohttp.ClientError as e:
            # The exception's own text names the host and the refusal: the cause a user
            # needs when every call of a run fails.
            detail = " ".join(str(e).split())[:200]
            message = f"{type(e).__name__}: {detail}" if detail else type(e).__name__
            raise TransportError(f"connection error: {message}", retryable=True) from e
        if status in AUTH_STATUSES:
            raise auth_error(status, url.removesuffix("/chat/completions"), self._key_env)
        if status != 200:
            raise TransportError(
                f"HTTP {status}: {_error_detail(raw)}",
                retryable=is_retryable_status(status),
                retry_after=parse_retry_after(retry_after),
                status=status,
            )
        try:
            payload = json.loads(raw)
            texts = [choice["message"]["content"] for choice in payload["choices"]]
            usage = payload.get("usage") or {}
            prompt_tokens = int(usage.get("prompt_tokens") or 0)
            completion_tokens = int(usage.get("completion_tokens") or 0)
        except (ValueError, KeyError, TypeError, IndexError) as e:
            raise TransportError("malformed reply body from the server", retryable=True) from e
        cost, priced = token_cost(self._model, prompt_tokens, completion_tokens)
        return RawReply(_check_texts(texts), prompt_tokens, completion_tokens, cost, priced)

    async def aclose(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None


def _error_detail(raw: bytes) -> str:
    try:
        message = json.loads(raw)["error"]["message"]
        return str(message)[:300]
    except (ValueError, KeyError, TypeError):
        return raw[:300].decode("utf-8", "replace")


class LiteLLMTransport:
    """Any provider litellm supports; replicas and fallbacks through litellm's Router."""

    def __init__(self, config: LLMConfig) -> None:
        self._litellm = import_litellm()
        self._config = config
        self._turn = 0
        self._router: Any = None
        if config.fallbacks or config.replicas:
            self._router = self._make_router(config)

    def _make_router(self, config: LLMConfig) -> Any:
        deployments = [
            {"model_name": "primary", "litellm_params": self._params(config.model, base, config)}
            for base in [config.api_base, *config.replicas]
        ]
        names = []
        for i, fb in enumerate(config.fallbacks):
            name = f"fallback-{i}"
            names.append(name)
            if isinstance(fb, str):
                params = self._params(fb, config.api_base, config)
            else:
                params = self._params(fb.model, fb.api_base, config, fb.api_key_env)
            deployments.append({"model_name": name, "litellm_params": params})
        return self._litellm.Router(
            model_list=deployments,
            fallbacks=[{"primary": names}] if names else [],
            num_retries=0,  # the client retries, with its own backoff, around the Router
            disable_cooldowns=True,  # a failed call must not take a server out of rotation
            timeout=config.timeout_s,
        )

    @staticmethod
    def _params(
        model: str, api_base: str | None, config: LLMConfig, key_env: str | None = None
    ) -> dict[str, Any]:
        params: dict[str, Any] = {"model": model}
        if api_base is not None:
            params["api_base"] = api_base
        key = _api_key(key_env or config.api_key_env)
        if key:
            params["api_key"] = key
        elif api_base is not None:
            params["api_key"] = _NO_KEY
        return params

    async def send(self, params: dict[str, Any]) -> RawReply:
        lm = self._litellm
        common = {
            **params,
            "timeout": self._config.timeout_s,
            "num_retries": 0,
            "max_retries": 0,
            "drop_params": True,  # providers that lack e.g. `seed` get the call without it
        }
        try:
            if self._router is not None:
                resp = await self._router.acompletion(model="primary", **common)
            else:
                target = self._params(self._config.model, self._config.api_base, self._config)
                resp = await lm.acompletion(**target, **common)
        except Exception as e:  # litellm raises many types; map them to retryable or not
            status = getattr(e, "status_code", None)
            if status in AUTH_STATUSES or isinstance(
                e, lm.AuthenticationError | lm.PermissionDeniedError
            ):
                code = status if status in AUTH_STATUSES else 401
                raise auth_error(code, self._config.api_base, self._config.api_key_env) from None
            raise _map_litellm_error(lm, e) from e
        try:
            texts = [choice.message.content for choice in resp.choices]
            usage = getattr(resp, "usage", None)
            prompt_tokens = int(getattr(usage, "prompt_tokens", 0) or 0)
            completion_tokens = int(getattr(usage, "completion_tokens", 0) or 0)
        except (AttributeError, TypeError, ValueError) as e:
            raise TransportError("malformed reply from litellm", retryable=True) from e
        texts = _check_texts(texts)
        try:
            cost, priced = float(lm.completion_cost(completion_response=resp)), True
        except Exception:  # litellm raises when a model is not in its price table
            cost, priced = 0.0, False
        return RawReply(texts, prompt_tokens, completion_tokens, cost, priced)

    async def aclose(self) -> None:
        return None


def _map_litellm_error(lm: ModuleType, e: Exception) -> TransportError:
    name = type(e).__name__
    if isinstance(e, lm.Timeout | asyncio.TimeoutError):
        return TransportError(f"timeout ({name})", retryable=True, status=408)
    status = getattr(e, "status_code", None)
    response = getattr(e, "response", None)
    headers = getattr(response, "headers", None) or {}
    retry_after = parse_retry_after(headers.get("retry-after") if headers else None)
    message = str(getattr(e, "message", "") or e).splitlines()[0][:300] if str(e) else name
    if isinstance(e, lm.APIConnectionError) and not isinstance(status, int):
        return TransportError(f"connection error: {message}", retryable=True)
    if isinstance(status, int):
        return TransportError(
            f"HTTP {status}: {message}",
            retryable=is_retryable_status(status),
            retry_after=retry_after,
            status=status,
        )
    return TransportError(f"{name}: {message}", retryable=False)
