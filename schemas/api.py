"""Request and response bodies of the HTTP API."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from schemas.chunks import ChunkPayload
from schemas.domain import (
    PIPELINE_ORDER,
    Document,
    KbStatus,
    KnowledgeBase,
    ParseStatus,
    Record,
    Role,
)

IN_PROGRESS_STATUSES = frozenset(PIPELINE_ORDER[:-1])


class KnowledgeBaseCreate(BaseModel):
    """Body of `POST /api/v1/knowledge-bases`."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=1, max_length=200)
    description: str = Field(default="", max_length=5000)
    default_language: str = Field(default="en", min_length=2, max_length=16)

    @field_validator("name")
    @classmethod
    def _name_not_blank(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("name must not be blank")
        return value.strip()


class KnowledgeBaseUpdate(BaseModel):
    """Body of `PATCH /api/v1/knowledge-bases/{kb_id}`: only the fields given change."""

    model_config = ConfigDict(extra="forbid")

    name: str | None = Field(default=None, min_length=1, max_length=200)
    description: str | None = Field(default=None, max_length=5000)
    default_language: str | None = Field(default=None, min_length=2, max_length=16)
    status: Literal[KbStatus.ACTIVE, KbStatus.DISABLED] | None = None


class KnowledgeBaseOut(BaseModel):
    """A knowledge base as the API shows it."""

    id: str
    tenant_id: str
    name: str
    description: str
    default_language: str
    status: KbStatus
    document_count: int
    chunk_count: int
    created_at: datetime
    updated_at: datetime

    @classmethod
    def of(cls, kb: KnowledgeBase) -> KnowledgeBaseOut:
        """Shapes a domain record for the API."""
        return cls.model_validate(kb.model_dump())


class KnowledgeBaseList(BaseModel):
    """Body of `GET /api/v1/knowledge-bases`."""

    items: list[KnowledgeBaseOut]


class DocumentOut(BaseModel):
    """A document as the API shows it."""

    id: str
    kb_id: str
    filename: str
    title: str
    content_type: str
    size_bytes: int
    sha256: str
    storage_key: str
    source_key: str
    version: int
    external_id: str | None
    url: str | None
    parse_status: ParseStatus
    parse_error: str | None
    # True while it has not moved for longer than the configured stall deadline.
    stalled: bool = False
    chunk_count: int | None
    chunks_embedded: int
    text_char_count: int | None
    attempts: dict[str, int]
    stage_started_at: dict[str, datetime]
    created_at: datetime
    updated_at: datetime

    @classmethod
    def of(cls, document: Document, stalled_before: datetime | None = None) -> DocumentOut:
        """Shapes a domain record for the API; in progress and untouched since
        `stalled_before` means stalled."""
        stalled = (
            stalled_before is not None
            and document.parse_status in IN_PROGRESS_STATUSES
            and document.updated_at < stalled_before
        )
        return cls.model_validate({**document.model_dump(), "stalled": stalled})


class DocumentList(BaseModel):
    """Body of `GET /api/v1/knowledge-bases/{kb_id}/documents`: a page, newest first."""

    items: list[DocumentOut]
    # Pass as `cursor` to get the next page; null on the last page.
    next_cursor: str | None = None


class StoredChunk(BaseModel):
    """A chunk as the vector store holds it."""

    chunk_index: int
    chunk_text: str
    # The prefix the chunk was embedded with (`chunk_text` is the exact source text).
    context: str = ""
    active: bool
    page: int | None = None
    heading_path: list[str] = Field(default_factory=list)
    start: int | None = None
    end: int | None = None
    version: int | None = None

    @classmethod
    def of(cls, payload: ChunkPayload) -> StoredChunk:
        """The chunk as the API shows it."""
        return cls.model_validate(payload.model_dump())


class StoredChunks(BaseModel):
    """Body of `GET .../documents/{document_id}/chunks`."""

    items: list[StoredChunk]


class TextDocumentIn(Record):
    """Body of `POST .../documents/text`: a title and its content (optionally upserted by
    `external_id`)."""


class BatchIn(BaseModel):
    """Body of `POST .../documents/batch`: records upserted by `external_id`."""

    model_config = ConfigDict(extra="forbid")

    records: list[Record] = Field(min_length=1, max_length=1000)

    @field_validator("records")
    @classmethod
    def _external_ids_given_and_unique(cls, records: list[Record]) -> list[Record]:
        seen: set[str] = set()
        for index, record in enumerate(records):
            if not record.external_id:
                raise ValueError(f"record {index} has no external_id")
            if record.external_id in seen:
                raise ValueError(f"external_id {record.external_id!r} appears twice")
            seen.add(record.external_id)
        return records


class IngestResult(BaseModel):
    """What happened to one record of a batch."""

    external_id: str | None
    document_id: str
    outcome: str
    parse_status: ParseStatus


class BatchOut(BaseModel):
    """Body of the answer to `POST .../documents/batch`."""

    results: list[IngestResult]


class TokenCreate(BaseModel):
    """Body of `POST /api/v1/tokens`."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=1, max_length=200)
    role: Role = Role.USER


class TokenOut(BaseModel):
    """A newly created token; the secret is shown once."""

    id: str
    name: str
    tenant_id: str
    role: Role
    token: str
