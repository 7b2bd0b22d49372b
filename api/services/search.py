"""The search service: scope guard, query embedding, vector search."""

from __future__ import annotations

import asyncio
import time

from infra.embedding.base import Embedder
from infra.knowledge_bases import KnowledgeBaseRepository
from infra.metrics import SEARCH_LATENCY, SEARCH_REQUESTS
from infra.vectorstore.base import ScoredChunk, SearchScope, VectorQuery, VectorStore
from schemas.api import SearchHit, SearchResponse, TenantSearchRequest


class SearchService:
    """Answers searches over a tenant's active knowledge bases."""

    def __init__(
        self, kbs: KnowledgeBaseRepository, embedder: Embedder, store: VectorStore
    ) -> None:
        self._kbs = kbs
        self._embedder = embedder
        self._store = store

    async def search_tenant(self, request: TenantSearchRequest) -> SearchResponse:
        """Searches the requested KBs that are the tenant's and active; others are dropped."""
        started = time.perf_counter()
        try:
            kb_ids = await self._kbs.active_ids(request.tenant_id, request.kb_ids)
            if not kb_ids:
                SEARCH_REQUESTS.labels("empty").inc()
                return SearchResponse(hits=[])
            vector = await asyncio.to_thread(self._embedder.embed_query, request.query)
            found = await self._store.search(
                VectorQuery(
                    scope=SearchScope(request.tenant_id, tuple(kb_ids)),
                    dense=vector,
                    limit=request.top_k,
                )
            )
        except Exception:
            SEARCH_REQUESTS.labels("error").inc()
            raise
        finally:
            SEARCH_LATENCY.observe(time.perf_counter() - started)
        hits = [
            SearchHit(
                score=round(chunk.score, 6),
                chunk_text=str(chunk.payload.get("chunk_text", "")),
                document_id=str(chunk.payload.get("document_id", "")),
                kb_id=str(chunk.payload.get("kb_id", "")),
                chunk_index=int(chunk.payload.get("chunk_index", 0)),
                source_name=str(chunk.payload.get("source_name", "")),
            )
            for chunk in newest_versions(found)
        ]
        SEARCH_REQUESTS.labels("hits" if hits else "empty").inc()
        return SearchResponse(hits=hits)


def newest_versions(chunks: list[ScoredChunk]) -> list[ScoredChunk]:
    """Drops chunks of a source whose newer version is also among the results.

    When a new version of a document replaces the old one, the store shows the new one and
    removes the old one in one step; on a Qdrant server those are two operations, and a
    search landing between them could see both. This guard makes one answer hold one version.
    """
    newest: dict[tuple[str, str], int] = {}
    for chunk in chunks:
        key = (str(chunk.payload.get("kb_id")), str(chunk.payload.get("source_key")))
        version = int(chunk.payload.get("version") or 0)
        newest[key] = max(newest.get(key, version), version)
    return [
        chunk
        for chunk in chunks
        if int(chunk.payload.get("version") or 0)
        == newest[(str(chunk.payload.get("kb_id")), str(chunk.payload.get("source_key")))]
    ]
