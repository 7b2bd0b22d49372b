"""Searches that rank at the same moment share one engine call (`infra.vectorstore.coalescing`),
and each gets its own answers: the coalescer on its own, then both stores."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import qdrant_edge as qe
from qdrant_client import AsyncQdrantClient

from core.errors import PermanentError
from core.filters import SearchScope
from infra.sparse import term_index
from infra.vectorstore.base import ChunkPoint, Rankings, SparseVector, VectorStore
from infra.vectorstore.coalescing import Coalescer
from infra.vectorstore.edge import EdgeVectorStore
from infra.vectorstore.qdrant_server import QdrantServerStore
from schemas.chunks import ChunkPayload
from schemas.domain import chunk_point_id

DIM = 8
EVERYONE = ("tenant",)


class Engine:
    """A batch call that answers each request with its double, records the batches it was
    given, and can be held busy until released."""

    def __init__(self) -> None:
        self.batches: list[list[int]] = []
        self.busy = asyncio.Event()
        self.release = asyncio.Event()
        self.release.set()
        self.refuse: set[int] = set()

    async def run(self, requests: list[int]) -> list[int]:
        self.batches.append(list(requests))
        self.busy.set()
        await self.release.wait()
        if self.refuse & set(requests):
            raise PermanentError(f"refused {sorted(self.refuse & set(requests))}")
        return [2 * request for request in requests]

    def hold(self) -> None:
        self.busy.clear()
        self.release.clear()


async def _queued(
    *groups: Sequence[int], into: Coalescer[int, int]
) -> list[asyncio.Task[list[int]]]:
    """Tasks submitting each group, run until each is waiting for its answers."""
    tasks = [asyncio.create_task(into.submit(group)) for group in groups]
    await asyncio.sleep(0)  # one turn of the loop: each task has queued its group
    return tasks


async def test_a_lone_group_goes_out_at_once_alone() -> None:
    engine = Engine()
    coalescer = Coalescer(engine.run)
    assert await coalescer.submit([1, 2, 3]) == [2, 4, 6]
    assert await coalescer.submit([]) == []
    assert engine.batches == [[1, 2, 3]]
    await coalescer.close()


async def test_groups_queued_while_the_engine_is_busy_share_the_next_call() -> None:
    engine = Engine()
    coalescer = Coalescer(engine.run)
    engine.hold()
    first = asyncio.create_task(coalescer.submit([1]))
    await engine.busy.wait()
    queued = await _queued([2, 3], [4], [5, 6, 7], into=coalescer)
    engine.release.set()
    assert await first == [2]
    assert [await task for task in queued] == [[4, 6], [8], [10, 12, 14]]
    assert engine.batches == [[1], [2, 3, 4, 5, 6, 7]]
    await coalescer.close()


async def test_a_batch_takes_at_most_max_batch_groups() -> None:
    engine = Engine()
    coalescer = Coalescer(engine.run, max_batch=2)
    engine.hold()
    first = asyncio.create_task(coalescer.submit([0]))
    await engine.busy.wait()
    queued = await _queued([1], [2], [3], [4], [5], into=coalescer)
    engine.release.set()
    await first
    assert [await task for task in queued] == [[2], [4], [6], [8], [10]]
    assert engine.batches == [[0], [1, 2], [3, 4], [5]]
    await coalescer.close()


async def test_several_calls_in_flight_batch_only_what_waits_for_all_of_them() -> None:
    engine = Engine()
    coalescer = Coalescer(engine.run, in_flight=2)
    engine.hold()
    queued = await _queued([1], into=coalescer)
    queued += await _queued([2], into=coalescer)  # the second call starts at once
    queued += await _queued([3], [4], into=coalescer)  # these wait for either to end
    engine.release.set()
    assert [await task for task in queued] == [[2], [4], [6], [8]]
    assert sorted(map(sorted, engine.batches)) == [[1], [2], [3, 4]]
    await coalescer.close()


async def test_a_refused_request_fails_only_its_own_caller() -> None:
    engine = Engine()
    coalescer = Coalescer(engine.run, isolate=(PermanentError,))
    engine.hold()
    first = asyncio.create_task(coalescer.submit([1]))
    await engine.busy.wait()
    engine.refuse = {13}
    good, bad, other = await _queued([2], [13, 14], [3], into=coalescer)
    engine.release.set()
    await first
    assert await good == [4]
    assert await other == [6]
    with pytest.raises(PermanentError, match="13"):
        await bad
    await coalescer.close()


async def test_an_error_not_isolated_fails_the_whole_batch() -> None:
    engine = Engine()
    coalescer = Coalescer(engine.run)
    engine.hold()
    first = asyncio.create_task(coalescer.submit([1]))
    await engine.busy.wait()
    engine.refuse = {13}
    tasks = await _queued([2], [13], into=coalescer)
    engine.release.set()
    await first
    for task in tasks:
        with pytest.raises(PermanentError):
            await task
    await coalescer.close()


async def test_a_caller_that_gives_up_leaves_the_others_answered() -> None:
    engine = Engine()
    coalescer = Coalescer(engine.run)
    engine.hold()
    first = asyncio.create_task(coalescer.submit([1]))
    await engine.busy.wait()
    gone, kept = await _queued([2], [3], into=coalescer)
    gone.cancel()
    engine.release.set()
    await first
    assert await kept == [6]
    assert gone.cancelled()
    assert engine.batches == [[1], [3]]
    await coalescer.close()


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
        return await store.rank(scope, dense, sparse, depth=10, probes=probes, probe_limit=5)

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
