"""Request and response bodies of the HTTP API."""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, ConfigDict, Field, field_validator

from schemas.domain import Document, KbStatus, KnowledgeBase, ParseStatus, Role


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
    status: KbStatus | None = None


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
    parse_status: ParseStatus
    parse_error: str | None
    chunk_count: int | None
    chunks_embedded: int
    text_char_count: int | None
    attempts: dict[str, int]
    stage_started_at: dict[str, datetime]
    created_at: datetime
    updated_at: datetime

    @classmethod
    def of(cls, document: Document) -> DocumentOut:
        """Shapes a domain record for the API."""
        return cls.model_validate(document.model_dump())


class DocumentList(BaseModel):
    """Body of `GET /api/v1/knowledge-bases/{kb_id}/documents`."""

    items: list[DocumentOut]


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


class TenantSearchRequest(BaseModel):
    """Body of the internal search in its tenant form: `{tenant_id, kb_ids, query, top_k}`."""

    model_config = ConfigDict(extra="forbid")

    tenant_id: str = Field(min_length=1, max_length=200)
    kb_ids: list[str] = Field(max_length=100)
    query: str = Field(min_length=1, max_length=2000)
    top_k: int = Field(default=4, ge=1, le=50)

    @field_validator("query")
    @classmethod
    def _query_not_blank(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("query must not be blank")
        return value


class SearchHit(BaseModel):
    """One retrieved chunk."""

    score: float
    chunk_text: str
    document_id: str
    kb_id: str
    chunk_index: int
    source_name: str


class SearchResponse(BaseModel):
    """Body of the internal search's answer."""

    hits: list[SearchHit]
