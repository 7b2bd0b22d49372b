"""Concurrent query embeddings share model calls (pure scheduling logic)."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Sequence

import numpy as np
import pytest
from numpy.typing import NDArray

from infra.embedding.batching import QueryBatcher


class SlowModel:
    """Embeds a text as [len(text)]; each call blocks until released, like a busy model."""

    def __init__(self) -> None:
        self.calls: list[list[str]] = []
        self.release = threading.Event()

    def __call__(self, texts: Sequence[str]) -> NDArray[np.float32]:
        self.calls.append(list(texts))
        self.release.wait(5)
        return np.array([[float(len(t))] for t in texts], dtype=np.float32)


async def test_a_lone_query_is_embedded_at_once() -> None:
    model = SlowModel()
    model.release.set()
    batcher = QueryBatcher(model)
    vector = await batcher.embed("abc")
    assert vector.tolist() == [3.0]
    assert model.calls == [["abc"]]


async def test_queries_arriving_while_the_model_works_share_the_next_call() -> None:
    model = SlowModel()
    batcher = QueryBatcher(model, max_batch=8)
    first = asyncio.create_task(batcher.embed("x"))
    while not model.calls:
        await asyncio.sleep(0.001)
    duplicate = asyncio.create_task(batcher.embed("yy"))
    rest = [asyncio.create_task(batcher.embed("y" * n)) for n in range(1, 11)]
    await asyncio.sleep(0.01)
    model.release.set()
    results = await asyncio.gather(first, duplicate, *rest)
    assert [r.tolist() for r in results] == [[1.0], [2.0], *[[float(n)] for n in range(1, 11)]]
    # One call for the first query; the eleven that queued meanwhile go in calls of at most 8
    # queries, where a text asked twice is embedded once.
    assert model.calls[0] == ["x"]
    assert [len(call) for call in model.calls[1:]] == [7, 3]
    assert sum(call.count("yy") for call in model.calls) == 1


async def test_a_failed_call_fails_every_query_in_it_and_the_next_ones_still_work() -> None:
    broken = True

    def model(texts: Sequence[str]) -> NDArray[np.float32]:
        if broken:
            raise RuntimeError("model crashed")
        return np.ones((len(texts), 2), dtype=np.float32)

    batcher = QueryBatcher(model)
    with pytest.raises(RuntimeError, match="model crashed"):
        await asyncio.gather(batcher.embed("a"), batcher.embed("b"))
    broken = False
    assert (await batcher.embed("c")).tolist() == [1.0, 1.0]


async def test_a_cancelled_query_does_not_break_the_others() -> None:
    model = SlowModel()
    batcher = QueryBatcher(model)
    first = asyncio.create_task(batcher.embed("first"))
    while not model.calls:
        await asyncio.sleep(0.001)
    cancelled = asyncio.create_task(batcher.embed("gone"))
    kept = asyncio.create_task(batcher.embed("kept"))
    await asyncio.sleep(0.01)
    cancelled.cancel()
    model.release.set()
    assert (await first).tolist() == [5.0]
    assert (await kept).tolist() == [4.0]
    assert model.calls[1] == ["kept"]
