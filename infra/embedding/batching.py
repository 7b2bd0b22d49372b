"""Query embeddings in micro-batches: concurrent searches share one model call.

A transformer embeds 30 short queries in one call in little more time than one, but one call
at a time. So queries wait in a queue while the model works, and each call takes everything
that has queued up (up to `max_batch`), as inference servers batch dynamically. A lone query
is embedded at once: the queue only forms while the model is busy, so nothing waits when the
service is idle. `max_wait_s` adds an optional short wait to collect a batch before the first
call of a burst.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence

import numpy as np
from numpy.typing import NDArray

EmbedMany = Callable[[Sequence[str]], NDArray[np.float32]]


class QueryBatcher:
    """Embeds queries through `embed_many`, batching those that arrive while it is busy."""

    def __init__(self, embed_many: EmbedMany, max_batch: int = 64, max_wait_s: float = 0.0):
        self._embed_many = embed_many
        self._max_batch = max_batch
        self._max_wait_s = max_wait_s
        self._queue: list[tuple[str, asyncio.Future[NDArray[np.float32]]]] = []
        self._worker: asyncio.Task[None] | None = None

    async def embed(self, text: str) -> NDArray[np.float32]:
        """The query's vector, from a batch shared with the queries queued beside it."""
        future: asyncio.Future[NDArray[np.float32]] = asyncio.get_running_loop().create_future()
        self._queue.append((text, future))
        if self._worker is None or self._worker.done():
            self._worker = asyncio.create_task(self._drain())
        return await future

    async def _drain(self) -> None:
        while self._queue:
            if self._max_wait_s and len(self._queue) < self._max_batch:
                await asyncio.sleep(self._max_wait_s)
            batch, self._queue = self._queue[: self._max_batch], self._queue[self._max_batch :]
            waiting = [(text, future) for text, future in batch if not future.done()]
            if not waiting:
                continue
            texts = list(dict.fromkeys(text for text, _ in waiting))
            try:
                vectors = await asyncio.to_thread(self._embed_many, texts)
            except Exception as exc:
                for _, future in waiting:
                    if not future.done():
                        future.set_exception(exc)
                continue
            row = {text: i for i, text in enumerate(texts)}
            for text, future in waiting:
                if not future.done():
                    future.set_result(vectors[row[text]])

    async def close(self) -> None:
        """Waits for the batch in progress (queued queries are still answered)."""
        if self._worker is not None:
            await asyncio.gather(self._worker, return_exceptions=True)
