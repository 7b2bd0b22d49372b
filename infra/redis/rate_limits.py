"""Rate limits in Redis: a fixed window per key (one INCR and EXPIRE per request), shared by
every API process. When Redis does not answer, requests are let through (counted in
`ragline_rate_limit_errors_total`): a cache outage must not stop searches."""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass

import redis.asyncio as redis
from redis.exceptions import RedisError

from infra.process.metrics import RATE_LIMIT_ERRORS, RATE_LIMITED

log = logging.getLogger(__name__)

PREFIX = "ragline:limit"


@dataclass(frozen=True)
class Window:
    """One key's counter in the current fixed window: its Redis key, how long the key lives,
    and when the window ends (epoch seconds)."""

    name: str
    ttl_s: int
    ends_at: float

    @classmethod
    def now(cls, prefix: str, kind: str, key: str, window_s: int) -> Window:
        """The current window of `kind` for `key`."""
        number = int(time.time() // window_s)
        return cls(f"{prefix}:{kind}:{key}:{number}", window_s + 1, (number + 1) * window_s)


def retry_after(kind: str, count: int, limit: int, window: Window) -> float:
    """0 if `count` is within `limit`, else the seconds until the window ends (counted)."""
    if count <= limit:
        return 0.0
    RATE_LIMITED.labels(kind).inc()
    return max(0.001, window.ends_at - time.time())


class RateLimiter:
    """Counts requests per key and window."""

    def __init__(self, client: redis.Redis, prefix: str = PREFIX) -> None:
        self._client = client
        self._prefix = prefix

    def window(self, kind: str, key: str, window_s: int) -> Window:
        """The current window of `kind` for `key` (for a caller counting in its own pipeline,
        as a search does: `infra.redis.search_cache.SearchCache.probe`)."""
        return Window.now(self._prefix, kind, key, window_s)

    async def hit(self, kind: str, key: str, limit: int, window_s: int, cost: int = 1) -> float:
        """Counts `cost` requests of `key`; returns 0 if within `limit` per `window_s`, else
        the seconds until the window ends (when to try again)."""
        window = self.window(kind, key, window_s)
        try:
            async with self._client.pipeline(transaction=True) as pipe:
                pipe.incrby(window.name, cost)
                pipe.expire(window.name, window.ttl_s)
                count, _ = await pipe.execute()
        except (RedisError, OSError) as exc:
            RATE_LIMIT_ERRORS.inc()
            log.warning("rate limit of %s not checked: %s", kind, exc)
            return 0.0
        return retry_after(kind, int(count), limit, window)
