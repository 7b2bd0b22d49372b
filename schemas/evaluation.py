"""A knowledge base's retrieval evaluation: the cases an admin asks, and what came of them."""

from __future__ import annotations

import secrets
from datetime import datetime
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from schemas.domain import NOT_BLANK

MAX_CASES = 100


def new_evaluation_id() -> str:
    """A fresh evaluation id, `eval_<hex>`."""
    return f"eval_{secrets.token_hex(8)}"


def _not_blank(value: str) -> str:
    if not value.strip():
        raise ValueError("must not be blank")
    return value


class EvaluationCase(BaseModel):
    """A question and what a good answer contains: document ids of the KB, or text snippets
    that a relevant passage holds (case and spacing are ignored)."""

    model_config = ConfigDict(extra="forbid")

    query: str = Field(min_length=1, max_length=2000, json_schema_extra=NOT_BLANK)
    expected: list[Annotated[str, Field(max_length=2000, json_schema_extra=NOT_BLANK)]] = Field(
        min_length=1, max_length=20
    )

    _query = field_validator("query")(_not_blank)

    @field_validator("expected")
    @classmethod
    def _expected_not_blank(cls, values: list[str]) -> list[str]:
        for value in values:
            _not_blank(value)
        return values


class EvaluationRequest(BaseModel):
    """Body of `POST /api/v1/knowledge-bases/{kb_id}/evaluations`."""

    model_config = ConfigDict(extra="forbid")

    cases: list[EvaluationCase] = Field(min_length=1, max_length=MAX_CASES)
    # The k of recall@k: how many hits the bot would use (its top_k).
    k: int = Field(default=4, ge=1, le=10)


class RetrievalConfig(BaseModel):
    """A way to search: a retrieval mode and, for hybrid, how its rankings are fused."""

    retrieval_mode: Literal["dense", "sparse", "hybrid"]
    fusion: Literal["convex", "rrf"] | None = None
    dense_weight: float | None = None
    rrf_k: int | None = None


class Returned(BaseModel):
    """A hit that came back for a missed case."""

    document_id: str
    document_title: str
    score: float
    text: str


class Miss(BaseModel):
    """A case whose expected items were not all in the top k, and what came instead."""

    query: str
    missing: list[str]
    returned: list[Returned]


class Scores(BaseModel):
    """Mean figures over the cases (definitions in the README)."""

    recall_at_k: float
    recall_at_10: float
    mrr: float
    ndcg_at_10: float


class ConfigResult(BaseModel):
    """How one configuration did."""

    config: RetrievalConfig
    scores: Scores
    misses: list[Miss] = Field(default_factory=list)


class Evaluation(BaseModel):
    """A stored evaluation of a knowledge base."""

    id: str
    tenant_id: str
    kb_id: str
    created_at: datetime
    k: int
    case_count: int
    # The best configuration of each retrieval mode, with its misses.
    modes: dict[str, ConfigResult]
    # Every configuration tried (without misses).
    tried: list[ConfigResult]
    # The configuration a bot should use: the best by nDCG@10 among those a bot can use
    # (dense and hybrid; sparse is reported for comparison).
    best: RetrievalConfig
    best_scores: Scores
