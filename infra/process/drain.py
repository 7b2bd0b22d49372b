"""Work done after a request, off its path: items queued by the request, handled in batches by
one task of the process.

A request only puts its item in a bounded queue and goes on; the task, woken by the first item,
waits `linger_s` (as a Kafka producer lingers: the request's answer goes out meanwhile, and
items queued by other requests join the batch), then takes everything queued (up to `batch`
items) and hands it to `handle` at once, so a burst of searches costs one Redis pipeline or
one round of Kafka sends, not one each. When the queue is full the item is dropped
and counted (`ragline_drained_items_total{result="dropped"}`): what is drained here (cache
writes, retrieval events) is never worth holding a request for. A batch that fails is logged
and counted, never retried here (the handler decides what a failure means). Closing hands what
is still queued to `handle` within `close_timeout_s`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from typing import Generic, TypeVar

from infra.process.metrics import DRAINED_ITEMS

log = logging.getLogger(__name__)
T = TypeVar("T")


class Drain(Generic[T]):
    """A bounded queue drained in batches by one task (started by the first item)."""

    def __init__(
        self,
        name: str,
        handle: Callable[[list[T]], Awaitable[None]],
        *,
        capacity: int = 10_000,
        batch: int = 256,
        linger_s: float = 0.005,
        close_timeout_s: float = 2.0,
    ) -> None:
        self._name = name
        self._handle = handle
        self._queue: asyncio.Queue[T] = asyncio.Queue(capacity)
        self._batch = batch
        self._linger_s = linger_s
        self._close_timeout_s = close_timeout_s
        self._task: asyncio.Task[None] | None = None
        self._closed = False
        # Set on closing: a batch lingering then is handled at once.
        self._closing = asyncio.Event()

    def put(self, item: T) -> None:
        """Queues an item (dropped, and counted, when the queue is full or closed)."""
        if self._closed:
            DRAINED_ITEMS.labels(self._name, "dropped").inc()
            return
        try:
            self._queue.put_nowait(item)
        except asyncio.QueueFull:
            DRAINED_ITEMS.labels(self._name, "dropped").inc()
            return
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._run())

    async def idle(self) -> None:
        """Returns once everything queued so far has been handled (for tests and closing)."""
        await self._queue.join()

    async def close(self) -> None:
        """Handles what is queued (within the close timeout), then stops the task."""
        self._closed = True
        self._closing.set()
        if self._task is None:
            return
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._queue.join(), self._close_timeout_s)
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._task

    async def _run(self) -> None:
        while True:
            items = [await self._queue.get()]
            if self._linger_s and not self._closed:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._closing.wait(), self._linger_s)
            while len(items) < self._batch and not self._queue.empty():
                items.append(self._queue.get_nowait())
            try:
                await self._handle(items)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                DRAINED_ITEMS.labels(self._name, "failed").inc(len(items))
                log.warning("%s: %d items not handled: %s", self._name, len(items), exc)
            else:
                DRAINED_ITEMS.labels(self._name, "handled").inc(len(items))
            finally:
                for _ in items:
                    self._queue.task_done()
