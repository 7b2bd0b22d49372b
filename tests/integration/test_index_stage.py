"""The index stage's logic against Mongo and both vector stores: all-or-nothing, idempotent."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import numpy as np
import pytest
from qdrant_client import AsyncQdrantClient

from infra.documents import DocumentRepository
from infra.knowledge_bases import KnowledgeBaseRepository
from infra.mongo import Database
from infra.vectorstore.base import SearchScope, VectorQuery, VectorStore
from infra.vectorstore.edge import EdgeVectorStore
from infra.vectorstore.qdrant_server import QdrantServerStore
from schemas.domain import (
    ChunkRecord,
    Document,
    KnowledgeBase,
    ParseStatus,
    new_document_id,
    utcnow,
)
from schemas.events import ChunkBatchEmbedded
from workers.index.handler import IndexHandler

DIM = 8


@pytest.fixture(params=["qdrant", "edge"])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[VectorStore]:
    """The production store (Qdrant API) and the local default's."""
    opened: VectorStore
    if request.param == "qdrant":
        opened = QdrantServerStore(AsyncQdrantClient(location=":memory:"), "chunks", DIM)
    else:
        opened = EdgeVectorStore(tmp_path / "v", DIM)
    await opened.ensure_collection()
    yield opened
    await opened.close()


async def _stored_document(
    db: Database, status: ParseStatus
) -> tuple[DocumentRepository, KnowledgeBaseRepository, KnowledgeBase, Document]:
    documents = DocumentRepository(db)
    kbs = KnowledgeBaseRepository(db)
    kb = await kbs.create("acme", "KB", "", "en")
    now = utcnow()
    document = Document(
        id=new_document_id(), tenant_id="acme", kb_id=kb.id, filename="a.pdf", title="A",
        content_type="application/pdf", size_bytes=1, sha256="0" * 64, storage_key="k",
        parse_status=status, created_at=now, updated_at=now,
    )  # fmt: skip
    await documents.insert(document)
    return documents, kbs, kb, document


def _batch(document: Document, index: int, chunks: range, last: bool) -> ChunkBatchEmbedded:
    records = [
        ChunkRecord(chunk_index=i, text=f"chunk {i}", start=i * 10, end=i * 10 + 7, page=1)
        for i in chunks
    ]
    vectors = np.random.default_rng(index).normal(size=(len(records), DIM)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    return ChunkBatchEmbedded(
        tenant_id=document.tenant_id,
        kb_id=document.kb_id,
        document_id=document.id,
        generation=1,
        batch_index=index,
        last=last,
        source_name="a.pdf",
        title="A",
        chunks=records,
        model="test",
        dimensions=DIM,
        dense_b64=ChunkBatchEmbedded.encode_vectors(vectors),
    )


async def _visible(store: VectorStore, document: Document) -> int:
    hits = await store.search(
        VectorQuery(
            scope=SearchScope(document.tenant_id, (document.kb_id,)),
            dense=np.ones(DIM, dtype=np.float32) / np.sqrt(DIM),
            limit=100,
        )
    )
    return len(hits)


async def test_a_document_becomes_searchable_only_when_complete(
    db: Database, store: VectorStore
) -> None:
    documents, kbs, kb, document = await _stored_document(db, ParseStatus.EMBEDDING)
    handler = IndexHandler(documents, kbs, store)
    batches = [_batch(document, 0, range(0, 4), False), _batch(document, 1, range(4, 7), True)]

    # The last batch arrives first (batches travel on different partitions) ...
    await documents.record_chunking(
        document.id, 1, chunk_count=7, text_char_count=70, batch_count=2
    )
    assert not (await handler(batches[1])).finished_document
    assert await _visible(store, document) == 0
    assert await store.count("acme", document_id=document.id, active=False) == 3
    # ... and the document appears whole when the other one is in.
    assert (await handler(batches[0])).finished_document
    assert await _visible(store, document) == 7
    # Replaying either batch changes nothing: no duplicates, no recount.
    for batch in batches:
        assert (await handler(batch)).skipped
    assert await store.count("acme", document_id=document.id) == 7
    finished = await documents.find(document.id)
    assert finished is not None
    assert finished.parse_status is ParseStatus.INDEXED
    assert (await kbs.get("acme", kb.id)).chunk_count == 7
    hit = (await store.search(
        VectorQuery(SearchScope("acme", (kb.id,)), np.ones(DIM, dtype=np.float32), limit=1)
    ))[0]  # fmt: skip
    assert {"document_title", "page", "start", "end", "chunk_id", "source_name"} <= set(hit.payload)


async def test_a_batch_for_a_deleted_document_leaves_no_points(
    db: Database, store: VectorStore
) -> None:
    documents, kbs, kb, document = await _stored_document(db, ParseStatus.INDEXING)
    await documents.begin_delete("acme", kb.id, document.id)
    result = await IndexHandler(documents, kbs, store)(_batch(document, 0, range(3), True))
    assert result.skipped
    assert await store.count("acme", document_id=document.id) == 0
