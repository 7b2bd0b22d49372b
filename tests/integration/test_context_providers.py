"""LLM chunk contexts through the chunk and embed stages, against a local HTTP server speaking
each provider's documented request and response shape: the context used, the tokens counted,
the cache (a second run asks nothing), and the generic prefix whenever the provider fails."""

from __future__ import annotations

import json
import re
import time
from collections.abc import AsyncIterator, Iterator
from typing import Any

import numpy as np
import pytest
from prometheus_client import REGISTRY
from pydantic import SecretStr

from core.errors import ServiceUnavailable
from core.sparse import SparseEncoder
from infra.context.base import (
    ContextProvider,
    ContextRefused,
    ContextTimedOut,
    ContextUnavailable,
)
from infra.context.factory import build_context_provider
from infra.embedding.base import Embedder
from infra.mongo.blob_store import BlobStore
from infra.mongo.client import Database, connect
from infra.mongo.context_cache import ContextCache
from infra.mongo.document_repository import DocumentRepository
from infra.mongo.embedding_cache import EmbeddingCache
from infra.mongo.lifecycle import DocumentLifecycle
from infra.mongo.outbox import Outbox
from infra.settings.ingest import ChunkingSettings, ContextualSettings
from infra.settings.mongo import MongoSettings
from schemas.domain import ChunkRecord, ExtractedDocument, ParseStatus, TextSegment
from schemas.events import ChunkBatchEmbedded, ChunkBatchReady, DocumentExtracted
from tests.factories import make_document
from tests.generations import OneModel
from tests.local_http import JsonHandler, serving
from workers.chunk.context import Contextualizer, generic_context
from workers.chunk.handler import ChunkHandler
from workers.embed.handler import EmbedHandler

OPENAI_MODEL = "small-chat-model"
GEMINI_MODEL = "gemini-2.5-flash-lite"
# The server's slow answers take this long; the provider's timeout in those tests is far
# shorter. Elsewhere the timeout is generous, so that a loaded machine never hits it.
SLOW_S = 3.0
SHORT_TIMEOUT_S = 0.5
TIMEOUT_S = 30.0
DEAD_URL = "http://127.0.0.1:9"
CHUNK = re.compile(r"<chunk>(.*?)</chunk>", re.DOTALL)


def answer_for(prompt: str) -> str:
    """What the test model answers: names the first words of the chunk it was shown."""
    match = CHUNK.search(prompt)
    words = match.group(1).split()[:4] if match else ["nothing"]
    return f"Part of the returns policy that begins with {' '.join(words)}."


class _ChatApi(JsonHandler):
    """An OpenAI-compatible chat endpoint or the Gemini API, as each documents its shape."""

    flavor = "openai"
    behaviour = "ok"
    requests: list[dict[str, Any]] = []  # noqa: RUF012 - shared by the test and the server

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        type(self).requests.append(
            {"path": self.path, "body": body, "headers": dict(self.headers.items())}
        )
        try:
            self._answer(body)
        except (BrokenPipeError, ConnectionResetError):
            return  # the client gave up waiting (the timeout tests)

    def _answer(self, body: dict[str, Any]) -> None:
        if self.behaviour == "slow":
            time.sleep(SLOW_S)
        if self.behaviour in ("500", "400"):
            status = int(self.behaviour)
            self.send_json(status, {"error": {"code": status, "message": "nope", "status": "ERR"}})
            return
        if self.behaviour == "malformed":
            self.send_json(200, {"unexpected": True})
            return
        if self.flavor == "openai":
            prompt = body["messages"][0]["content"]
        else:
            prompt = body["contents"][0]["parts"][0]["text"]
        answer = "" if self.behaviour == "empty" else answer_for(prompt)
        prompt_tokens, completion_tokens = len(prompt.split()), len(answer.split())
        if self.flavor == "openai":
            self.send_json(
                200,
                {
                    "id": "chatcmpl-1",
                    "object": "chat.completion",
                    "created": 0,
                    "model": body["model"],
                    "choices": [
                        {
                            "index": 0,
                            "message": {"role": "assistant", "content": answer},
                            "finish_reason": "stop",
                        }
                    ],
                    "usage": {
                        "prompt_tokens": prompt_tokens,
                        "completion_tokens": completion_tokens,
                        "total_tokens": prompt_tokens + completion_tokens,
                    },
                },
            )
            return
        self.send_json(
            200,
            {
                "candidates": [
                    {
                        "content": {"parts": [{"text": answer}], "role": "model"},
                        "finishReason": "STOP",
                        "index": 0,
                    }
                ],
                "usageMetadata": {
                    "promptTokenCount": prompt_tokens,
                    "candidatesTokenCount": completion_tokens,
                    "totalTokenCount": prompt_tokens + completion_tokens,
                },
                "modelVersion": GEMINI_MODEL,
            },
        )


