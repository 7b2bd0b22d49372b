"""Gemini (google-genai `generate_content`) as a context provider."""

from __future__ import annotations

import httpx2
from google import genai
from google.genai import errors as genai_errors
from google.genai import types as genai_types

from core.errors import PermanentError
from infra.context.base import Completion, ContextRefused, ContextTimedOut, ContextUnavailable
from infra.http.genai_options import genai_http_options
from infra.settings.ingest import ContextualSettings


class GeminiContextProvider:
    """Asks a Gemini model through google-genai's async client."""

    name = "gemini"

    def __init__(self, settings: ContextualSettings) -> None:
        if settings.api_key is None or not settings.api_key.get_secret_value():
            raise PermanentError("the gemini context provider needs RAGLINE_CONTEXTUAL__API_KEY")
        # One try: a failed call falls back to the generic prefix instead of waiting.
        http_options = genai_http_options(settings.base_url, settings.timeout_s)
        self._client = genai.Client(
            api_key=settings.api_key.get_secret_value(), http_options=http_options
        )
        self._model = settings.model
        self._config = genai_types.GenerateContentConfig(
            max_output_tokens=settings.max_tokens, temperature=0
        )

    @property
    def model(self) -> str:
        """The model asked."""
        return self._model

    async def complete(self, prompt: str) -> Completion:
        """The model's answer to one prompt."""
        try:
            response = await self._client.aio.models.generate_content(
                model=self._model, contents=prompt, config=self._config
            )
        except genai_errors.ServerError as exc:
            raise ContextUnavailable(self.name, f"HTTP {exc.code}") from exc
        except genai_errors.ClientError as exc:
            if exc.code == 429:
                raise ContextUnavailable(self.name, "rate limited") from exc
            raise ContextRefused(self.name, f"HTTP {exc.code}: {exc.message}") from exc
        except httpx2.TimeoutException as exc:
            raise ContextTimedOut(self.name, f"no answer in time ({type(exc).__name__})") from exc
        except httpx2.TransportError as exc:
            raise ContextUnavailable(self.name, f"{type(exc).__name__}: {exc}") from exc
        try:
            text = response.text or ""
        except ValueError as exc:
            raise ContextRefused(self.name, f"malformed answer ({exc})") from exc
        usage = response.usage_metadata
        prompt_tokens = completion_tokens = 0
        if usage is not None:
            prompt_tokens = usage.prompt_token_count or 0
            # Thinking tokens are billed as output too.
            completion_tokens = (usage.candidates_token_count or 0) + (
                usage.thoughts_token_count or 0
            )
        return Completion(text, prompt_tokens, completion_tokens)

    async def close(self) -> None:
        """Closes the HTTP client."""
        await self._client.aio.aclose()
