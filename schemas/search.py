"""The search contract: the internal search the agent runtime calls for its bots, people's
and agents' searches, and the shapes a hit takes in each. No I/O."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Discriminator, Field, Tag

from core.governance import NAME_PATTERN
from core.retrieval import FusionField, FusionMethod, RetrievalMode, RetrievalModeField
from schemas.domain import NOT_BLANK, NotBlank

# The most passages a bot's search returns.
BOT_TOP_K_MAX = 10


class BotSearchOptions(BaseModel):
    """The query of a bot's search and the overrides of its knowledge settings it allows (left
    out: the bot's own); the admin's search playground takes exactly these."""

    model_config = ConfigDict(extra="forbid")

    query: NotBlank = Field(min_length=1, max_length=2000, json_schema_extra=NOT_BLANK)
    kb_ids: list[str] | None = Field(default=None, max_length=100)
    top_k: int | None = Field(default=None, ge=1, le=BOT_TOP_K_MAX)
    score_threshold: float | None = Field(default=None, ge=0, le=1)
    strict: bool | None = None
    max_context_tokens: int | None = Field(default=None, ge=16, le=200_000)
    # The person the bot searches for: it then sees what that user may read of its KBs;
    # without one, only what the whole tenant may read.
    user_id: str | None = Field(default=None, pattern=NAME_PATTERN)


class BotSearchRequest(BotSearchOptions):
    """A bot's search: the bot's attached, active KBs, narrowed by `kb_ids` if given."""

    bot_id: str = Field(min_length=1, max_length=100)
    session_id: str = Field(min_length=1, max_length=200)
    # The agent turn this search is part of (announced with the retrieval event).
    turn_id: str | None = Field(default=None, max_length=200)


class KnowledgeSearchRequest(BaseModel):
    """A person's search over their tenant's active KBs, as their token allows."""

    model_config = ConfigDict(extra="forbid")

    query: NotBlank = Field(min_length=1, max_length=2000, json_schema_extra=NOT_BLANK)
    kb_ids: list[str] | None = Field(default=None, max_length=100)
    top_k: int = Field(default=5, ge=1, le=50)
    # Left out (or null): the searched KBs' default retrieval when they all have the same one
    # (an evaluation applied to them), else hybrid.
    retrieval_mode: RetrievalModeField | None = Field(
        default=None,
        description="left out: the searched knowledge bases' default retrieval when they all "
        "have the same one (an evaluation applied to them), else hybrid",
    )
    score_threshold: float | None = Field(default=None, ge=0, le=1)
    max_context_tokens: int | None = Field(default=None, ge=16, le=200_000)
    # The conversation and agent turn this search is part of: given, the search announces
    # what it retrieved (`rag_chunks_retrieved`).
    session_id: str | None = Field(default=None, max_length=200)
    turn_id: str | None = Field(default=None, max_length=200)


class TenantSearchRequest(BaseModel):
    """Admin tooling's search over a tenant's active KBs, in any retrieval mode."""

    model_config = ConfigDict(extra="forbid")

    tenant_id: str = Field(min_length=1, max_length=200)
    kb_ids: list[str] = Field(max_length=100)
    query: NotBlank = Field(min_length=1, max_length=2000, json_schema_extra=NOT_BLANK)
    top_k: int = Field(default=4, ge=1, le=50)
    score_threshold: float = Field(default=0.0, ge=0, le=1)
    retrieval_mode: RetrievalModeField = RetrievalMode.HYBRID
    fusion: FusionField = FusionMethod.CONVEX
    # None: chosen per query (a question leans on meaning; see the README's Search section).
    dense_weight: float | None = Field(default=None, ge=0, le=1)
    rrf_k: int = Field(default=60, ge=1, le=1000)
    max_context_tokens: int | None = Field(default=None, ge=16, le=200_000)


def _search_form(body: Any) -> str:
    """Which search an internal search body asks for: a bot's (it names `bot_id`), else the
    tenant form."""
    if isinstance(body, dict):
        return "bot" if "bot_id" in body else "tenant"
    return "bot" if isinstance(body, BotSearchRequest) else "tenant"


# Body of `POST /api/v1/internal/knowledge/search`: a bot's search or the tenant form (an
# invalid field is named under its form: `bot.session_id`, `tenant.kb_ids`).
InternalSearchRequest = Annotated[
    Annotated[BotSearchRequest, Tag("bot")] | Annotated[TenantSearchRequest, Tag("tenant")],
    Discriminator(_search_form),
]


class AlsoIn(BaseModel):
    """Another place holding (nearly) the same passage: a copy folded into the hit."""

    document_id: str
    document_title: str
    source_name: str
    kb_id: str
    page: int | None = None
    chunk_index: int


class SearchHit(BaseModel):
    """One retrieved passage: adjacent chunks of a document come merged as one, and copies of
    it in other documents are listed in `also_in` instead of taking places of their own."""

    # The one model of a hit: the bot contract answers with it as it is, and every other shape
    # a hit takes is made from it (below, and `schemas.events.RetrievedChunk`).

    score: float
    chunk_text: str
    document_id: str
    document_title: str
    source_name: str
    kb_id: str
    chunk_index: int
    page: int | None = None
    heading_path: list[str] = Field(default_factory=list)
    url: str | None = None
    retrieval_rationale: str
    also_in: list[AlsoIn] = Field(default_factory=list)
    # When the passage was indexed (ISO 8601, UTC).
    indexed_at: str | None = None

    @property
    def cited_as(self) -> str:
        """Where the passage is, as a reader would cite it."""
        parts = [self.document_title or self.source_name]
        if self.page is not None:
            parts.append(f"p. {self.page}")
        if self.heading_path:
            parts.append(" > ".join(self.heading_path))
        if self.url:
            parts.append(self.url)
        return ", ".join(part for part in parts if part)


class CacheHits(BaseModel):
    """Which cache layers answered."""

    access: bool = False
    embedding: bool = False
    result: bool = False


class SearchMetrics(BaseModel):
    """Where the time went, in milliseconds, step by step (`services.search.clock` says what
    each step is); `vector_search_ms` is ranking and fetch together."""

    access_ms: float = 0.0
    limit_ms: float = 0.0
    cache_ms: float = 0.0
    embedding_ms: float = 0.0
    ranking_ms: float = 0.0
    fetch_ms: float = 0.0
    shaping_ms: float = 0.0
    writes_ms: float = 0.0
    vector_search_ms: float = 0.0
    total_ms: float = 0.0
    cache: CacheHits = Field(default_factory=CacheHits)
    # The vector store's generation the search ranked against: its model embedded the query
    # (`schemas.index_generations`; None for a search of no KB).
    generation: int | None = None


class SearchResponse(BaseModel):
    """Body of the internal search's answer."""

    hits: list[SearchHit]
    metrics: SearchMetrics = Field(default_factory=SearchMetrics)
    # Set when the search is strict and found nothing: what the bot should say.
    fallback_message: str | None = None


