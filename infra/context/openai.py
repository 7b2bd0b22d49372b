"""An OpenAI-compatible chat endpoint as a context provider (OpenAI, vLLM, Ollama, LiteLLM…)."""

from __future__ import annotations

from typing import Any

import httpx

from infra.context.base import Completion, ContextRefused, ContextTimedOut, ContextUnavailable
from infra.settings.ingest import ContextualSettings

DEFAULT_BASE_URL = "https://api.openai.com/v1"


class OpenAIChatProvider:
    """POSTs `{base_url}/chat/completions` and reads `choices[0].message.content`."""

    name = "openai"

    def __init__(self, settings: ContextualSettings) -> None:
        self._model = settings.model
        self._max_tokens = settings.max_tokens
        self._url = (settings.base_url or DEFAULT_BASE_URL).rstrip("/") + "/chat/completions"
        headers = {}
        if settings.api_key is not None and settings.api_key.get_secret_value():
            headers["Authorization"] = f"Bearer {settings.api_key.get_secret_value()}"
        self._client = httpx.AsyncClient(headers=headers, timeout=settings.timeout_s)

    @property
    def model(self) -> str:
        """The model asked."""
        return self._model

    async def complete(self, prompt: str) -> Completion:
        """The model's answer to one user message."""
        body = {
            "model": self._model,
            "messages": [{"role": "user", "content": prompt}],
            "max_tokens": self._max_tokens,
            "temperature": 0,
        }
        try:
            response = await self._client.post(self._url, json=body)
        except httpx.TimeoutException as exc:
            raise ContextTimedOut(self.name, f"no answer in time ({type(exc).__name__})") from exc
        except httpx.TransportError as exc:
            raise ContextUnavailable(self.name, f"{type(exc).__name__}: {exc}") from exc
        if response.status_code == 429 or response.status_code >= 500:
            raise ContextUnavailable(self.name, f"HTTP {response.status_code}")
        if response.status_code >= 400:
            raise ContextRefused(self.name, f"HTTP {response.status_code}: {response.text[:200]}")
        try:
            answer: Any = response.json()
            content = answer["choices"][0]["message"]["content"]
            usage = answer.get("usage") or {}
            prompt_tokens = int(usage.get("prompt_tokens") or 0)
            completion_tokens = int(usage.get("completion_tokens") or 0)
        except (ValueError, KeyError, IndexError, TypeError, AttributeError) as exc:
            raise ContextRefused(self.name, f"malformed answer ({type(exc).__name__})") from exc
        if not isinstance(content, str):
            raise ContextRefused(self.name, "the answer has no text")
        return Completion(content, prompt_tokens, completion_tokens)

    async def close(self) -> None:
        """Closes the HTTP client."""
        await self._client.aclose()
