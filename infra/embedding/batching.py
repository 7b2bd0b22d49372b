"""Query embeddings in micro-batches: concurrent searches share one model call.

A transformer embeds 30 short queries in one call in little more time than one, but one call
at a time. So queries wait in a queue while the model works, and each call takes everything
that has queued up (up to `max_batch`), as inference servers batch dynamically
(`core.coalescing.Coalescer`). A lone query is embedded at once: the queue only forms while the
model is busy, so nothing waits when the service is idle. `max_wait_s` adds an optional short
wait to collect a batch before the first call of a burst.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence

import numpy as np
from numpy.typing import NDArray

from core.coalescing import Coalescer

EmbedMany = Callable[[Sequence[str]], NDArray[np.float32]]


class QueryBatcher:
    """Embeds queries through `embed_many`, batching those that arrive while it is busy."""

    def __init__(self, embed_many: EmbedMany, max_batch: int = 64, max_wait_s: float = 0.0):
        self._embed_many = embed_many
        self._batches: Coalescer[str, NDArray[np.float32]] = Coalescer(
            self._embed, max_batch=max_batch, max_wait_s=max_wait_s
        )

    async def embed(self, text: str) -> NDArray[np.float32]:
        """The query's vector, from a batch shared with the queries queued beside it."""
        (vector,) = await self._batches.submit([text])
        return vector

    async def _embed(self, texts: list[str]) -> list[NDArray[np.float32]]:
        # The same query asked twice at once is embedded once.
        unique = list(dict.fromkeys(texts))
        vectors = await asyncio.to_thread(self._embed_many, unique)
        row = {text: i for i, text in enumerate(unique)}
        return [vectors[row[text]] for text in texts]

    async def close(self) -> None:
        """Waits for the batch in progress (queued queries are still answered)."""
        await self._batches.close()
