"""Domain records: knowledge bases, documents, chunks, principals. No I/O."""

from __future__ import annotations

import hashlib
import json
import math
import secrets
import uuid
from datetime import UTC, datetime
from enum import StrEnum
from typing import Annotated, Any

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    ValidationInfo,
    computed_field,
    model_validator,
)

from core.governance import Governance, Visibility
from core.retrieval import FusionField, FusionMethod, RetrievalMode, RetrievalModeField

CHUNK_POINT_NAMESPACE = uuid.NAMESPACE_URL
# Between a chunk's context prefix and its text in what is embedded.
CONTEXT_SEPARATOR = "\n\n"


def utcnow() -> datetime:
    """The current time, timezone-aware, at millisecond precision (what Mongo stores)."""
    now = datetime.now(UTC)
    return now.replace(microsecond=now.microsecond // 1000 * 1000)


# A KB code: lowercase letters, digits and dashes, at most 32 (an id always holds "_").
KB_CODE_PATTERN = r"^[a-z0-9](?:[a-z0-9-]{0,31})$"
# What the schema says of a text that may not be blank (a validator refuses it with a
# readable message): it holds a character that is not a space.
NOT_BLANK: dict[str, Any] = {"pattern": r"\S"}
# How deep a record's metadata may nest (MongoDB stores documents up to 100 levels deep).
METADATA_DEPTH = 32


def storable_metadata(metadata: dict[str, Any]) -> dict[str, Any]:
    """The metadata, if MongoDB can store it as given; else a ValueError saying why (a key
    with a NUL character, an integer beyond 64 bits, a number that is not finite, or nesting
    deeper than `METADATA_DEPTH`)."""

    def check(value: Any, depth: int) -> None:
        if depth > METADATA_DEPTH:
            raise ValueError(f"metadata may nest at most {METADATA_DEPTH} levels deep")
        if isinstance(value, dict):
            for key, item in value.items():
                if "\x00" in key:
                    raise ValueError("metadata keys may not contain a NUL character")
                check(item, depth + 1)
        elif isinstance(value, list):
            for item in value:
                check(item, depth + 1)
        elif isinstance(value, int) and not isinstance(value, bool):
            if not -(2**63) <= value < 2**63:
                raise ValueError("metadata integers must fit in 64 bits")
        elif isinstance(value, float) and not math.isfinite(value):
            raise ValueError("metadata numbers must be finite")

    check(metadata, 1)
    return metadata


# A record's free-form metadata, stored as given.
Metadata = Annotated[dict[str, Any], AfterValidator(storable_metadata)]


def not_blank(value: str, info: ValidationInfo) -> str:
    """The text, if it holds a character that is not a space; else a ValueError naming it."""
    if not value.strip():
        raise ValueError(f"{info.field_name} must not be blank")
    return value


# A text that may not be blank (pair it with NOT_BLANK in the field's schema where it is sent).
NotBlank = Annotated[str, AfterValidator(not_blank)]


def new_kb_id() -> str:
    """A fresh knowledge-base id, `kb_<hex>`."""
    return f"kb_{secrets.token_hex(8)}"


def new_document_id() -> str:
    """A fresh document id, `doc_<hex>`."""
    return f"doc_{secrets.token_hex(8)}"


def chunk_id(document_id: str, chunk_index: int) -> str:
    """The id of a document's chunk, `{document_id}_chunk_{i}`."""
    return f"{document_id}_chunk_{chunk_index}"


def file_source_key(filename: str) -> str:
    """The version line of an uploaded file: its name."""
    return f"file:{filename}"


def record_source_key(external_id: str) -> str:
    """The version line of a connector's record: its external id."""
    return f"ext:{external_id}"


def chunk_point_id(document_id: str, chunk_index: int) -> str:
    """The vector-store point id of a chunk: a UUID5 of its chunk id, so re-indexing overwrites."""
    return str(uuid.uuid5(CHUNK_POINT_NAMESPACE, chunk_id(document_id, chunk_index)))


class Role(StrEnum):
    """What a token may do within its tenant."""

    ADMIN = "admin"
    USER = "user"
    # A bot's token: its agent searches the bot's KBs with the bot's settings, over `/mcp` and
    # `POST /api/v1/knowledge/search` only.
    BOT = "bot"


class Principal(BaseModel):
    """Who is calling: a token's tenant, role and (for a person's token) user."""

    model_config = ConfigDict(frozen=True)

    tenant_id: str
    role: Role
    token_id: str
    user_id: str | None = None
    bot_id: str | None = None

    @property
    def admin(self) -> bool:
        """Whether the caller administers the tenant."""
        return self.role is Role.ADMIN


class TokenInfo(BaseModel):
    """An issued token as it may be shown again: everything but its secret."""

    id: str
    tenant_id: str
    role: Role
    name: str
    user_id: str | None = None
    bot_id: str | None = None
    created_at: datetime
    # After this moment the token is refused (none: it lasts until revoked).
    expires_at: datetime | None = None


class AuditEntry(BaseModel):
    """One change asked of the API: who, what, when, and how it ended."""

    id: str
    tenant_id: str
    at: datetime
    token_id: str
    user_id: str | None = None
    role: Role
    method: str
    path: str
    status: int
    # ok (2xx), refused (4xx) or failed (5xx).
    outcome: str
    # What the change was, where the path does not say it all (an evaluation applied: to
    # what, which configuration, the settings before and after).
    details: dict[str, Any] | None = None


class DeadLetterEntry(BaseModel):
    """A message a pipeline stage gave up on, and why."""

    id: str
    stage: str
    tenant_id: str | None = None
    kb_id: str | None = None
    document_id: str | None = None
    error: str
    attempts: int
    # How many times this very message was given up on.
    count: int = 1
    at: datetime
    size_bytes: int
    # Set once someone re-drove it.
    redriven_at: datetime | None = None


class User(BaseModel):
    """A person of a tenant, known by the id the tenant's identity provider gives them."""

    tenant_id: str
    user_id: str
    display_name: str = ""
    created_at: datetime


class Audience(BaseModel):
    """A tenant-local group of users that items can be shared with."""

    tenant_id: str
    tag: str
    description: str = ""
    members: list[str] = Field(default_factory=list)
    updated_at: datetime


class KbStatus(StrEnum):
    """Whether a knowledge base is searchable."""

    ACTIVE = "active"
    DISABLED = "disabled"
    # Being removed with all its documents (a hard delete that has not finished yet).
    DELETING = "deleting"


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


# The order a document moves through.
PIPELINE_ORDER: tuple[ParseStatus, ...] = (
    ParseStatus.QUEUED,
    ParseStatus.EXTRACTING,
    ParseStatus.CHUNKING,
    ParseStatus.EMBEDDING,
    ParseStatus.INDEXING,
    ParseStatus.INDEXED,
)

# The status a document is in while each stage works on it.
STAGE_STATUS: dict[str, ParseStatus] = {
    "extract": ParseStatus.EXTRACTING,
    "chunk": ParseStatus.CHUNKING,
    "embed": ParseStatus.EMBEDDING,
    "index": ParseStatus.INDEXING,
}


class RetrievalConfig(BaseModel):
    """A way to search: a retrieval mode and, for hybrid, how its rankings are fused (what an
    evaluation tries, and a KB's default for the searches no bot's settings govern)."""

    model_config = ConfigDict(extra="forbid")

    retrieval_mode: RetrievalModeField
    fusion: FusionField | None = None
    dense_weight: float | None = Field(default=None, ge=0, le=1)
    rrf_k: int | None = Field(default=None, ge=1, le=1000)

    @property
    def label(self) -> str:
        """`hybrid, convex 0.5`, `hybrid, convex per query`, `hybrid, RRF k=60`,
        `hybrid, DBSF 0.5`, `dense`."""
        if self.retrieval_mode != RetrievalMode.HYBRID or self.fusion is None:
            return self.retrieval_mode
        if self.fusion == FusionMethod.RRF:
            return "hybrid, RRF" + ("" if self.rrf_k is None else f" k={self.rrf_k}")
        weight = "per query" if self.dense_weight is None else f"{self.dense_weight}"
        return f"hybrid, {FUSION_NAMES[self.fusion]} {weight}"


# How a fusion method is named in a configuration's label.
FUSION_NAMES = {
    FusionMethod.CONVEX: "convex",
    FusionMethod.RRF: "RRF",
    FusionMethod.DBSF: "DBSF",
    FusionMethod.ZSCORE: "z-score",
    FusionMethod.GATED: "gated",
}


class KnowledgeBase(BaseModel):
    """A tenant's collection of documents."""

    id: str
    tenant_id: str
    name: str
    description: str = ""
    default_language: str = "en"
    status: KbStatus = KbStatus.ACTIVE
    # The visibility of items an admin adds without saying (a user's are private to them).
    default_visibility: Visibility = Visibility.SHARED
    # A short name unique in the tenant that every route accepts in place of the id.
    code: str | None = None
    # Pages and files the KB is filled from: what a crawl job fetches when it names none.
    urls: list[str] = Field(default_factory=list)
    files: list[str] = Field(default_factory=list)
    document_count: int = 0
    chunk_count: int = 0
    # How people's searches (and an MCP user's) of this KB retrieve when the request does not
    # say: an evaluation's configuration applied to the KB; None, the service's default.
    default_retrieval: RetrievalConfig | None = None
    revision: int = 0
    created_at: datetime
    updated_at: datetime


class ItemKind(StrEnum):
    """What a knowledge item is."""

    DOCUMENT = "document"
    WIKI = "wiki"


# A document's title is cut to this length (one found in the file may be a whole paragraph).
TITLE_MAX_CHARS = 500


class Document(BaseModel):
    """One knowledge item (an uploaded file, a text, a record, a wiki page) and its progress
    through the pipeline."""

    id: str
    tenant_id: str
    kb_id: str
    filename: str
    title: str
    content_type: str
    size_bytes: int
    sha256: str
    storage_key: str
    # Versions of one source (the same file name, or the same external id) replace each other:
    # `version` counts up per (kb, source_key), and only the newest indexed one is searchable.
    source_key: str
    version: int = 1
    external_id: str | None = None
    url: str | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)
    parse_status: ParseStatus
    parse_error: str | None = None
    chunk_count: int | None = None
    text_char_count: int | None = None
    chunks_embedded: int = 0
    # How many chunk batches the run makes, once its last part is chunked, and the chunk
    # stage's place in the run's parts (the run's fields).
    batch_count: int | None = None
    chunker: ChunkingProgress | None = None
    # Chunks this document contributes to its KB's count: set when a generation finishes.
    indexed_chunk_count: int = 0
    generation: int = 1
    attempts: dict[str, int] = Field(default_factory=dict)
    # Runs restarted by the reconciler because the document stopped moving, each bounded:
    # counted against it when other documents moved meanwhile, uncounted when nothing else did
    # either (an outage, or the only document in progress).
    redrives: int = 0
    uncounted_redrives: int = 0
    # When a stage last moved it on: entered a stage, or ended it indexed or failed.
    progressed_at: datetime | None = None
    # The source a full sync keeps in step (a connector's name, or `crawl`), and the last sync
    # run that contained the document.
    source: str | None = None
    sync_run: str | None = None
    stage_started_at: dict[str, datetime] = Field(default_factory=dict)
    created_at: datetime
    updated_at: datetime
    # Who owns it and who may read it; the versions of one source are one knowledge item.
    governance: Governance = Field(default_factory=Governance)
    knowledge_item_id: str = ""
    kind: ItemKind = ItemKind.DOCUMENT
    # A wiki page's slug and summary.
    topic: str | None = None
    summary: str = ""

    @model_validator(mode="after")
    def _item_id(self) -> Document:
        if not self.knowledge_item_id:
            self.knowledge_item_id = self.id
        return self

    @computed_field  # type: ignore[prop-decorator]
    @property
    def readers(self) -> list[str]:
        """The principals that may read it (stored, so listings filter on it)."""
        return self.governance.readers()


