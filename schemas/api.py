"""Request and response bodies of the HTTP API."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
)

from core.errors import InvalidRequest
from core.governance import NAME_PATTERN, GovernanceChange, Visibility
from core.urls import check_http_url
from schemas.chunks import ChunkPayload
from schemas.crawl import CrawlJob
from schemas.domain import (
    KB_CODE_PATTERN,
    NOT_BLANK,
    PIPELINE_ORDER,
    Audience,
    AuditEntry,
    DeadLetterEntry,
    Document,
    ItemKind,
    KbStatus,
    KnowledgeBase,
    Metadata,
    NotBlank,
    ParseStatus,
    Record,
    RetrievalConfig,
    Role,
    TokenInfo,
    User,
)
from schemas.index_generations import GenerationState, IndexGeneration

IN_PROGRESS_STATUSES = frozenset(PIPELINE_ORDER[:-1])
# A page or file a KB is filled from: an http(s) URL with a valid host (`core.urls`).
SourceUrl = Annotated[
    str,
    Field(min_length=8, max_length=2048, pattern=r"^https?://\S+$"),
    AfterValidator(check_http_url),
]


class FieldProblem(BaseModel):
    """One invalid field of a request: where it is (`records.0.content`, `query.limit`) and
    what is wrong with it."""

    field: str
    message: str


class ErrorBody(BaseModel):
    """Body of every error answer: `detail` says, for a person, why the request was refused;
    invalid input also lists each field's problem in `errors`."""

    detail: str = Field(min_length=1)
    errors: list[FieldProblem] | None = None


class Health(BaseModel):
    """Body of `GET /healthz`."""

    status: Literal["ok"]


class Readiness(BaseModel):
    """Body of `GET /readyz`: `ready`, or why not, with each dependency's state."""

    status: Literal["ready", "not ready", "starting"]
    # Each dependency's state: "ok" or what is wrong.
    checks: dict[str, str] = Field(default_factory=dict)


def governance_change(fields: BaseModel | dict[str, object]) -> GovernanceChange:
    """The governance fields a request body (or form) sets; 422 naming a malformed one."""
    if isinstance(fields, BaseModel):
        fields = fields.model_dump(include=set(GovernanceChange.model_fields), exclude_unset=True)
    try:
        return GovernanceChange.model_validate(fields)
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())
        raise InvalidRequest(f"invalid governance fields: {problems}") from exc


class KnowledgeBaseCreate(BaseModel):
    """Body of `POST /api/v1/knowledge-bases`."""

    model_config = ConfigDict(extra="forbid")

    # Not blank, and kept without the spaces around it.
    name: Annotated[NotBlank, AfterValidator(str.strip)] = Field(
        min_length=1, max_length=200, json_schema_extra=NOT_BLANK
    )
    description: str = Field(default="", max_length=5000)
    default_language: str = Field(default="en", min_length=2, max_length=16)
    # What admins' uploads get when they do not say (a user's are private to them).
    default_visibility: Visibility = Visibility.SHARED
    code: str | None = Field(default=None, max_length=32, pattern=KB_CODE_PATTERN)
    urls: list[SourceUrl] = Field(default_factory=list, max_length=1000)
    files: list[SourceUrl] = Field(default_factory=list, max_length=1000)


class KnowledgeBaseUpdate(BaseModel):
    """Body of `PATCH /api/v1/knowledge-bases/{kb_id}`: only the fields given change."""

    model_config = ConfigDict(extra="forbid")

    name: str | None = Field(default=None, min_length=1, max_length=200)
    description: str | None = Field(default=None, max_length=5000)
    default_language: str | None = Field(default=None, min_length=2, max_length=16)
    default_visibility: Visibility | None = None
    code: str | None = Field(default=None, max_length=32, pattern=KB_CODE_PATTERN)
    urls: list[SourceUrl] | None = Field(default=None, max_length=1000)
    files: list[SourceUrl] | None = Field(default=None, max_length=1000)
    status: Literal[KbStatus.ACTIVE, KbStatus.DISABLED] | None = None


