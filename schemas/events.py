"""Pipeline events. Each is frozen, versioned, and keyed by `document_id` on Kafka."""

from __future__ import annotations

import base64
import uuid
from collections.abc import Awaitable, Callable, Sequence
from datetime import datetime
from typing import Any, Literal

import numpy as np
from numpy.typing import NDArray
from pydantic import BaseModel, ConfigDict, Field, model_validator

from core.governance import GovernanceChange
from schemas.domain import ChunkRecord, Document, ExtractedDocument, Record, chunk_id, utcnow
from schemas.formats import extraction_name
from schemas.index_generations import ModelIdentity
from schemas.search import SearchHit


class Event(BaseModel):
    """Fields every pipeline event carries."""

    model_config = ConfigDict(frozen=True)

    event_id: str = Field(default_factory=lambda: uuid.uuid4().hex)
    occurred_at: datetime = Field(default_factory=utcnow)
    schema_version: int = 1
    tenant_id: str
    kb_id: str
    document_id: str
    # Which run of the pipeline this event belongs to; a re-index bumps it, and stages drop
    # events of an older generation.
    generation: int = Field(ge=1)

    @property
    def opens_stage(self) -> bool:
        """Whether this is likely the message that takes its document into the next stage
        (the first part or batch of a run; a single event is)."""
        return True

    @property
    def carries_run(self) -> bool:
        """Whether the event carries all its stage needs to know of the document's run, so
        that the message that opens the stage need not read the document (events of before
        it did, and a stage whose handler reads the document, do not)."""
        return False

    @property
    def stored_on_entry(self) -> dict[str, str]:
        """Fields of the document that the move into the next stage stores too (none unless
        the event says otherwise)."""
        return {}

    @property
    def key(self) -> bytes:
        """The Kafka message key: one run's events stay in one partition, in order. A new run
        (a re-drive, a re-index) is keyed anew, so it lands on another partition: one whose
        consumer is stuck holds a document only until it is re-driven."""
        return f"{self.document_id}/{self.generation}".encode()


class DocumentUploaded(Event):
    """The original bytes are stored; extraction can start. A small original travels in the
    event too (`original`, base64 in JSON), so the extract stage need not read it back."""

    model_config = ConfigDict(ser_json_bytes="base64", val_json_bytes="base64")

    storage_key: str
    filename: str
    content_type: str
    original: bytes | None = None
    # The document's title when the run started, and whether it was only its file name then
    # (the file's own title replaces it); None in events of before they were carried.
    title: str | None = None
    title_is_filename: bool = False

    @property
    def carries_run(self) -> bool:
        return self.title is not None

    @classmethod
    def of(cls, document: Document, original: bytes | None = None) -> DocumentUploaded:
        """The event that starts the current run of the pipeline on a document (with its
        original bytes, if small enough to carry)."""
        return cls(
            tenant_id=document.tenant_id,
            kb_id=document.kb_id,
            document_id=document.id,
            generation=document.generation,
            storage_key=document.storage_key,
            filename=extraction_name(document.filename, document.content_type),
            content_type=document.content_type,
            original=original,
            title=document.title,
            title_is_filename=document.title == document.filename,
        )


class DocumentExtracted(Event):
    """One part of the document's text, carried in the event (`text`, a small part) or stored
    under `extracted_key` (a large one); chunking can go on.

    Long documents are extracted in parts (a few pages each) so that chunking and embedding
    start before extraction ends; `last` marks the final part.
    """

    part_index: int = Field(ge=0)
    last: bool
    extracted_key: str | None = None
    text: ExtractedDocument | None = None
    char_count: int = Field(ge=0)
    # The document's title as the extract stage left it (chunks are written under it); None
    # in events of before it was carried.
    title: str | None = None
    # The title was found in the file (PDF metadata, first heading, e-mail subject) and
    # replaces a title that was only the file name: the move into chunking stores it.
    retitled: bool = False

    @property
    def stored_on_entry(self) -> dict[str, str]:
        if self.retitled and self.title is not None and self.part_index == 0:
            return {"title": self.title}
        return {}

    @property
    def carries_run(self) -> bool:
        return self.title is not None

    @property
    def opens_stage(self) -> bool:
        """The first part takes the document into chunking."""
        return self.part_index == 0

    @model_validator(mode="after")
    def _text_or_key(self) -> DocumentExtracted:
        if (self.text is None) == (self.extracted_key is None):
            raise ValueError("a part is carried in the event or stored, exactly one of them")
        return self