@pytest.fixture
def chat_api() -> Iterator[str]:
    """A local server on 127.0.0.1; the test sets its flavor and behaviour."""
    _ChatApi.requests = []
    _ChatApi.flavor = "openai"
    _ChatApi.behaviour = "ok"
    with serving(_ChatApi) as url:
        yield url


def contextual(flavor: str, url: str, timeout_s: float = TIMEOUT_S) -> ContextualSettings:
    """Settings of one provider pointed at `url` (the local server, or a dead port)."""
    if flavor == "openai":
        return ContextualSettings(
            provider="openai",
            model=OPENAI_MODEL,
            base_url=f"{url}/v1",
            api_key=SecretStr("sk-test"),
            timeout_s=timeout_s,
            concurrency=2,
        )
    return ContextualSettings(
        provider="gemini",
        model=GEMINI_MODEL,
        base_url=url,
        api_key=SecretStr("gemini-test-key"),
        timeout_s=timeout_s,
        concurrency=2,
    )


def counted(name: str, **labels: str) -> float:
    """The current value of one Prometheus sample of this process."""
    return REGISTRY.get_sample_value(name, labels) or 0.0


TITLE = "Returns policy"
SEGMENTS = [
    TextSegment(
        text="\n\n".join(
            f"Refund rule {n}: items bought in store {n} can be returned within {n + 10} days "
            "with a receipt, and the money goes back to the card that paid."
            for n in range(8)
        ),
        heading_path=["Returns policy", "Refunds"],
    ),
    TextSegment(
        text="\n\n".join(
            f"Exchange rule {n}: a faulty item of batch {n} is swapped for a new one at any "
            "branch, or repaired free of charge when no replacement is in stock."
            for n in range(6)
        ),
        heading_path=["Returns policy", "Exchanges"],
    ),
]


class Stages:
    """The chunk and embed stages on one document, with their real repositories."""

    def __init__(self, db: Database, embedder: Embedder) -> None:
        self.db = db
        self.documents = DocumentRepository(db)
        self.lifecycle = DocumentLifecycle(db.client, db, Outbox(db))
        self.blobs = BlobStore(db)
        self.embedder = embedder
        self.sparse = SparseEncoder()

    async def extracted(self) -> DocumentExtracted:
        """A document as the extract stage leaves it: one (last) part of text, stored."""
        document = make_document(title=TITLE, parse_status=ParseStatus.EXTRACTING)
        await self.lifecycle.create([document])
        key = await self.blobs.put_extracted(
            document.id, ExtractedDocument(title="", segments=SEGMENTS)
        )
        return DocumentExtracted(
            tenant_id=document.tenant_id,
            kb_id=document.kb_id,
            document_id=document.id,
            generation=1,
            part_index=0,
            last=True,
            extracted_key=key,
            char_count=sum(len(s.text) for s in SEGMENTS),
        )

    async def chunk(
        self, event: DocumentExtracted, settings: ContextualSettings
    ) -> list[ChunkBatchReady]:
        """Runs the chunk stage on the part (its progress is not saved: it can run again)."""
        provider = build_context_provider(settings)
        try:
            handler = ChunkHandler(
                self.documents,
                self.blobs,
                ChunkingSettings(chunk_size_chars=300, chunk_overlap_chars=40),
                batch_size=4,
                contexts=Contextualizer(settings, provider, ContextCache(self.db)),
            )
            document = await self.documents.find(event.document_id)
            assert document is not None
            result = await handler(event, document)
        finally:
            if provider is not None:
                await provider.close()
        batches = [b for b in result.publish if isinstance(b, ChunkBatchReady)]
        assert len(batches) == len(result.publish) > 1
        return batches

    async def embed(self, batches: list[ChunkBatchReady]) -> list[ChunkBatchEmbedded]:
        """Runs the embed stage on the batches."""
        handler = EmbedHandler(
            self.documents, OneModel(self.embedder), EmbeddingCache(self.db), self.sparse
        )
        out: list[ChunkBatchEmbedded] = []
        for batch in batches:
            document = await self.documents.find(batch.document_id)
            assert document is not None
            result = await handler(batch, document)
            out.extend(e for e in result.publish if isinstance(e, ChunkBatchEmbedded))
        return out