class KnowledgeBaseOut(BaseModel):
    """A knowledge base as the API shows it."""

    id: str
    tenant_id: str
    name: str
    description: str
    default_language: str
    default_visibility: Visibility
    code: str | None = None
    urls: list[str] = Field(default_factory=list)
    files: list[str] = Field(default_factory=list)
    status: KbStatus
    document_count: int
    chunk_count: int
    # What people's searches of the KB use when they name no mode (an evaluation's
    # configuration applied to it); null: the service's default, hybrid with convex 0.5.
    default_retrieval: RetrievalConfig | None = None
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
    # The source a full sync keeps in step (a connector's, or `crawl`), if any.
    source: str | None = None
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
    # Governance: the item the versions belong to, who owns it, who may read it.
    knowledge_item_id: str
    kind: ItemKind
    owner_user_id: str | None
    creator_user_id: str | None
    visibility_mode: Visibility
    audience_tags: list[str]
    user_grants: list[str]
    tags: list[str]
    archived_at: datetime | None
    # Why it failed (the same as `parse_error`).
    last_error: str | None

    @classmethod
    def of(cls, document: Document, stalled_before: datetime | None = None) -> DocumentOut:
        """Shapes a domain record for the API; in progress and untouched since
        `stalled_before` means stalled."""
        stalled = (
            stalled_before is not None
            and document.parse_status in IN_PROGRESS_STATUSES
            and document.updated_at < stalled_before
        )
        return cls.model_validate(
            {
                **document.model_dump(),
                **document.governance.model_dump(),
                "stalled": stalled,
                "last_error": document.parse_error,
            }
        )


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
    `external_id`), and optionally who may read it."""

    visibility_mode: Visibility | None = None
    audience_tags: list[str] | None = None
    user_grants: list[str] | None = None
    owner_user_id: str | None = None
    tags: list[str] | None = None

    def record(self) -> Record:
        """The text as a record."""
        return Record.model_validate(self.model_dump(include=set(Record.model_fields)))

    def governance(self) -> GovernanceChange:
        """The governance fields it sets."""
        return governance_change(self)


class KeyedRecord(Record):
    """A record of a batch or a full sync: upserted by its `external_id`, which it must have."""

    external_id: str = Field(min_length=1, max_length=512)


class BatchIn(BaseModel):
    """Body of `POST .../documents/batch`: records upserted by `external_id`, with who may
    read them (`visibility_mode`, `audience_tags`, `user_grants`, `owner_user_id`)."""

    model_config = ConfigDict(extra="forbid")

    records: list[KeyedRecord] = Field(min_length=1, max_length=1000)
    visibility_mode: Visibility | None = None
    audience_tags: list[str] | None = None
    user_grants: list[str] | None = None
    owner_user_id: str | None = None
    tags: list[str] | None = None
    # Required with `visibility_mode: shared` and no audience_tags.
    confirm_tenant_wide: bool = False

    def governance(self) -> GovernanceChange:
        """The governance fields it sets."""
        return governance_change(self)

    @field_validator("records")
    @classmethod
    def _external_ids_unique(cls, records: list[KeyedRecord]) -> list[KeyedRecord]:
        seen: set[str] = set()
        for record in records:
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


# A sync source's name: a connector's (`zendesk`, `confluence-eng`), or `crawl`.
SourceName = Annotated[str, Field(min_length=1, max_length=64, pattern=r"^[a-z0-9][a-z0-9._-]*$")]


class SyncIn(BatchIn):
    """Body of `POST .../documents/sync`: the complete set of a source's records; the source's
    documents not among them are deleted."""

    source: SourceName
    records: list[KeyedRecord] = Field(min_length=0, max_length=1000)


class SyncOut(BatchOut):
    """What a full sync did: each record's outcome, and the documents it removed."""

    run: str
    removed: list[str]


class RecordReplace(BaseModel):
    """Body of `PUT .../documents/{document_id}`: a record's new title, body and URL (its
    external id and permissions stay)."""

    model_config = ConfigDict(extra="forbid")

    title: str = Field(default="", max_length=500)
    content: NotBlank = Field(min_length=1, max_length=5_000_000)
    url: str | None = Field(default=None, max_length=2048)
    metadata: Metadata = Field(default_factory=dict)


class TokenCreate(BaseModel):
    """Body of `POST /api/v1/tokens`: a user token names its user."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=1, max_length=200)
    role: Role = Role.USER
    user_id: str | None = Field(default=None, pattern=NAME_PATTERN)
    # Refused after this many seconds (none: until revoked).
    expires_in_s: int | None = Field(default=None, ge=1, le=10 * 365 * 24 * 3600)


class TokenOut(BaseModel):
    """A newly created token; the secret is shown once."""

    id: str
    name: str
    tenant_id: str
    role: Role
    user_id: str | None = None
    bot_id: str | None = None
    expires_at: datetime | None = None
    token: str


class BotTokenCreate(BaseModel):
    """Body of `POST /api/v1/bots/{bot_id}/tokens`."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(default="agent", min_length=1, max_length=200)
    expires_in_s: int | None = Field(default=None, ge=1, le=10 * 365 * 24 * 3600)


class TokenList(BaseModel):
    """Body of `GET /api/v1/tokens`: the tenant's tokens, without their secrets."""

    items: list[TokenInfo]


class UserIn(BaseModel):
    """Body of `PUT /api/v1/users/{user_id}`."""

    model_config = ConfigDict(extra="forbid")

    display_name: str = Field(default="", max_length=200)


class UserList(BaseModel):
    """Body of `GET /api/v1/users`."""

    items: list[User]


class AudienceIn(BaseModel):
    """Body of `PUT /api/v1/audiences/{tag}`."""

    model_config = ConfigDict(extra="forbid")

    description: str = Field(default="", max_length=2000)


class AudienceMembersIn(BaseModel):
    """Body of `PUT /api/v1/audiences/{tag}/members`: the complete member list."""

    model_config = ConfigDict(extra="forbid")

    user_ids: list[str] = Field(max_length=10_000)
    # Optional repeats of the path's audience and the caller's tenant: when given they must
    # match them.
    tenant_id: str | None = None
    audience_tag: str | None = None


