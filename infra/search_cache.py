"""The search caches in Redis, in three layers, and the KB revisions their keys carry.

- access: a bot's resolved access (its settings and its attached, active KBs), 60 s;
- query embeddings, 24 h;
- whole answers, 30 min (2 min when they found nothing), keyed by the revision of every KB they
  searched, so any upload, delete, edit or disable is visible to the next search.

KB revisions live in MongoDB; every writer that bumps one also raises its copy here (only ever
upwards, so two writers cannot move it back). Redis is an accelerator, never a dependency: when
it fails, searches go on uncached (`ragline_search_cache_errors_total` counts it), the cache is
skipped for a moment instead of being waited on, and revision bumps and invalidations that
could not be written are retried once it answers again.
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
from collections.abc import Awaitable, Callable, Iterable
from typing import Any, TypeVar

import numpy as np
import redis.asyncio as redis
from numpy.typing import NDArray
from redis.exceptions import RedisError

from infra.metrics import SEARCH_CACHE_ERRORS
from infra.settings import RedisSettings, SearchSettings

log = logging.getLogger(__name__)
T = TypeVar("T")

PREFIX = "rl"
# Sets a revision only if it is higher than the one stored.
_RAISE_REVISION = """
local current = tonumber(redis.call('GET', KEYS[1]) or '-1')
if tonumber(ARGV[1]) > current then redis.call('SET', KEYS[1], ARGV[1]) end
return 1
"""


def connect_redis(settings: RedisSettings) -> redis.Redis:
    """A client with short timeouts: a slow cache is skipped, not waited for."""
    return redis.Redis.from_url(
        settings.url,
        socket_timeout=settings.timeout_s,
        socket_connect_timeout=settings.timeout_s,
        retry_on_timeout=False,
        health_check_interval=0,
    )


def result_key(parts: Iterable[object]) -> str:
    """The cache key of an answer: a hash of everything that decides it."""
    digest = hashlib.sha256(json.dumps(list(parts), default=str).encode()).hexdigest()
    return f"{PREFIX}:res:{digest}"


class SearchCache:
    """Reads and writes the caches; every call degrades to a miss when Redis fails."""

    def __init__(self, client: redis.Redis, settings: SearchSettings) -> None:
        self._client = client
        self._settings = settings
        self._skip_until = 0.0
        self._pending_revisions: dict[str, int] = {}
        self._pending_drops: set[str] = set()
        self._raise_revision = client.register_script(_RAISE_REVISION)

    async def close(self) -> None:
        """Closes the connection pool."""
        await self._client.aclose()

    async def ping(self) -> bool:
        """Whether Redis answers (raises what the client raises: for readiness probes)."""
        return bool(await self._client.ping())

    # --- access -----------------------------------------------------------------------------

    async def get_access(self, bot_id: str) -> dict[str, Any] | None:
        """A bot's cached access, or None."""
        raw = await self._safely("get_access", lambda: self._client.get(self._access(bot_id)))
        return None if raw is None else dict(json.loads(raw))

    async def set_access(self, bot_id: str, access: dict[str, Any]) -> None:
        """Caches a bot's access for `access_ttl_s`."""
        await self._safely(
            "set_access",
            lambda: self._client.set(
                self._access(bot_id), json.dumps(access), ex=self._settings.access_ttl_s
            ),
        )

    async def drop_access(self, bot_ids: Iterable[str]) -> None:
        """Forgets bots' access (their settings or their KBs changed)."""
        keys = [self._access(bot_id) for bot_id in bot_ids]
        if not keys:
            return
        done = await self._safely("drop_access", lambda: self._client.delete(*keys))
        if done is None:
            self._pending_drops.update(keys)

    # --- query embeddings -------------------------------------------------------------------

    async def get_embedding(self, model_id: str, query: str) -> NDArray[np.float32] | None:
        """A cached query vector, or None."""
        raw = await self._safely(
            "get_embedding", lambda: self._client.get(self._embedding(model_id, query))
        )
        if not isinstance(raw, bytes):
            return None
        return np.frombuffer(raw, dtype="<f4").astype(np.float32)

    async def set_embedding(self, model_id: str, query: str, vector: NDArray[np.float32]) -> None:
        """Caches a query vector for `embedding_ttl_s`."""
        data = np.asarray(vector, dtype="<f4").tobytes()
        await self._safely(
            "set_embedding",
            lambda: self._client.set(
                self._embedding(model_id, query), data, ex=self._settings.embedding_ttl_s
            ),
        )

    # --- answers ----------------------------------------------------------------------------

    async def get_result(self, key: str) -> bytes | None:
        """A cached answer, or None."""
        raw = await self._safely("get_result", lambda: self._client.get(key))
        return raw if isinstance(raw, bytes) else None

    async def set_result(self, key: str, body: bytes, *, found: bool) -> None:
        """Caches an answer: longer when it found something."""
        ttl = self._settings.result_ttl_s if found else self._settings.empty_result_ttl_s
        await self._safely("set_result", lambda: self._client.set(key, body, ex=ttl))

    # --- KB revisions -----------------------------------------------------------------------

    async def kb_revisions(self, kb_ids: list[str]) -> list[int | None] | None:
        """The cached revision of each KB (None where unknown); None if Redis is down."""
        if not kb_ids:
            return []
        keys = [self._revision(kb_id) for kb_id in kb_ids]
        values = await self._safely("kb_revisions", lambda: self._client.mget(keys))
        if values is None:
            return None
        return [None if value is None else int(value) for value in values]

    async def kb_changed(self, kb_id: str, revision: int) -> None:
        """Raises a KB's cached revision (never lowers it)."""
        self._pending_revisions[kb_id] = max(revision, self._pending_revisions.get(kb_id, 0))
        await self._flush()

    # --- plumbing ---------------------------------------------------------------------------

    async def _flush(self) -> None:
        """Writes revision raises and invalidations that could not be written before."""
        for kb_id, revision in list(self._pending_revisions.items()):
            done = await self._safely("kb_changed", self._raiser(kb_id, revision))
            if done is None:
                return
            if self._pending_revisions.get(kb_id) == revision:
                del self._pending_revisions[kb_id]
        if self._pending_drops:
            keys = list(self._pending_drops)
            if await self._safely("drop_access", lambda: self._client.delete(*keys)) is not None:
                self._pending_drops.difference_update(keys)

    async def _safely(self, operation: str, call: Callable[[], Awaitable[T]]) -> T | None:
        if time.monotonic() < self._skip_until:
            SEARCH_CACHE_ERRORS.labels(operation).inc()
            return None
        try:
            result = await call()
        except (TimeoutError, RedisError, OSError) as exc:
            SEARCH_CACHE_ERRORS.labels(operation).inc()
            self._skip_until = time.monotonic() + self._settings.cache_retry_after_s
            log.warning("search cache unavailable (%s): %s", operation, exc)
            return None
        if (self._pending_revisions or self._pending_drops) and operation not in (
            "kb_changed",
            "drop_access",
        ):
            await self._flush()
        return result

    def _raiser(self, kb_id: str, revision: int) -> Callable[[], Awaitable[Any]]:
        async def call() -> Any:
            return await self._raise_revision(keys=[self._revision(kb_id)], args=[revision])

        return call

    @staticmethod
    def _access(bot_id: str) -> str:
        return f"{PREFIX}:access:{bot_id}"

    @staticmethod
    def _embedding(model_id: str, query: str) -> str:
        return f"{PREFIX}:qemb:{model_id}:{hashlib.sha256(query.encode()).hexdigest()}"

    @staticmethod
    def _revision(kb_id: str) -> str:
        return f"{PREFIX}:kbrev:{kb_id}"