class ChunkBatchReady(Event):
    """A bounded batch of a document's chunks, ready to embed."""

    batch_index: int = Field(ge=0)
    # The document's final batch (the total is then on the document as `batch_count`).
    last: bool
    chunks: list[ChunkRecord]

    @property
    def carries_run(self) -> bool:
        """The embed stage needs nothing of the document but that its run is current."""
        return True

    @property
    def opens_stage(self) -> bool:
        """The first batch likely takes the document into embedding (or indexing); later ones
        find it there."""
        return self.batch_index == 0

    @property
    def key(self) -> bytes:
        """Batches are independent to embed: spread them over partitions, so that several
        embed workers share even a single large document. (The index stage counts a
        document's batches, so their order does not matter to it.)"""
        return f"{self.document_id}/{self.generation}/{self.batch_index}".encode()


class ModelVectors(BaseModel):
    """One more model's dense vectors of a batch (one per chunk, packed as `dense_b64`)."""

    identity: ModelIdentity
    dense_b64: str


class ChunkBatchEmbedded(ChunkBatchReady):
    """The same batch with one dense vector per chunk (float32, base64, row-major) and one
    sparse (BM25-style) vector per chunk (packed: see `encode_sparse`). While a generation of
    the vector store is being built for another model (`schemas.index_generations`), the
    batch carries that model's vectors too (`more_vectors`)."""

    model: str
    dimensions: int = Field(ge=1)
    dense_b64: str
    # The model of `dense_b64` (None in a batch embedded before generations were recorded:
    # the live generation's, the only one then).
    identity: ModelIdentity | None = None
    more_vectors: list[ModelVectors] = Field(default_factory=list)
    # Per chunk: its number of terms; then all indices (uint32) and all weights (float32).
    sparse_lengths: list[int] = Field(default_factory=list)
    sparse_indices_b64: str = ""
    sparse_values_b64: str = ""

    @property
    def carries_run(self) -> bool:
        """The index stage reads the document: who may read it, as stored now."""
        return False

    @property
    def key(self) -> bytes:
        """Back to one partition per run of a document for the index stage."""
        return f"{self.document_id}/{self.generation}".encode()

    @staticmethod
    def encode_vectors(vectors: NDArray[np.float32]) -> str:
        """Packs an (n, d) float32 matrix for the wire."""
        return base64.b64encode(np.ascontiguousarray(vectors, dtype="<f4").tobytes()).decode()

    def vectors(self) -> NDArray[np.float32]:
        """The (n, d) matrix of dense vectors, one row per chunk."""
        return _unpacked(self.dense_b64, len(self.chunks), self.dimensions)

    def vectors_by_model(self, live: ModelIdentity) -> dict[ModelIdentity, NDArray[np.float32]]:
        """Each model's (n, d) matrix (`dense_b64`'s model is `live` in a batch that does
        not name it)."""
        found = {(self.identity or live): self.vectors()}
        for more in self.more_vectors:
            found[more.identity] = _unpacked(
                more.dense_b64, len(self.chunks), more.identity.dimensions
            )
        return found

    @staticmethod
    def encode_sparse(vectors: list[tuple[list[int], list[float]]]) -> dict[str, Any]:
        """Packs one (indices, values) sparse vector per chunk into the event's fields."""
        indices = np.fromiter(
            (i for ids, _ in vectors for i in ids),
            dtype="<u4",
            count=sum(len(v[0]) for v in vectors),
        )
        values = np.fromiter(
            (v for _, vals in vectors for v in vals), dtype="<f4", count=len(indices)
        )
        return {
            "sparse_lengths": [len(ids) for ids, _ in vectors],
            "sparse_indices_b64": base64.b64encode(indices.tobytes()).decode(),
            "sparse_values_b64": base64.b64encode(values.tobytes()).decode(),
        }

    def sparse(self) -> list[tuple[list[int], list[float]]]:
        """The (indices, values) sparse vector of each chunk."""
        indices = np.frombuffer(base64.b64decode(self.sparse_indices_b64), dtype="<u4")
        values = np.frombuffer(base64.b64decode(self.sparse_values_b64), dtype="<f4")
        out = []
        start = 0
        for length in self.sparse_lengths:
            out.append(
                (
                    indices[start : start + length].astype(int).tolist(),
                    values[start : start + length].astype(float).tolist(),
                )
            )
            start += length
        return out


