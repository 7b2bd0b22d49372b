"""Search settings: retrieval, fusion, caching and shaping."""

from __future__ import annotations

from pydantic import BaseModel, Field


class SearchSettings(BaseModel):
    """The search service: caches and candidate pools."""

    access_ttl_s: int = Field(
        default=60,
        ge=1,
        description=(
            "Longest an API process holds a bot's resolved access, a tenant's KBs, a token or a "
            "reader in memory; a change retires them at once (s)."
        ),
    )
    embedding_ttl_s: int = Field(
        default=24 * 3600, ge=1, description="Lifetime of a cached query embedding (s)."
    )
    result_ttl_s: int = Field(
        default=30 * 60, ge=1, description="Lifetime of a cached answer that found hits (s)."
    )
    empty_result_ttl_s: int = Field(
        default=2 * 60, ge=1, description="Lifetime of a cached answer that found nothing (s)."
    )
    hot_answers_mb: int = Field(
        default=64,
        ge=0,
        description=(
            "Memory each API process gives answers it answers again without asking Redis, the "
            "least recently used leaving first (MB; 0: every search asks Redis)."
        ),
    )
    follower_lease_s: float = Field(
        default=1.0,
        gt=0,
        le=30,
        description=(
            "How long an API process may answer from memory after Redis last confirmed it had "
            "every change; a change waits at most this long for a process that stopped "
            "confirming (s)."
        ),
    )
    cache_retry_after_s: float = Field(
        default=2.0,
        ge=0,
        description="After a Redis failure, how long searches skip the cache (s).",
    )
    depth: int = Field(
        default=100,
        ge=1,
        le=1000,
        description="Candidates each retriever contributes to a hybrid fusion (count).",
    )
    # Merging neighbours, folding copies and the threshold thin the chunks out.
    oversample: int = Field(
        default=5,
        ge=1,
        le=20,
        description=(
            "Chunks of the ranking that must pass the threshold among those a search reads "
            "first, per hit wanted (factor)."
        ),
    )
    lead_ratio: float = Field(
        default=1.5,
        ge=1,
        description=(
            "A retriever's first chunk leads, and hybrid fusion places it first, when its BM25 "
            "score is this many times the second's (factor)."
        ),
    )
    lead_gap: float = Field(
        default=0.1,
        gt=0,
        description=(
            "A dense retriever's first chunk leads, and hybrid fusion places it first, when its "
            "cosine is this much above the second's (cosine)."
        ),
    )
    # The kind of a query: `services.search.fusion.query_kind`.
    question_dense_weight: float = Field(
        default=0.8,
        ge=0,
        le=1,
        description=(
            "Convex fusion's dense weight for a question (how..., what...?) where a search sets "
            "none (0 to 1)."
        ),
    )
    exact_dense_weight: float = Field(
        default=0.5,
        ge=0,
        le=1,
        description=(
            "Convex fusion's dense weight for a query naming an identifier or quoting words, "
            "where a search sets none (0 to 1)."
        ),
    )
    plain_dense_weight: float = Field(
        default=0.5,
        ge=0,
        le=1,
        description=(
            "Convex fusion's dense weight for any other query (keywords, a title, a "
            "description), where a search sets none (0 to 1)."
        ),
    )
    # Pseudo-relevance feedback in hybrid searches for a question: terms held by at least
    # `feedback_min_chunks` of the `feedback_chunks` best semantic matches join the keyword
    # query at `feedback_weight` (`services.search.retrieval.Feedback`).
    feedback_chunks: int = Field(
        default=0,
        ge=0,
        le=20,
        description=(
            "Best semantic matches whose terms may join a question's keyword query (count; "
            "0: no feedback)."
        ),
    )
    feedback_min_chunks: int = Field(
        default=2,
        ge=1,
        le=20,
        description="Of those matches, how many must hold a term for it to join (count).",
    )
    feedback_weight: float = Field(
        default=0.3,
        ge=0,
        le=10,
        description="Weight of the feedback terms in the keyword query (factor).",
    )
    rare_term_documents: int = Field(
        default=3,
        ge=0,
        le=100,
        description=(
            "A query's identifier term is rare when at most this many documents of the searched "
            "KBs hold it; chunks holding every rare one go first in hybrid fusion (count)."
        ),
    )
    rare_term_gate: float = Field(
        default=3.0,
        gt=0,
        description=(
            "Gated hybrid fusion adds the keyword ranking to the semantic one only when the "
            "keyword retriever's best score reaches this per query term (BM25 score)."
        ),
    )
    duplicate_threshold: float = Field(
        default=0.5,
        gt=0,
        le=1,
        description=(
            "Share of word shingles (of the shorter hit) two hits must share to fold into the "
            "best-ranked one as copies (0 to 1; `services.search.duplicates`)."
        ),
    )
    merge_max_chunks: int = Field(
        default=3,
        ge=1,
        le=20,
        description="Most neighbouring chunks of a document merged into one hit (count).",
    )
    # Hybrid searches keep exact keyword matches below it.
    people_score_threshold: float = Field(
        default=0.3,
        ge=0,
        le=1,
        description=(
            "Minimum cosine similarity of a hit of a person's search "
            "(`POST /api/v1/knowledge/search`) when the request does not say (0 to 1)."
        ),
    )
