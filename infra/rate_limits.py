"""Rate limits in Redis: a fixed window per key (one INCR and EXPIRE per request), shared by
every API process. When Redis does not answer, requests are let through (counted in
`ragline_rate_limit_errors_total`): a cache outage must not stop searches."""

from __future__ import annotations

import logging
import time

import redis.asyncio as redis
from redis.exceptions import RedisError

from infra.metrics import RATE_LIMIT_ERRORS, RATE_LIMITED

log = logging.getLogger(__name__)


class RateLimiter:
    """Counts requests per key and window."""

    def __init__(self, client: redis.Redis, prefix: str = "ragline:limit") -> None:
        self._client = client
        self._prefix = prefix

    async def hit(self, kind: str, key: str, limit: int, window_s: int, cost: int = 1) -> float:
        """Counts `cost` requests of `key`; returns 0 if within `limit` per `window_s`, else
        the seconds until the window ends (when to try again)."""
        now = time.time()
        window = int(now // window_s)
        name = f"{self._prefix}:{kind}:{key}:{window}"
        try:
            async with self._client.pipeline(transaction=True) as pipe:
                pipe.incrby(name, cost)
                pipe.expire(name, window_s + 1)
                count, _ = await pipe.execute()
        except (RedisError, OSError) as exc:
            RATE_LIMIT_ERRORS.inc()
            log.warning("rate limit of %s not checked: %s", kind, exc)
            return 0.0
        if int(count) <= limit:
            return 0.0
        RATE_LIMITED.labels(kind).inc()
        return max(0.001, (window + 1) * window_s - now)
