"""Retrieval events (`rag_chunks_retrieved`): what a search of a session or turn
retrieved, announced on Kafka after the answer has gone out.

The transport decides what "after" means (`Defer`: FastAPI's background tasks once the
response is sent, a task of its own on the MCP server); the search never waits for Kafka, and
Kafka being down never fails a search: the event is dropped and counted
(`ragline_retrieval_events_total{result="failed"}`).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

from infra.metrics import RETRIEVAL_EVENTS
from schemas.events import ChunksRetrieved, Send
from schemas.topics import CHUNKS_RETRIEVED

log = logging.getLogger(__name__)

# Runs a job after the answer is sent.
Defer = Callable[[Callable[[], Awaitable[None]]], None]


class RetrievalEvents:
    """Announces retrievals on `knowledge.chunks-retrieved.v1`."""

    def __init__(self, send: Send) -> None:
        self._send = send

    async def announce(self, event: ChunksRetrieved) -> None:
        """Sends the event; a failure is logged and counted, never raised."""
        try:
            await self._send(CHUNKS_RETRIEVED, event.key, event.model_dump_json().encode())
        except Exception as exc:
            RETRIEVAL_EVENTS.labels("failed").inc()
            log.warning("retrieval event %s not sent: %s", event.event_id, exc)
            return
        RETRIEVAL_EVENTS.labels("sent").inc()
