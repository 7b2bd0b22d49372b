"""A knowledge base's retrieval evaluation: the cases an admin asks, and what came of them."""

from __future__ import annotations

import secrets
from datetime import datetime
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

from schemas.domain import NOT_BLANK, NotBlank, RetrievalConfig

MAX_CASES = 100


def new_evaluation_id() -> str:
    """A fresh evaluation id, `eval_<hex>`."""
    return f"eval_{secrets.token_hex(8)}"


class EvaluationCase(BaseModel):
    """A question and what a good answer contains: document ids of the KB, or text snippets
    that a relevant passage holds (case and spacing are ignored)."""

    model_config = ConfigDict(extra="forbid")

    query: NotBlank = Field(min_length=1, max_length=2000, json_schema_extra=NOT_BLANK)
    expected: list[Annotated[NotBlank, Field(max_length=2000, json_schema_extra=NOT_BLANK)]] = (
        Field(min_length=1, max_length=20)
    )


class EvaluationRequest(BaseModel):
    """Body of `POST /api/v1/knowledge-bases/{kb_id}/evaluations`."""

    model_config = ConfigDict(extra="forbid")

    cases: list[EvaluationCase] = Field(min_length=1, max_length=MAX_CASES)
    # The k of recall@k: how many hits the bot would use (its top_k).
    k: int = Field(default=4, ge=1, le=10)


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
    # Each case's nDCG@10, in the cases' order: what configurations are compared by, case by
    # case (empty in evaluations kept before they were).
    per_case: list[float] = Field(default_factory=list)


class Gain(BaseModel):
    """The best configuration against another on the same cases, compared case by case by
    nDCG@10: the cases it did better, worse and alike, the mean difference with its 95%
    bootstrap interval, and the p-value of a sign-flip randomisation test (`core.paired`). A
    gain is significant at p < 0.05."""

    over: RetrievalConfig
    wins: int
    losses: int
    ties: int
    difference: float
    interval: tuple[float, float]
    p_value: float
    significant: bool


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
    # The KB's searches' configuration when it was evaluated (its default retrieval, else the
    # service's), always among those tried; the best's gain over it; and whether applying the
    # best is offered: only for a significant gain (None, False: kept before they were).
    current: RetrievalConfig | None = None
    gain: Gain | None = None
    offered: bool = False


class ApplyToBot(BaseModel):
    """Apply a configuration to a bot's knowledge settings (the bot must have the KB
    attached; bots search dense or hybrid, not sparse)."""

    model_config = ConfigDict(extra="forbid")

    target: Literal["bot"]
    bot_id: str = Field(min_length=1, max_length=100)
    # One of the configurations the evaluation measured; left out, its best, applied only when
    # it is a significant gain over the bot's current configuration (409 otherwise).
    config: RetrievalConfig | None = None


class ApplyToKb(BaseModel):
    """Apply a configuration as the KB's default retrieval: people's searches of the KB use
    it when they do not name a mode."""

    model_config = ConfigDict(extra="forbid")

    target: Literal["kb"]
    # One of the configurations the evaluation measured; left out, its best, applied only when
    # it is a significant gain over the KB's current configuration (409 otherwise).
    config: RetrievalConfig | None = None


# Body of `POST /api/v1/knowledge-bases/{kb_id}/evaluations/{evaluation_id}/apply`.
ApplyRequest = Annotated[ApplyToBot | ApplyToKb, Field(discriminator="target")]


class Applied(BaseModel):
    """What an evaluation's configuration was applied to, and the target's retrieval
    settings before and after."""

    evaluation_id: str
    kb_id: str
    target: Literal["bot", "kb"]
    bot_id: str | None = None
    # The configuration applied, and how it did in the evaluation.
    config: RetrievalConfig
    scores: Scores
    # The bot's retrieval_mode, fusion, dense_weight and rrf_k; or the KB's default retrieval
    # (None: it had none, people's searches used the service's).
    before: RetrievalConfig | None
    after: RetrievalConfig