# A hit's other shapes, each made from a `SearchHit` by its `of` (and nowhere else): a person's
# search over REST (`KnowledgeResult`), the admin's playground (`PlaygroundHit`), an agent's
# `knowledge_search` over MCP (`AgentHit`), and the retrieval event
# (`schemas.events.RetrievedChunk`).


def _hit_fields(hit: SearchHit) -> dict[str, Any]:
    """The fields a person's and an agent's hit both take from the search hit as it has them:
    its source document, score and place, and where to cite it (each shape keeps them in its
    own order)."""
    return {
        "source": hit.document_id,
        "score": hit.score,
        "kb_id": hit.kb_id,
        "page": hit.page,
        "heading_path": hit.heading_path,
        "url": hit.url,
        "citation": hit.cited_as,
        "also_in": hit.also_in,
    }


class KnowledgeResult(BaseModel):
    """One hit of a person's search: the passage, its source, score and place, then where to
    cite it."""

    content: str
    # The document the passage is from.
    source: str
    score: float
    document_title: str
    chunk_index: int
    retrieval_rationale: str
    kb_id: str
    page: int | None = None
    heading_path: list[str] = Field(default_factory=list)
    url: str | None = None
    # "Title, p. 3 > Heading" or similar: ready to show under an answer.
    citation: str
    also_in: list[AlsoIn] = Field(default_factory=list)

    @classmethod
    def of(cls, hit: SearchHit) -> KnowledgeResult:
        """The hit as a person's search shows it."""
        return cls(
            content=hit.chunk_text,
            document_title=hit.document_title,
            chunk_index=hit.chunk_index,
            retrieval_rationale=hit.retrieval_rationale,
            **_hit_fields(hit),
        )


class PlaygroundHit(SearchHit):
    """A hit of the bot's search, with where to cite it."""

    citation: str

    @classmethod
    def of(cls, hit: SearchHit) -> PlaygroundHit:
        """The hit as the playground shows it: the bot's hit and its citation."""
        return cls(**hit.model_dump(), citation=hit.cited_as)


class AgentHit(BaseModel):
    """A hit of an agent's `knowledge_search` (MCP, function calling)."""

    text: str
    score: float
    title: str
    source: str
    kb_id: str
    page: int | None = None
    heading_path: list[str] = Field(default_factory=list)
    url: str | None = None
    indexed_at: str | None = None
    citation: str
    # Other documents holding (nearly) the same passage, folded into this one.
    also_in: list[AlsoIn] = Field(default_factory=list)

    @classmethod
    def of(cls, hit: SearchHit) -> AgentHit:
        """The hit as an agent reads it."""
        return cls(
            text=hit.chunk_text,
            title=hit.document_title,
            indexed_at=hit.indexed_at,
            **_hit_fields(hit),
        )


class KnowledgeSearchResponse(BaseModel):
    """Body of the answer to `POST /api/v1/knowledge/search`."""

    results: list[KnowledgeResult]
    metrics: SearchMetrics = Field(default_factory=SearchMetrics)
