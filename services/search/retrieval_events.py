"""Retrieval events (`rag_chunks_retrieved`): what a search of a session or turn retrieved,
announced on Kafka after the answer.

A search only queues its event (`announce`: never waits, never fails); one task of the process
builds the queued events and sends them together (`infra.process.drain`: the producer batches them
into one request per partition), so no request waits for Kafka, and Kafka being down never
fails a search: the events are dropped and counted
(`ragline_retrieval_events_total{result="failed"}`).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from infra.process.drain import Drain
from infra.process.metrics import RETRIEVAL_EVENTS
from schemas.events import ChunksRetrieved, Send
from schemas.topics import CHUNKS_RETRIEVED

log = logging.getLogger(__name__)

# Builds an event: after the answer, off the request's path.
EventOf = Callable[[], ChunksRetrieved]


class RetrievalEvents:
    """Announces retrievals on `knowledge.chunks-retrieved.v1`."""

    def __init__(self, send: Send) -> None:
        self._send = send
        self._queue: Drain[EventOf] = Drain("retrieval-events", self._send_all)

    def announce(self, event: EventOf) -> None:
        """Queues an event (built and sent by the process's sending task)."""
        self._queue.put(event)

    async def sent(self) -> None:
        """Returns once every event queued so far was sent or dropped (for tests)."""
        await self._queue.idle()

    async def close(self) -> None:
        """Sends what is queued (for a moment), then stops."""
        await self._queue.close()

    async def _send_all(self, queued: list[EventOf]) -> None:
        events = [build() for build in queued]
        results = await asyncio.gather(
            *(
                self._send(CHUNKS_RETRIEVED, event.key, event.model_dump_json().encode())
                for event in events
            ),
            return_exceptions=True,
        )
        failed = [result for result in results if isinstance(result, BaseException)]
        RETRIEVAL_EVENTS.labels("sent").inc(len(results) - len(failed))
        if failed:
            # One line a batch: Kafka being down must not flood the log, one line a search.
            RETRIEVAL_EVENTS.labels("failed").inc(len(failed))
            log.warning(
                "%d of %d retrieval events not sent: %s", len(failed), len(events), failed[0]
            )
