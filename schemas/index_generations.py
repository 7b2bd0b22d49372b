"""Index generations: which embedding model made the vectors a search ranks against.

Vectors of two models cannot be compared: a query embedded by one model and ranked against
another's vectors finds noise, with no error anywhere. So the vector store is kept in
generations, each holding one model's vectors only and recording that model
(`ModelIdentity`). One generation is `live`: searches rank against it, with its own model.
Changing the model builds a new generation beside it (`building`): every live chunk is embedded
again by the new model from the chunks already made, and what changes meanwhile (uploads,
replacements, deletes, who may read) reaches both. When it holds every live chunk it becomes
live in one step, and the old one is `retired`: kept (its deletes still applied) for a grace
period, then `dropped`. A building generation can be `cancelled` instead; the live one never
changed.

A generation's vectors live in a store of their own: the first generation keeps the name the
deployment always had (`store_name`), so a store made before generations is generation 1.
"""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from schemas.domain import utcnow

# Where a model runs (`infra.settings.embedding.EmbeddingSettings.provider`).
Provider = Literal["local", "gemini", "hashed"]


class ModelIdentity(BaseModel):
    """An embedding model, as its vectors are told apart: provider, model and vector size."""

    model_config = ConfigDict(frozen=True)

    provider: Provider
    # The provider's name for the model ("" for the local provider: its packaged model).
    model: str = ""
    dimensions: int = Field(ge=1)

    @property
    def label(self) -> str:
        """`provider:model/dimensions` as logs and messages name it (`local:packaged/384` for
        the packaged local model, `hashed/384` for the hashed embedder)."""
        if self.model:
            return f"{self.provider}:{self.model}/{self.dimensions}"
        if self.provider == "local":
            return f"local:packaged/{self.dimensions}"
        return f"{self.provider}/{self.dimensions}"


class GenerationState(StrEnum):
    """Where a generation is in its life."""

    # Being filled with the chunks of the live one, embedded by its own model.
    BUILDING = "building"
    # What searches rank against.
    LIVE = "live"
    # Replaced by a newer one; kept, its deletes still applied, until `drop_after`.
    RETIRED = "retired"
    # A build stopped before it was complete; its store is dropped.
    CANCELLED = "cancelled"
    # Its store is gone.
    DROPPED = "dropped"


# The states whose store still exists and takes deletes and changes of who may read.
KEPT = frozenset({GenerationState.BUILDING, GenerationState.LIVE, GenerationState.RETIRED})


class MigrationProgress(BaseModel):
    """How far a building generation is: its copy of the live chunks, then its checks."""

    # Live chunks when the copy began, and chunks embedded into this generation since.
    total: int = 0
    done: int = 0
    # Where the copy goes on (points are copied in id order: a restart goes on from here).
    cursor: str | None = None
    # Whether every point was copied once; then the passes that compared the two generations
    # point by point.
    copied: bool = False
    check_pass: int = 0
    # What the last pass found different and mended (0: the two agree).
    mended: int = 0
    started_at: datetime | None = None
    updated_at: datetime | None = None
    # Chunks embedded per second, over the copy so far.
    rate_per_s: float = 0.0

    @property
    def seconds_left(self) -> float | None:
        """At the current rate, until every chunk counted at the start is copied."""
        if self.rate_per_s <= 0:
            return None
        return max(0, self.total - self.done) / self.rate_per_s


class IndexGeneration(BaseModel):
    """One generation of the vector store (MongoDB collection `index_generations`)."""

    number: int = Field(ge=1)
    model: ModelIdentity
    state: GenerationState
    created_at: datetime = Field(default_factory=utcnow)
    live_since: datetime | None = None
    retired_at: datetime | None = None
    drop_after: datetime | None = None
    ended_at: datetime | None = None
    # Who asked for it: an admin's token id and tenant ("deployment" and None for the first).
    started_by: str = "deployment"
    tenant_id: str | None = None
    progress: MigrationProgress = Field(default_factory=MigrationProgress)
    # Why a build stopped, when it did.
    reason: str | None = None

    def store_name(self, base: str) -> str:
        """The name of this generation's store: `base` for the first (the store the deployment
        always had), `base-gN` for the N-th."""
        return base if self.number == 1 else f"{base}-g{self.number}"


class Generations(BaseModel):
    """The generations whose stores exist, as read at one moment: what a process searches and
    what its writes must reach."""

    model_config = ConfigDict(frozen=True)

    kept: tuple[IndexGeneration, ...]

    @property
    def live(self) -> IndexGeneration:
        """The generation searches rank against."""
        return next(g for g in self.kept if g.state is GenerationState.LIVE)

    @property
    def building(self) -> IndexGeneration | None:
        """The generation being built, if one is."""
        return next((g for g in self.kept if g.state is GenerationState.BUILDING), None)

    @property
    def filled(self) -> tuple[IndexGeneration, ...]:
        """Where new chunks are written, each with its own model's vectors: the live
        generation, and the building one."""
        return tuple(
            g for g in self.kept if g.state in (GenerationState.LIVE, GenerationState.BUILDING)
        )

    @property
    def models(self) -> tuple[ModelIdentity, ...]:
        """The models new chunks are embedded with (the live one's first), once each."""
        return tuple(dict.fromkeys(g.model for g in self.filled))
