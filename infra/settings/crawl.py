"""Crawler settings."""

from __future__ import annotations

from pydantic import BaseModel, Field


class CrawlSettings(BaseModel):
    """The crawl worker (`python -m workers crawl`)."""

    user_agent: str = Field(
        default="RaglineCrawler/1.0",
        description="User-Agent header of the crawler, and the agent robots.txt rules apply to.",
    )
    max_pages: int = Field(
        default=200,
        ge=1,
        le=100_000,
        description="Pages of a crawl job when its request does not say (count).",
    )
    max_depth: int = Field(
        default=3,
        ge=0,
        le=20,
        description="Link depth of a crawl job when its request does not say (count).",
    )
    per_host_delay_s: float = Field(
        default=0.5,
        ge=0,
        description="Politeness: time between two requests to one host from one worker (s).",
    )
    fetch_timeout_s: float = Field(
        default=10.0, gt=0, description="Whole time one response may take (s)."
    )
    max_page_bytes: int = Field(
        default=2 * 1024 * 1024,
        ge=1024,
        description="Largest response body; a larger one is refused (bytes).",
    )
    max_redirects: int = Field(
        default=5, ge=0, le=20, description="Redirects followed for one URL (count)."
    )
    # Tests crawl a site on 127.0.0.1.
    allow_private_networks: bool = Field(
        default=False,
        description=(
            "Crawl loopback, private, link-local (cloud metadata) and other special addresses, "
            "which are refused otherwise."
        ),
    )
