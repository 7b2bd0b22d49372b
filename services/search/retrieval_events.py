"""Retrieval events (seed 002's `rag_chunks_retrieved`): what a search of a session or turn
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
from schemas.domain import chunk_id
from schemas.events import ChunksRetrieved, RetrievedChunk, Send
from schemas.search import SearchResponse
from schemas.topics import CHUNKS_RETRIEVED

log = logging.getLogger(__name__)

# Runs a job after the answer is sent.
Defer = Callable[[Callable[[], Awaitable[None]]], None]


def retrieved_chunks(response: SearchResponse) -> list[RetrievedChunk]:
    """The chunks an answer returned, with their scores."""
    return [
        RetrievedChunk(
            chunk_id=chunk_id(hit.document_id, hit.chunk_index),
            document_id=hit.document_id,
            kb_id=hit.kb_id,
            score=hit.score,
        )
        for hit in response.hits
    ]


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
