"""Bots and their knowledge settings: which KBs they search, and how. No I/O."""

from __future__ import annotations

import secrets
from datetime import datetime

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator
from pydantic.config import JsonDict

from core.retrieval import BotRetrievalModeField, FusionField, FusionMethod, RetrievalMode

DEFAULT_FALLBACK = "Sorry, I could not find that in my knowledge base."


def new_bot_id() -> str:
    """A fresh bot id, `bot_<hex>`."""
    return f"bot_{secrets.token_hex(8)}"


class KnowledgeConfig(BaseModel):
    """How a bot searches: which KBs, how many hits, how sure, and what to say otherwise."""

    model_config = ConfigDict(extra="forbid")

    enabled: bool = False
    kb_ids: list[str] = Field(default_factory=list, max_length=100)
    top_k: int = Field(default=4, ge=1, le=10)
    # The minimum cosine similarity of a hit (in hybrid mode too; see the README).
    score_threshold: float = Field(default=0.55, ge=0, le=1)
    strict: bool = True
    trigger_instructions: str = Field(default="", max_length=4000)
    fallback_message: str = Field(default=DEFAULT_FALLBACK, min_length=1, max_length=1000)
    retrieval_mode: BotRetrievalModeField = RetrievalMode.HYBRID
    # How hybrid retrieval fuses its two rankings (see the README): a weighted sum of
    # normalised scores (`dense_weight` on the semantic side), or reciprocal rank fusion.
    fusion: FusionField = FusionMethod.CONVEX
    # None: chosen per query (a question leans on meaning; see the README's Search section).
    dense_weight: float | None = Field(default=None, ge=0, le=1)
    rrf_k: int = Field(default=60, ge=1, le=1000)
    max_context_tokens: int | None = Field(default=None, ge=16, le=200_000)

    @field_validator("kb_ids")
    @classmethod
    def _deduplicated(cls, kb_ids: list[str]) -> list[str]:
        return list(dict.fromkeys(kb_ids))


# The one knowledge field a patch may set to null: no limit.
NULLABLE = frozenset({"max_context_tokens", "dense_weight"})


def _not_nullable(schema: JsonDict) -> None:
    """A patch's fields may be left out, not set to null (but those in `NULLABLE`): its JSON
    schema says so."""
    properties = schema.get("properties")
    assert isinstance(properties, dict)
    for name, field in properties.items():
        if name in NULLABLE or not isinstance(field, dict):
            continue
        branches = field.pop("anyOf", None)
        if isinstance(branches, list):
            kept = [b for b in branches if isinstance(b, dict) and b.get("type") != "null"]
            field.update(kept[0])
            field.pop("default", None)


class KnowledgePatch(BaseModel):
    """A partial change of a bot's knowledge attachment: only the fields given change
    (`max_context_tokens: null` removes the limit, `dense_weight: null` has it chosen per
    query; no other field may be null)."""

    model_config = ConfigDict(extra="forbid", json_schema_extra=_not_nullable)

    enabled: bool | None = None
    kb_ids: list[str] | None = Field(default=None, max_length=100)
    top_k: int | None = Field(default=None, ge=1, le=10)
    score_threshold: float | None = Field(default=None, ge=0, le=1)
    strict: bool | None = None
    trigger_instructions: str | None = Field(default=None, max_length=4000)
    fallback_message: str | None = Field(default=None, min_length=1, max_length=1000)
    retrieval_mode: BotRetrievalModeField | None = None
    fusion: FusionField | None = None
    dense_weight: float | None = Field(default=None, ge=0, le=1)
    rrf_k: int | None = Field(default=None, ge=1, le=1000)
    max_context_tokens: int | None = Field(default=None, ge=16, le=200_000)

    @model_validator(mode="after")
    def _no_nulls(self) -> KnowledgePatch:
        nulls = sorted(
            name for name in self.model_fields_set - NULLABLE if getattr(self, name) is None
        )
        if nulls:
            raise ValueError(
                f"{', '.join(nulls)} may not be null (leave a field out to keep its value)"
            )
        return self


class Bot(BaseModel):
    """An agent or voice bot that searches knowledge."""

    id: str
    tenant_id: str
    name: str
    knowledge: KnowledgeConfig
    revision: int = 0
    created_at: datetime
    updated_at: datetime


class BotCreate(BaseModel):
    """Body of `POST /api/v1/bots`."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=1, max_length=200)
    knowledge: KnowledgeConfig = Field(default_factory=KnowledgeConfig)


class BotUpdate(BaseModel):
    """Body of `PATCH /api/v1/bots/{bot_id}`."""

    model_config = ConfigDict(extra="forbid")

    name: str | None = Field(default=None, min_length=1, max_length=200)
    knowledge: KnowledgePatch | None = None


class BotList(BaseModel):
    """Body of `GET /api/v1/bots`."""

    items: list[Bot]
