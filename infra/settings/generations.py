"""Settings of the vector store's generations: how fresh each process keeps its view of them,
and how a migration to another embedding model runs (`schemas.index_generations`)."""

from __future__ import annotations

from pydantic import BaseModel, Field, model_validator


class GenerationSettings(BaseModel):
    """How processes follow the generations, and how a new one is built."""

    refresh_s: float = Field(
        default=2.0,
        gt=0,
        description=(
            "How often a process reads which generations exist (s): a migration's start, "
            "switch or cancel reaches every process within it."
        ),
    )
    valid_s: float = Field(
        default=10.0,
        gt=0,
        description=(
            "How long a process keeps writing and searching with its last read of the "
            "generations while MongoDB does not answer (s); after that its writes wait."
        ),
    )
    grace_s: float = Field(
        default=86_400.0,
        ge=0,
        description=(
            "How long a generation replaced by a migration is kept before its store is "
            "dropped (s); an admin can drop it sooner."
        ),
    )
    copy_batch: int = Field(
        default=64,
        ge=1,
        le=1024,
        description="Chunks a migration reads, embeds and writes at a time (count).",
    )
    copy_parallelism: int = Field(
        default=1,
        ge=0,
        le=32,
        description=(
            "Single-threaded copies of the new model a migration embeds with (count; 0: one "
            "per CPU). One leaves the other CPUs to the searches of the process that builds "
            "(the API, with the embedded store): with two on two CPUs, search p95 went up "
            "x1.4 to x1.8 while it copied (`benchmarks/migrate.py`)."
        ),
    )
    lease_s: float = Field(
        default=30.0,
        gt=0,
        description=(
            "How long a process building a generation holds it without renewing (s): after "
            "it crashes, another process resumes the build once this has passed."
        ),
    )

    @model_validator(mode="after")
    def _valid_outlasts_refresh(self) -> GenerationSettings:
        if self.valid_s < self.refresh_s:
            raise ValueError("generations.valid_s must be at least generations.refresh_s")
        return self

    @property
    def settle_s(self) -> float:
        """After a generation begins to be built, how long until every process writes to it
        too: a process's view is at most `valid_s` old, and a write begun with an older one
        ends within as long again."""
        return 2 * self.valid_s