def _unpacked(packed: str, rows: int, dimensions: int) -> NDArray[np.float32]:
    raw = np.frombuffer(base64.b64decode(packed), dtype="<f4")
    return raw.reshape(rows, dimensions).astype(np.float32)


class SyncMarker(BaseModel):
    """A record's place in a full sync of its source: every record of one run
    carries the same `run`; the run's last message has `complete` and no record, and says how
    many records the run published. Then the source's documents the run did not hold are
    removed."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    source: str = Field(min_length=1, max_length=64, pattern=r"^[a-z0-9][a-z0-9._-]*$")
    run: str = Field(min_length=1, max_length=128)
    complete: bool = False
    record_count: int | None = Field(default=None, ge=0)
    # How many times the closing message was put back to wait for the run's records.
    waited: int = Field(default=0, ge=0)


class RecordPublished(BaseModel):
    """A connector's record for a knowledge base (topic `records.ingest.v1`), or the end of a
    full sync (`sync.complete`, no record)."""

    model_config = ConfigDict(frozen=True)

    event_id: str = Field(default_factory=lambda: uuid.uuid4().hex)
    occurred_at: datetime = Field(default_factory=utcnow)
    schema_version: int = 1
    tenant_id: str = Field(min_length=1)
    kb_id: str = Field(min_length=1)
    record: Record | None = None
    sync: SyncMarker | None = None
    # Who may read it (visibility, audiences, grants, owner); left out: the previous version's,
    # or the KB's default visibility.
    governance: GovernanceChange = Field(default_factory=GovernanceChange)
    # Required with `visibility_mode: shared` and no audience: readable by the whole tenant.
    confirm_tenant_wide: bool = False

    @model_validator(mode="after")
    def _record_or_sync_end(self) -> RecordPublished:
        ending = self.sync is not None and self.sync.complete
        if (self.record is None) != ending:
            raise ValueError("a message holds a record, or (only) the end of a sync run")
        if ending and self.sync is not None and self.sync.record_count is None:
            raise ValueError("the end of a sync run says how many records it published")
        if self.sync is not None and self.record is not None and not self.record.external_id:
            raise ValueError("a synced record needs an external_id")
        return self

    @property
    def key(self) -> bytes:
        """One record's updates stay in order."""
        if self.record is None:
            return self.event_id.encode()
        return (self.record.external_id or self.event_id).encode()


# Publishes pipeline events, each to its topic; returns once Kafka has acknowledged them all
# (`infra.kafka.client.kafka_publisher`).
Publish = Callable[[Sequence[Event]], Awaitable[None]]
# Sends a raw message a stage gave up on to its dead-letter topic, with headers saying why.
DeadLetter = Callable[[bytes, dict[str, str]], Awaitable[None]]
# Sends one message (topic, key, value) and returns once Kafka has acknowledged it.
Send = Callable[[str, bytes, bytes], Awaitable[None]]


class RetrievedChunk(BaseModel):
    """One chunk a search returned (a merged hit names its first chunk)."""

    chunk_id: str
    document_id: str
    kb_id: str
    score: float

    @classmethod
    def of(cls, hit: SearchHit) -> RetrievedChunk:
        """The hit as the retrieval event names it."""
        return cls(
            chunk_id=chunk_id(hit.document_id, hit.chunk_index),
            document_id=hit.document_id,
            kb_id=hit.kb_id,
            score=hit.score,
        )


class ChunksRetrieved(BaseModel):
    """The `rag_chunks_retrieved` turn event (topic `knowledge.chunks-retrieved.v1`):
    what one search of a session or turn retrieved, published after its answer was sent."""

    model_config = ConfigDict(frozen=True)

    event_type: Literal["rag_chunks_retrieved"] = "rag_chunks_retrieved"
    event_id: str = Field(default_factory=lambda: uuid.uuid4().hex)
    occurred_at: datetime = Field(default_factory=utcnow)
    schema_version: int = 1
    tenant_id: str
    # Who searched: a bot (for a user, when `user_id` is set too), or a person.
    bot_id: str | None = None
    user_id: str | None = None
    session_id: str | None = None
    turn_id: str | None = None
    # Where the search came from: the bot contract, people's search, or MCP.
    channel: Literal["bot", "people", "mcp"]
    query: str
    retrieval_mode: str
    chunks: list[RetrievedChunk]
    latency_ms: float
    cached: bool

    @property
    def key(self) -> bytes:
        """One session's events stay in order."""
        return (self.session_id or self.turn_id or self.event_id).encode()