def chunks_of(batches: list[ChunkBatchReady]) -> list[ChunkRecord]:
    """Every chunk of the batches, in order."""
    return [chunk for batch in batches for chunk in batch.chunks]


def assert_embedded_with_context(stages: Stages, embedded: list[ChunkBatchEmbedded]) -> None:
    """Each chunk's dense and sparse vectors are those of its context followed by its text."""
    for batch in embedded:
        texts = [f"{c.context}\n\n{c.text}" for c in batch.chunks]
        assert np.allclose(batch.vectors(), stages.embedder.embed_documents(texts), atol=1e-5)
        expected = [stages.sparse.document(text) for text in texts]
        assert [indices for indices, _ in batch.sparse()] == [s.indices for s in expected]


@pytest.fixture
def stages(db: Database, embedder: Embedder) -> Stages:
    """The two stages on the test's database."""
    return Stages(db, embedder)


def assert_request_shape(flavor: str, request: dict[str, Any]) -> str:
    """Checks one request against the provider's documented shape; returns its prompt."""
    headers = {key.lower(): value for key, value in request["headers"].items()}
    body = request["body"]
    if flavor == "openai":
        assert request["path"] == "/v1/chat/completions"
        assert headers["authorization"] == "Bearer sk-test"
        assert body["model"] == OPENAI_MODEL
        assert body["max_tokens"] == ContextualSettings().max_tokens
        assert body["temperature"] == 0
        assert [m["role"] for m in body["messages"]] == ["user"]
        return str(body["messages"][0]["content"])
    assert request["path"].endswith(f"/models/{GEMINI_MODEL}:generateContent")
    assert headers["x-goog-api-key"] == "gemini-test-key"
    assert body["generationConfig"]["maxOutputTokens"] == ContextualSettings().max_tokens
    assert body["generationConfig"]["temperature"] == 0
    assert body["contents"][0]["role"] == "user"
    return str(body["contents"][0]["parts"][0]["text"])


@pytest.mark.parametrize("flavor", ["openai", "gemini"])
async def test_the_model_situates_each_chunk_once_then_the_cache_answers(
    stages: Stages, chat_api: str, flavor: str
) -> None:
    _ChatApi.flavor = flavor
    settings = contextual(flavor, chat_api)
    ok_before = counted("ragline_context_requests_total", provider=flavor, outcome="ok")
    cached_before = counted("ragline_context_requests_total", provider=flavor, outcome="cached")
    prompt_before = counted("ragline_context_tokens_total", provider=flavor, kind="prompt")
    completion_before = counted("ragline_context_tokens_total", provider=flavor, kind="completion")
    event = await stages.extracted()

    batches = await stages.chunk(event, settings)
    chunks = chunks_of(batches)
    prompts = [assert_request_shape(flavor, r) for r in _ChatApi.requests]
    assert len(prompts) == len(chunks)
    for chunk in chunks:
        section = chunk.heading_path[-1]
        assert section in ("Refunds", "Exchanges")
        # The generic prefix, then the model's sentence about this very chunk.
        assert chunk.context == (
            f"Returns policy > {section}\n"
            f"Part of the returns policy that begins with {' '.join(chunk.text.split()[:4])}."
        )
        prompt = next(p for p in prompts if f"<chunk>{chunk.text}</chunk>" in p)
        assert "<document_title>Returns policy</document_title>" in prompt
        assert f"<section>Returns policy > {section}</section>" in prompt
    # Chunks in the middle are shown text on both sides of them.
    assert any("<text_before>" in p and "<text_after>" in p for p in prompts)
    # The chunk texts are the source text, exactly.
    source = "\n\n".join(s.text for s in SEGMENTS)
    assert all(chunk.text in source for chunk in chunks)

    assert counted("ragline_context_requests_total", provider=flavor, outcome="ok") == (
        ok_before + len(chunks)
    )
    answers = [answer_for(p) for p in prompts]
    assert counted("ragline_context_tokens_total", provider=flavor, kind="prompt") == (
        prompt_before + sum(len(p.split()) for p in prompts)
    )
    assert counted("ragline_context_tokens_total", provider=flavor, kind="completion") == (
        completion_before + sum(len(a.split()) for a in answers)
    )
    assert_embedded_with_context(stages, await stages.embed(batches))

    # The same part again (a replay, or the same content re-ingested): no call, same contexts.
    again = await stages.chunk(event, settings)
    assert len(_ChatApi.requests) == len(chunks)
    assert chunks_of(again) == chunks
    assert counted("ragline_context_requests_total", provider=flavor, outcome="cached") == (
        cached_before + len(chunks)
    )


