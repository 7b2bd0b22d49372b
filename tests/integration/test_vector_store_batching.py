"""Searches that rank at the same moment share one engine call (`core.coalescing`), and each
gets its own answers, on both stores."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import qdrant_edge as qe
from qdrant_client import AsyncQdrantClient

from core.filters import SearchScope
from core.sparse import SparseVector, term_index
from infra.vectorstore.base import ChunkPoint, Rankings, RankQuery, VectorStore
from infra.vectorstore.edge import EdgeVectorStore
from infra.vectorstore.qdrant_server import QdrantServerStore
from schemas.chunks import ChunkPayload
from schemas.domain import chunk_point_id

DIM = 8
EVERYONE = ("tenant",)


class BatchCountingEdgeStore(EdgeVectorStore):
    """The embedded store, recording how many searches' requests each engine call carried."""

    calls: list[int]

    async def _query_batch(self, requests: list[qe.QueryRequest]) -> list[list[Any]]:
        self.calls.append(len(requests))
        return await super()._query_batch(requests)


@pytest.fixture(params=["edge", "qdrant"])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[VectorStore]:
    opened: VectorStore
    if request.param == "edge":
        opened = BatchCountingEdgeStore(tmp_path / "vectors", DIM)
        opened.calls = []
    else:
        opened = QdrantServerStore(AsyncQdrantClient(location=":memory:"), "chunks", DIM)
    await opened.ensure_collection()
    yield opened
    await opened.close()


def _unit(seed: int) -> np.ndarray:
    vector = np.random.default_rng(seed).normal(size=DIM).astype(np.float32)
    return vector / np.linalg.norm(vector)


WORDS = ["router", "fan", "kayak", "paddle", "firmware", "warranty"]


def _points() -> list[ChunkPoint]:
    points = []
    for n in range(60):
        words = [WORDS[n % 6], WORDS[(n * 7) % 6]]
        points.append(
            ChunkPoint(
                point_id=chunk_point_id(f"doc_{n % 20}", n),
                dense=_unit(n),
                sparse=SparseVector(
                    sorted({term_index(word) for word in words}),
                    [1.0] * len({term_index(word) for word in words}),
                ),
                payload=ChunkPayload(
                    tenant_id=f"t{n % 2}",
                    kb_id=f"kb{n % 3}",
                    document_id=f"doc_{n % 20}",
                    chunk_index=n,
                    chunk_text=" ".join(words),
                    active=True,
                    readers=list(EVERYONE),
                ),
            )
        )
    return points


def _searches() -> list[tuple[SearchScope, np.ndarray, SparseVector | None, list[int]]]:
    searches = []
    for n in range(24):
        scope = SearchScope(f"t{n % 2}", tuple(f"kb{k}" for k in range(n % 3 + 1)), EVERYONE)
        word = term_index(WORDS[n % 6])
        sparse = SparseVector([word], [1.0]) if n % 4 else None
        probes = [term_index(WORDS[(n + k) % 6]) for k in range(n % 3)]
        searches.append((scope, _unit(1000 + n), sparse, probes))
    return searches


async def test_concurrent_searches_get_the_rankings_they_get_alone(store: VectorStore) -> None:
    """24 searches of different scopes, with and without terms and probes: ranked together
    (as concurrent requests do), each gets what it gets when it ranks alone."""
    await store.upsert(_points())
    searches = _searches()

    async def rank(
        search: tuple[SearchScope, np.ndarray, SparseVector | None, list[int]],
    ) -> Rankings:
        scope, dense, sparse, probes = search
        return await store.rank(
            RankQuery(scope, dense, 10, sparse=sparse, probes=tuple(probes), probe_limit=5)
        )

    alone = [await rank(search) for search in searches]
    assert all(ranked.dense for ranked in alone)
    assert any(ranked.sparse for ranked in alone)
    assert any(ranked.holding for ranked in alone)
    if isinstance(store, BatchCountingEdgeStore):
        assert len(store.calls) == len(searches)
        store.calls.clear()
    together = await asyncio.gather(*(rank(search) for search in searches))
    for batched, lone in zip(together, alone, strict=True):
        # Qdrant's local mode rounds a score differently now and then (last bits of a float).
        for mine, its in ((batched.dense, lone.dense), (batched.sparse, lone.sparse)):
            assert [point for point, _ in mine] == [point for point, _ in its]
            assert [score for _, score in mine] == pytest.approx([score for _, score in its])
        assert batched.holding == lone.holding
    if isinstance(store, BatchCountingEdgeStore):
        # All of them queued before the engine was first called: they share that call.
        assert len(store.calls) == 1