class Record(BaseModel):
    """A text record from a connector or the text endpoints, upserted by `external_id`."""

    model_config = ConfigDict(extra="forbid")

    external_id: str | None = Field(default=None, min_length=1, max_length=512)
    title: str = Field(default="", max_length=TITLE_MAX_CHARS)
    content: NotBlank = Field(min_length=1, max_length=5_000_000)
    url: str | None = Field(default=None, max_length=2048)
    metadata: Metadata = Field(default_factory=dict)

    def as_markdown(self) -> str:
        """The text that is indexed: the title as a heading over the content."""
        return f"# {self.title.strip()}\n\n{self.content}" if self.title.strip() else self.content

    def fingerprint(self) -> str:
        """A hash of everything that is indexed: equal means unchanged."""
        canonical = json.dumps(
            [self.title, self.content, self.url, self.metadata], sort_keys=True, default=str
        )
        return hashlib.sha256(canonical.encode()).hexdigest()


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
    # A short prefix that situates the chunk in its document (title, heading path, page; maybe
    # a model's sentence too). It is embedded and sparse-indexed with the chunk; `text` stays
    # the exact source text that is cited. Empty in events made before contexts existed.
    context: str = ""

    @property
    def embedding_text(self) -> str:
        """The exact string embedded (dense and sparse) for this chunk: context, then text."""
        return f"{self.context}{CONTEXT_SEPARATOR}{self.text}" if self.context else self.text