class AudienceList(BaseModel):
    """Body of `GET /api/v1/audiences`."""

    items: list[Audience]


class DocumentContent(BaseModel):
    """Body of `GET .../documents/{document_id}/content`: the item's extracted text."""

    document_id: str
    title: str
    content: str


class WikiPageIn(BaseModel):
    """Body of `POST /api/v1/knowledge/wiki`: creates a page or a new version of it."""

    model_config = ConfigDict(extra="forbid")

    kb_id: str = Field(min_length=1)
    topic: str = Field(pattern=r"^[a-z0-9][a-z0-9-]{0,127}$")
    title: str = Field(min_length=1, max_length=500)
    summary: str = Field(default="", max_length=2000)
    content: NotBlank = Field(min_length=1, max_length=2_000_000, json_schema_extra=NOT_BLANK)
    tags: list[str] | None = None
    visibility_mode: Visibility | None = None
    audience_tags: list[str] | None = None
    user_grants: list[str] | None = None
    owner_user_id: str | None = None
    # The tenant may be named in the body too; when given it must be the caller's.
    tenant_id: str | None = None

    def governance(self) -> GovernanceChange:
        """The governance fields it sets."""
        return governance_change(self)


class WikiPageOut(BaseModel):
    """A wiki page: its newest version's text and status, and its governance."""

    topic: str
    kb_id: str
    document_id: str
    title: str
    summary: str
    content: str | None = None
    version: int
    parse_status: ParseStatus
    knowledge_item_id: str
    owner_user_id: str | None
    creator_user_id: str | None
    visibility_mode: Visibility
    audience_tags: list[str]
    user_grants: list[str]
    tags: list[str]
    archived_at: datetime | None
    last_error: str | None
    created_at: datetime
    updated_at: datetime

    @classmethod
    def of(cls, document: Document, content: str | None = None) -> WikiPageOut:
        """The page as the API shows it."""
        return cls.model_validate(
            {
                **document.model_dump(),
                **document.governance.model_dump(),
                "document_id": document.id,
                "content": content,
                "last_error": document.parse_error,
            }
        )


class WikiPageList(BaseModel):
    """Body of `GET /api/v1/knowledge/wiki`."""

    items: list[WikiPageOut]


class DeadLetterPage(BaseModel):
    """Body of `GET /api/v1/dead-letters`: newest first; pass the last `at` as `before`."""

    items: list[DeadLetterEntry]


class RedriveOut(BaseModel):
    """A dead letter started again: its document's new run (none for a connector record)."""

    id: str
    stage: str
    document_id: str | None = None


class RedriveAllOut(BaseModel):
    """Body of `POST /api/v1/dead-letters/redrive`."""

    items: list[RedriveOut]


class RestoreOut(BaseModel):
    """Answer of `POST /api/v1/restores`: what was written back."""

    records: dict[str, int] = Field(description="records written back, per MongoDB collection")
    points: int = Field(description="vector-store points written back")
    restarted_documents: int = Field(
        description="documents the snapshot caught in progress, started through the pipeline again"
    )


class CrawlJobCreate(BaseModel):
    """Body of `POST .../crawl-jobs`: left out, the KB's `urls` and `files` and the
    configured limits."""

    model_config = ConfigDict(extra="forbid")

    urls: list[SourceUrl] = Field(default_factory=list, max_length=100)
    file_urls: list[SourceUrl] = Field(default_factory=list, max_length=1000)
    max_pages: int | None = Field(default=None, ge=1, le=100_000)
    max_depth: int | None = Field(default=None, ge=0, le=20)
    # Shell-style globs on URL paths (`/docs/*`).
    include: list[str] = Field(default_factory=list, max_length=50)
    exclude: list[str] = Field(default_factory=list, max_length=50)


class CrawlJobQueued(BaseModel):
    """Answer to `POST .../crawl-jobs`."""

    queued: bool = True
    job_id: str
    job: CrawlJob


class CrawlJobList(BaseModel):
    """A KB's crawl jobs, newest first."""

    items: list[CrawlJob]


class AuditPage(BaseModel):
    """Body of `GET /api/v1/audit`: newest first; pass the last `at` as `before` for more."""

    items: list[AuditEntry]


class GenerationOut(BaseModel):
    """One generation of the vector store (`schemas.index_generations`), with a build's time
    left at its current rate."""

    generation: IndexGeneration
    seconds_left: float | None = Field(
        description="for one being built: until its copy is done, at its current rate"
    )

    @classmethod
    def of(cls, generation: IndexGeneration) -> GenerationOut:
        """The answer for `generation`."""
        building = generation.state is GenerationState.BUILDING
        left = generation.progress.seconds_left if building else None
        return cls(generation=generation, seconds_left=left)


class GenerationsOut(BaseModel):
    """Body of `GET /api/v1/generations`: every generation, oldest first."""

    items: list[GenerationOut]