FAILURES = ["dead port", "500", "400", "malformed", "empty", "slow"]


@pytest.mark.parametrize("failure", FAILURES)
@pytest.mark.parametrize("flavor", ["openai", "gemini"])
async def test_a_failing_provider_leaves_the_generic_prefix_and_the_chunks_embedded(
    stages: Stages, chat_api: str, flavor: str, failure: str
) -> None:
    _ChatApi.flavor = flavor
    _ChatApi.behaviour = failure
    url = DEAD_URL if failure == "dead port" else chat_api
    settings = contextual(flavor, url, SHORT_TIMEOUT_S if failure == "slow" else TIMEOUT_S)
    outcome = "timeout" if failure == "slow" else "failed"
    before = counted("ragline_context_requests_total", provider=flavor, outcome=outcome)
    event = await stages.extracted()

    batches = await stages.chunk(event, settings)
    chunks = chunks_of(batches)
    assert [c.context for c in chunks] == [
        generic_context(TITLE, c.heading_path, c.page) for c in chunks
    ]
    assert {c.context for c in chunks} == {"Returns policy > Refunds", "Returns policy > Exchanges"}
    assert counted("ragline_context_requests_total", provider=flavor, outcome=outcome) == (
        before + len(chunks)
    )
    if failure == "slow":
        # Each chunk asked once, never again (its timeout is counted above); on a loaded
        # machine a request can time out before the server has read it.
        assert 0 < len(_ChatApi.requests) <= len(chunks)
    elif failure != "dead port":
        assert len(_ChatApi.requests) == len(chunks)
    assert_embedded_with_context(stages, await stages.embed(batches))

    # Nothing was cached: once the provider answers, the same part is situated by the model.
    _ChatApi.behaviour = "ok"
    if failure != "dead port":
        again = chunks_of(await stages.chunk(event, contextual(flavor, chat_api)))
        assert all("\nPart of the returns policy that begins with" in c.context for c in again)


async def _provider(flavor: str, url: str, timeout_s: float = TIMEOUT_S) -> ContextProvider:
    provider = build_context_provider(contextual(flavor, url, timeout_s))
    assert provider is not None
    return provider


@pytest.mark.parametrize(
    ("failure", "error"),
    [
        ("dead port", ContextUnavailable),
        ("500", ContextUnavailable),
        ("400", ContextRefused),
        ("slow", ContextTimedOut),
    ],
)
@pytest.mark.parametrize("flavor", ["openai", "gemini"])
async def test_provider_errors_are_typed(
    chat_api: str, flavor: str, failure: str, error: type[Exception]
) -> None:
    _ChatApi.flavor = flavor
    _ChatApi.behaviour = failure
    url = DEAD_URL if failure == "dead port" else chat_api
    provider = await _provider(flavor, url, SHORT_TIMEOUT_S if failure == "slow" else TIMEOUT_S)
    try:
        with pytest.raises(error):
            await provider.complete("<chunk>Anything.</chunk>")
    finally:
        await provider.close()


async def test_an_openai_answer_without_choices_is_refused(chat_api: str) -> None:
    _ChatApi.behaviour = "malformed"
    provider = await _provider("openai", chat_api)
    try:
        with pytest.raises(ContextRefused, match="malformed"):
            await provider.complete("<chunk>Anything.</chunk>")
    finally:
        await provider.close()


def test_a_provider_needs_a_model_and_gemini_a_key() -> None:
    with pytest.raises(ValueError, match=r"contextual\.model"):
        ContextualSettings(provider="openai")
    with pytest.raises(ValueError, match=r"contextual\.api_key"):
        ContextualSettings(provider="gemini", model=GEMINI_MODEL)
    assert build_context_provider(ContextualSettings()) is None


@pytest.fixture
async def unreachable_db() -> AsyncIterator[Database]:
    """A database on a port where no server listens."""
    client = connect(
        MongoSettings(url="mongodb://127.0.0.1:9/?directConnection=true", timeout_ms=200)
    )
    yield client["nowhere"]
    await client.close()


async def test_cache_writes_never_fail_a_document(unreachable_db: Database) -> None:
    cache = ContextCache(unreachable_db)
    await cache.put_many({"key": "A context."})
    # A read that fails is retryable: the stage needs MongoDB anyway.
    with pytest.raises(ServiceUnavailable):
        await cache.get_many(["key"])
