"""The local model for real, and the Gemini provider against an HTTP server of the API's shape."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
from pydantic import SecretStr

from core.errors import PermanentError, ServiceUnavailable
from infra.embedding.base import Embedder
from infra.embedding.gemini import GeminiEmbedder
from infra.settings import EmbeddingSettings
from tests.local_http import JsonHandler, serving


def test_local_model_embeds_normalised_384_dim_vectors(embedder: Embedder) -> None:
    vectors = embedder.embed_documents(["The cat sat on the mat.", "Quarterly revenue grew."])
    assert vectors.shape == (2, 384)
    assert vectors.dtype == np.float32
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert embedder.embed_documents([]).shape == (0, 384)


def test_local_model_ranks_the_related_passage_first(embedder: Embedder) -> None:
    passages = [
        "To reset your password, open Settings and choose Security.",
        "Our office is closed on public holidays.",
        "The espresso machine needs descaling every month.",
    ]
    query = embedder.embed_queries(["How do I change my login password?"])[0]
    scores = embedder.embed_documents(passages) @ query
    assert int(np.argmax(scores)) == 0


class _GeminiApi(JsonHandler):
    """Answers batchEmbedContents as the Gemini API documents it."""

    requests: list[dict[str, Any]] = []  # noqa: RUF012 - shared by the test and the server
    fail_with: int | None = None

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        type(self).requests.append(
            {"path": self.path, "body": body, "key": self.headers.get("x-goog-api-key")}
        )
        if self.fail_with is not None:
            self.send_json(
                self.fail_with,
                {"error": {"code": self.fail_with, "message": "nope", "status": "ERR"}},
            )
            return
        embeddings = []
        for request in body["requests"]:
            text = request["content"]["parts"][0]["text"]
            size = request["outputDimensionality"]
            rng = np.random.default_rng(len(text))
            embeddings.append({"values": (rng.normal(size=size) * 3).tolist()})
        self.send_json(200, {"embeddings": embeddings})


@pytest.fixture
def gemini_api() -> Iterator[str]:
    """A local server speaking the batchEmbedContents request/response shape."""
    _GeminiApi.requests = []
    _GeminiApi.fail_with = None
    with serving(_GeminiApi) as url:
        yield url


def _gemini(base_url: str) -> GeminiEmbedder:
    return GeminiEmbedder(
        EmbeddingSettings(
            provider="gemini",
            dimensions=768,
            gemini_api_key=SecretStr("test-key"),
            gemini_base_url=base_url,
        )
    )


def test_gemini_sends_the_documented_request_and_normalises(gemini_api: str) -> None:
    embedder = _gemini(gemini_api)
    vectors = embedder.embed_documents(["alpha", "beta gamma"])
    assert vectors.shape == (2, 768)
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    sent = _GeminiApi.requests[0]
    assert sent["path"].endswith("/models/gemini-embedding-001:batchEmbedContents")
    assert sent["key"] == "test-key"
    first = sent["body"]["requests"][0]
    assert first["taskType"] == "RETRIEVAL_DOCUMENT"
    assert first["outputDimensionality"] == 768
    assert first["content"]["parts"][0]["text"] == "alpha"
    embedder.embed_queries(["a question"])
    assert _GeminiApi.requests[-1]["body"]["requests"][0]["taskType"] == "RETRIEVAL_QUERY"
    assert embedder.model_id == "gemini-embedding-001@768"


def test_gemini_splits_large_batches(gemini_api: str) -> None:
    vectors = _gemini(gemini_api).embed_documents([f"text {i}" for i in range(250)])
    assert vectors.shape == (250, 768)
    assert [len(r["body"]["requests"]) for r in _GeminiApi.requests] == [100, 100, 50]


@pytest.mark.parametrize(
    ("status", "error"),
    [
        (500, ServiceUnavailable),
        (503, ServiceUnavailable),
        (429, ServiceUnavailable),
        (400, PermanentError),
    ],
)
def test_gemini_errors_are_typed(gemini_api: str, status: int, error: type[Exception]) -> None:
    _GeminiApi.fail_with = status
    with pytest.raises(error):
        _gemini(gemini_api).embed_documents(["alpha"])


def test_gemini_unreachable_is_retryable() -> None:
    with pytest.raises(ServiceUnavailable):
        _gemini("http://127.0.0.1:9").embed_documents(["alpha"])


def test_gemini_needs_a_key() -> None:
    with pytest.raises(PermanentError, match="API_KEY"):
        GeminiEmbedder(EmbeddingSettings(provider="gemini", dimensions=768))
