"""Crawl jobs over a KB's pages and files, and the messages of the crawl worker."""

from __future__ import annotations

import uuid
from datetime import datetime
from enum import StrEnum
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

# Patterns of `include` / `exclude`: shell-style globs on a URL's path (`/docs/*`).
Pattern = str


class CrawlState(StrEnum):
    """Where a crawl job is: created → queued → started → completed | failed (or cancelled)."""

    CREATED = "created"
    QUEUED = "queued"
    STARTED = "started"
    COMPLETED = "completed"
    FAILED = "failed"
    CANCELLED = "cancelled"


ACTIVE_STATES = frozenset({CrawlState.CREATED, CrawlState.QUEUED, CrawlState.STARTED})


class CrawlCounts(BaseModel):
    """What a crawl did so far."""

    # URLs taken into the crawl (pages and files within scope and limits).
    seen: int = 0
    # Fetched with new or changed content (handed to ingestion).
    fetched: int = 0
    # Fetched unchanged (304, or the same content).
    unchanged: int = 0
    # Not fetched: an error, a refusal (robots, scope, a private address, too large).
    failed: int = 0
    # Documents of earlier crawls removed because their page is gone or out of scope.
    removed: int = 0


class CrawlUrlError(BaseModel):
    """Why one URL was not taken."""

    url: str
    reason: str
    # A transient failure (timeout, 5xx): the page's earlier version is kept.
    transient: bool = False


class CrawlJob(BaseModel):
    """A crawl of a KB's pages and files."""

    id: str
    tenant_id: str
    kb_id: str
    state: CrawlState
    urls: list[str]
    file_urls: list[str]
    max_pages: int
    max_depth: int
    include: list[Pattern]
    exclude: list[Pattern]
    counts: CrawlCounts = Field(default_factory=CrawlCounts)
    errors: list[CrawlUrlError] = Field(default_factory=list)
    # Messages taken in and finished: the job completes when they meet.
    enqueued: int = 0
    done: int = 0
    created_at: datetime
    queued_at: datetime | None = None
    started_at: datetime | None = None
    finished_at: datetime | None = None
    error: str | None = None


def new_crawl_job_id() -> str:
    """A fresh crawl job id."""
    return f"crawl_{uuid.uuid4().hex[:16]}"


class CrawlTask(BaseModel):
    """One URL of a crawl job for the crawl worker (topic `crawl.pages.v1`)."""

    model_config = ConfigDict(frozen=True)

    job_id: str
    tenant_id: str
    kb_id: str
    url: str
    depth: int = Field(ge=0)
    # A page (HTML, links followed), a file (PDF, DOCX, …), a site's robots.txt or sitemap.
    kind: Literal["page", "file", "robots", "sitemap"]

    @property
    def key(self) -> bytes:
        """Tasks of one URL stay in order."""
        return self.url.encode()
