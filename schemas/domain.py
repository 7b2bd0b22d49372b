"""Domain records: knowledge bases, documents, chunks, principals. No I/O."""

from __future__ import annotations

import secrets
import uuid
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

CHUNK_POINT_NAMESPACE = uuid.NAMESPACE_URL


def utcnow() -> datetime:
    """The current time, timezone-aware, at millisecond precision (what Mongo stores)."""
    now = datetime.now(UTC)
    return now.replace(microsecond=now.microsecond // 1000 * 1000)


def new_kb_id() -> str:
    """A fresh knowledge-base id, `kb_<hex>`."""
    return f"kb_{secrets.token_hex(8)}"


def new_document_id() -> str:
    """A fresh document id, `doc_<hex>`."""
    return f"doc_{secrets.token_hex(8)}"


def chunk_id(document_id: str, chunk_index: int) -> str:
    """The id of a document's chunk, `{document_id}_chunk_{i}`."""
    return f"{document_id}_chunk_{chunk_index}"


def chunk_point_id(document_id: str, chunk_index: int) -> str:
    """The vector-store point id of a chunk: a UUID5 of its chunk id, so re-indexing overwrites."""
    return str(uuid.uuid5(CHUNK_POINT_NAMESPACE, chunk_id(document_id, chunk_index)))


class Role(StrEnum):
    """What a token may do within its tenant."""

    ADMIN = "admin"
    USER = "user"


class Principal(BaseModel):
    """Who is calling: a token's tenant and role."""

    model_config = ConfigDict(frozen=True)

    tenant_id: str
    role: Role
    token_id: str


class KbStatus(StrEnum):
    """Whether a knowledge base is searchable."""

    ACTIVE = "active"
    DISABLED = "disabled"


class ParseStatus(StrEnum):
    """Where a document is in the ingestion pipeline."""

    QUEUED = "queued"
    EXTRACTING = "extracting"
    CHUNKING = "chunking"
    EMBEDDING = "embedding"
    INDEXING = "indexing"
    INDEXED = "indexed"
    FAILED = "failed"
    # Being removed: every pipeline write misses it from here on.
    DELETING = "deleting"


# The order a document moves through; a stage may claim a document that is in its own status
# (a redelivered message after a crash) or in the status just before it.
PIPELINE_ORDER: tuple[ParseStatus, ...] = (
    ParseStatus.QUEUED,
    ParseStatus.EXTRACTING,
    ParseStatus.CHUNKING,
    ParseStatus.EMBEDDING,
    ParseStatus.INDEXING,
    ParseStatus.INDEXED,
)


class KnowledgeBase(BaseModel):
    """A tenant's collection of documents."""

    id: str
    tenant_id: str
    name: str
    description: str = ""
    default_language: str = "en"
    status: KbStatus = KbStatus.ACTIVE
    document_count: int = 0
    chunk_count: int = 0
    revision: int = 0
    created_at: datetime
    updated_at: datetime


class Document(BaseModel):
    """One uploaded file and its progress through the pipeline."""

    id: str
    tenant_id: str
    kb_id: str
    filename: str
    title: str
    content_type: str
    size_bytes: int
    sha256: str
    storage_key: str
    parse_status: ParseStatus
    parse_error: str | None = None
    chunk_count: int | None = None
    text_char_count: int | None = None
    chunks_embedded: int = 0
    # Chunks this document contributes to its KB's count: set when a generation finishes.
    indexed_chunk_count: int = 0
    generation: int = 1
    attempts: dict[str, int] = Field(default_factory=dict)
    stage_started_at: dict[str, datetime] = Field(default_factory=dict)
    created_at: datetime
    updated_at: datetime


class ChunkingProgress(BaseModel):
    """The chunk stage's place in a document whose text arrives in parts."""

    next_part: int = 0
    next_batch: int = 0
    # The chunker's carried-over state (`workers.chunk.chunking.ChunkerState` as a dict).
    state: dict[str, Any] = Field(default_factory=dict)


class TextSegment(BaseModel):
    """A run of extracted text with where it came from (a page, a heading)."""

    text: str
    page: int | None = None
    heading_path: list[str] = Field(default_factory=list)
    # An atomic segment (a question/answer pair) becomes exactly one chunk of its own.
    atomic: bool = False


class ExtractedDocument(BaseModel):
    """What the extract stage hands to the chunk stage."""

    title: str
    segments: list[TextSegment]

    @property
    def char_count(self) -> int:
        """Characters of extracted text."""
        return sum(len(segment.text) for segment in self.segments)


class ChunkRecord(BaseModel):
    """A chunk of a document, with what is needed to cite it."""

    chunk_index: int
    text: str
    start: int
    end: int
    page: int | None = None
    heading_path: list[str] = Field(default_factory=list)
