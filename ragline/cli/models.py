"""The parts of the API's answers the CLI reads, as typed models.

Each model declares only the fields the CLI uses and keeps every other field it was given, so
`--json` prints what the API answered, and a newer API's extra fields do no harm.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

# A document's statuses in pipeline order; `indexed` and `failed` are final.
PIPELINE = ("queued", "extracting", "chunking", "embedding", "indexing", "indexed")
FINAL_STATUSES = frozenset({"indexed", "failed"})


class ApiModel(BaseModel):
    """An answer of the API: the declared fields typed, the others kept as they came."""

    model_config = ConfigDict(extra="allow", frozen=True)

    def as_json(self) -> dict[str, Any]:
        """Every field the API sent, as JSON values."""
        return self.model_dump(mode="json")


class KnowledgeBase(ApiModel):
    """A knowledge base."""

    id: str
    name: str
    code: str | None = None
    status: str
    description: str = ""
    default_language: str = ""
    default_visibility: str = ""
    document_count: int = 0
    chunk_count: int = 0

    @property
    def label(self) -> str:
        """How to name it to a person: its code if it has one, else its id."""
        return self.code or self.id


class Document(ApiModel):
    """A document and its place in the pipeline."""

    id: str
    kb_id: str
    filename: str
    title: str = ""
    sha256: str = ""
    version: int = 1
    parse_status: str
    parse_error: str | None = None
    chunk_count: int | None = None
    chunks_embedded: int = 0
    stalled: bool = False

    @property
    def final(self) -> bool:
        """Indexed or failed: the pipeline is done with it."""
        return self.parse_status in FINAL_STATUSES

    def passed(self, status: str) -> bool:
        """Whether the document has gone past this pipeline status."""
        if self.parse_status not in PIPELINE or status not in PIPELINE:
            return False
        return PIPELINE.index(self.parse_status) > PIPELINE.index(status)

    @property
    def chunks_done(self) -> int:
        """Chunks embedded so far (all of them once indexed)."""
        if self.parse_status == "indexed" and self.chunk_count is not None:
            return self.chunk_count
        if self.chunk_count is None:
            return self.chunks_embedded
        return min(self.chunks_embedded, self.chunk_count)


class DocumentPage(ApiModel):
    """A page of a document listing, newest first."""

    items: list[Document]
    next_cursor: str | None = None


class IssuedToken(ApiModel):
    """A newly issued token, with its secret (shown once)."""

    id: str
    name: str
    role: str
    user_id: str | None = None
    expires_at: str | None = None
    token: str


class TokenInfo(ApiModel):
    """An issued token, without its secret."""

    id: str
    name: str
    role: str
    user_id: str | None = None
    bot_id: str | None = None
    created_at: str
    expires_at: str | None = None


class SearchResult(ApiModel):
    """One passage of a person's search."""

    content: str
    source: str
    score: float
    document_title: str
    citation: str = ""
    kb_id: str
    retrieval_rationale: str = ""


class RetrievalConfig(ApiModel):
    """A retrieval mode and, for hybrid, its fusion."""

    retrieval_mode: str
    fusion: str | None = None
    dense_weight: float | None = None
    rrf_k: int | None = None

    @property
    def label(self) -> str:
        """`hybrid convex 0.5`, `hybrid convex per query`, `hybrid rrf k=60`, `dense` (a bot's
        dense settings keep a fusion they do not use)."""
        if self.retrieval_mode != "hybrid":
            return self.retrieval_mode
        if self.fusion == "convex":
            weight = "per query" if self.dense_weight is None else f"{self.dense_weight:g}"
            return f"{self.retrieval_mode} convex {weight}"
        if self.fusion == "rrf" and self.rrf_k is not None:
            return f"{self.retrieval_mode} rrf k={self.rrf_k}"
        return self.retrieval_mode


class Scores(ApiModel):
    """Mean figures over an evaluation's cases."""

    recall_at_k: float
    recall_at_10: float
    mrr: float
    ndcg_at_10: float


class Returned(ApiModel):
    """A hit that came back instead of what a missed case expected."""

    document_id: str
    document_title: str
    score: float
    text: str


class Miss(ApiModel):
    """A case whose expected items were not all in the top k."""

    query: str
    missing: list[str]
    returned: list[Returned] = Field(default_factory=list)


class ConfigResult(ApiModel):
    """How one configuration did, with its misses for the best of each mode."""

    config: RetrievalConfig
    scores: Scores
    misses: list[Miss] = Field(default_factory=list)


class Evaluation(ApiModel):
    """A kept evaluation of a knowledge base."""

    id: str
    kb_id: str
    k: int
    case_count: int
    modes: dict[str, ConfigResult]
    tried: list[ConfigResult] = Field(default_factory=list)
    best: RetrievalConfig
    best_scores: Scores


class Applied(ApiModel):
    """An evaluation's configuration applied to a bot or as a KB's default retrieval."""

    evaluation_id: str
    kb_id: str
    target: str
    bot_id: str | None = None
    config: RetrievalConfig
    scores: Scores
    # The target's retrieval settings before (None: a KB without a default) and after.
    before: RetrievalConfig | None = None
    after: RetrievalConfig
