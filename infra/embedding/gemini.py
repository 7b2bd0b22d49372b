"""The hosted embedding provider: Gemini embeddings through google-genai (optional)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import httpx
import httpx2
import numpy as np
from google import genai
from google.genai import errors as genai_errors
from google.genai import types as genai_types
from numpy.typing import NDArray

from core.errors import PermanentError, ServiceUnavailable
from infra.embedding.base import normalise
from infra.http.genai_options import genai_http_options
from infra.settings.embedding import EmbeddingSettings

# The API takes at most this many texts per batchEmbedContents call.
MAX_BATCH = 100


class GeminiEmbedder:
    """Embeds with `gemini-embedding-001` (or the configured model) at the configured size."""

    def __init__(self, settings: EmbeddingSettings) -> None:
        if settings.gemini_api_key is None or not settings.gemini_api_key.get_secret_value():
            raise PermanentError("the gemini provider needs RAGLINE_EMBEDDING__GEMINI_API_KEY")
        http_options = genai_http_options(settings.gemini_base_url, timeout_s=30.0)
        self._client = genai.Client(
            api_key=settings.gemini_api_key.get_secret_value(), http_options=http_options
        )
        self._model = settings.gemini_model
        self._dimensions = settings.dimensions

    @property
    def model_id(self) -> str:
        """A stable name of the model and its output size."""
        return f"{self._model}@{self._dimensions}"

    @property
    def dimensions(self) -> int:
        """Length of each vector."""
        return self._dimensions

    def embed_documents(self, texts: Sequence[str]) -> NDArray[np.float32]:
        """One normalised vector per text."""
        return self._embed(texts, "RETRIEVAL_DOCUMENT")

    def embed_queries(self, texts: Sequence[str]) -> NDArray[np.float32]:
        """One normalised vector per query."""
        return self._embed(texts, "RETRIEVAL_QUERY")

    def close(self) -> None:
        """Nothing to let go of (the client holds no model)."""

    def _embed(self, texts: Sequence[str], task_type: str) -> NDArray[np.float32]:
        rows: list[list[float]] = []
        for start in range(0, len(texts), MAX_BATCH):
            batch: Any = list(texts[start : start + MAX_BATCH])
            try:
                response = self._client.models.embed_content(
                    model=self._model,
                    contents=batch,
                    config=genai_types.EmbedContentConfig(
                        task_type=task_type, output_dimensionality=self._dimensions
                    ),
                )
            except genai_errors.ServerError as exc:
                raise ServiceUnavailable("gemini", str(exc)) from exc
            except genai_errors.ClientError as exc:
                if exc.code == 429:
                    raise ServiceUnavailable("gemini", "rate limited") from exc
                raise PermanentError(f"the embedding provider refused the request: {exc}") from exc
            except (httpx.TransportError, httpx2.TransportError) as exc:
                # google-genai sends through httpx2 (newer releases) or httpx.
                raise ServiceUnavailable("gemini", str(exc)) from exc
            embeddings = response.embeddings or []
            if len(embeddings) != len(batch):
                raise ServiceUnavailable(
                    "gemini", f"asked for {len(batch)} embeddings, got {len(embeddings)}"
                )
            for embedding in embeddings:
                values = embedding.values or []
                if len(values) != self._dimensions:
                    raise PermanentError(
                        f"the embedding provider returned {len(values)} dimensions, "
                        f"expected {self._dimensions}"
                    )
                rows.append(values)
        if not rows:
            return np.zeros((0, self._dimensions), dtype=np.float32)
        return normalise(np.asarray(rows, dtype=np.float32))
