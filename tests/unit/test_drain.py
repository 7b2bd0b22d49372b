"""Work drained after requests: queued without waiting, handled in batches, dropped (and
counted) when the queue is full, handled on closing (pure asyncio, ~0.1 s)."""

from __future__ import annotations

import asyncio

from prometheus_client import REGISTRY

from infra.process.drain import Drain


def _counted(queue: str, result: str) -> float:
    labels = {"queue": queue, "result": result}
    return REGISTRY.get_sample_value("ragline_drained_items_total", labels) or 0.0


async def test_items_queued_together_are_handled_in_one_batch() -> None:
    batches: list[list[int]] = []

    async def handle(items: list[int]) -> None:
        batches.append(items)

    drain: Drain[int] = Drain("test-batches", handle, linger_s=0.01)
    handled = _counted("test-batches", "handled")
    for n in range(5):
        drain.put(n)  # returns at once: nothing is handled yet
    assert batches == []
    await drain.idle()
    assert batches == [[0, 1, 2, 3, 4]]
    drain.put(5)
    await drain.idle()
    assert batches == [[0, 1, 2, 3, 4], [5]]
    assert _counted("test-batches", "handled") == handled + 6
    await drain.close()


async def test_a_full_queue_drops_and_counts_and_a_failing_batch_is_counted() -> None:
    release = asyncio.Event()

    async def handle(items: list[int]) -> None:
        await release.wait()
        raise RuntimeError("the cache is gone")

    drain: Drain[int] = Drain("test-full", handle, capacity=2, linger_s=0)
    dropped, failed = _counted("test-full", "dropped"), _counted("test-full", "failed")
    drain.put(1)
    await asyncio.sleep(0)  # the task takes the first item and waits in the handler
    drain.put(2)
    drain.put(3)
    drain.put(4)  # the queue holds two: this one is dropped
    assert _counted("test-full", "dropped") == dropped + 1
    release.set()
    await drain.idle()
    assert _counted("test-full", "failed") == failed + 3
    await drain.close()
    drain.put(5)  # closed: dropped
    assert _counted("test-full", "dropped") == dropped + 2


async def test_closing_handles_what_is_queued() -> None:
    handled: list[str] = []

    async def handle(items: list[str]) -> None:
        handled.extend(items)

    drain: Drain[str] = Drain("test-close", handle, linger_s=5.0)
    drain.put("answer")
    drain.put("event")
    await drain.close()  # does not wait out the linger
    assert handled == ["answer", "event"]
