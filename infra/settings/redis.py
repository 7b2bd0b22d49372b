"""Redis settings: the search caches and rate limits."""

from __future__ import annotations

from pydantic import BaseModel, Field


class RedisSettings(BaseModel):
    """Redis connection used by the search caches."""

    url: str = Field(
        default="redis://127.0.0.1:6379/0", description="Redis URL of the search caches."
    )
    # Short: a cache that does not answer at once is skipped, not waited for.
    timeout_s: float = Field(
        default=0.2, gt=0, description="Connect and socket timeout of Redis calls (s)."
    )
