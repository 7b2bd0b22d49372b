"""Kafka topic names, in one place. A breaking change to an event is a new topic version."""

from __future__ import annotations

DOCUMENT_UPLOADED = "documents.uploaded.v1"
DOCUMENT_EXTRACTED = "documents.extracted.v1"
CHUNKS_READY = "chunks.ready.v1"
CHUNKS_EMBEDDED = "chunks.embedded.v1"
# Connectors publish text records here; the records worker upserts them by external id.
RECORDS_INGEST = "records.ingest.v1"
# The crawl worker's tasks: one URL of a crawl job each.
CRAWL_PAGES = "crawl.pages.v1"
# Every search of a session or turn announces what it retrieved here
# (`rag_chunks_retrieved`), after its answer is sent.
CHUNKS_RETRIEVED = "knowledge.chunks-retrieved.v1"

# Created by the relay only, and never written: a broker without it has lost its topics (the
# local broker keeps them in memory), so what was in flight must be re-driven.
BROKER_MARKER = "ragline.broker-marker.v1"

# The stages, in pipeline order, with the topic each consumes.
STAGE_INPUTS: dict[str, str] = {
    "records": RECORDS_INGEST,
    "crawl": CRAWL_PAGES,
    "extract": DOCUMENT_UPLOADED,
    "chunk": DOCUMENT_EXTRACTED,
    "embed": CHUNKS_READY,
    "index": CHUNKS_EMBEDDED,
}


def dead_letter_topic(stage: str) -> str:
    """Where a stage sends messages it gave up on."""
    return f"{stage}.dead-letter.v1"


ALL_TOPICS: tuple[str, ...] = (
    *STAGE_INPUTS.values(),
    CHUNKS_RETRIEVED,
    *(dead_letter_topic(stage) for stage in STAGE_INPUTS),
)


def topic_of(event: object) -> str:
    """The topic an event is published to."""
    from schemas.events import (
        ChunkBatchEmbedded,
        ChunkBatchReady,
        DocumentExtracted,
        DocumentUploaded,
        RecordPublished,
    )

    # Most specific first: ChunkBatchEmbedded extends ChunkBatchReady.
    for event_type, topic in (
        (ChunkBatchEmbedded, CHUNKS_EMBEDDED),
        (ChunkBatchReady, CHUNKS_READY),
        (DocumentExtracted, DOCUMENT_EXTRACTED),
        (DocumentUploaded, DOCUMENT_UPLOADED),
        (RecordPublished, RECORDS_INGEST),
    ):
        if isinstance(event, event_type):
            return topic
    raise TypeError(f"no topic for {type(event).__name__}")
