"""Search's use of Redis: one pipelined round trip before an answer (`probe`: rate limit, cached
answer, cached query vector, last change's number), writes after it (`remember`), the
numbered change announcements every API process follows (`announce`, `changes`), and the
leases of the processes that answer from memory (`confirm`): an announcement returns once each
of them has applied it or its lease has run out. Redis accelerates and never gates: when it
fails, searches go on uncached."""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import TypeVar

import numpy as np
import redis.asyncio as redis
from numpy.typing import NDArray
from redis.exceptions import RedisError

from infra.process.drain import Drain
from infra.process.metrics import RATE_LIMIT_ERRORS, SEARCH_CACHE_ERRORS
from infra.redis.rate_limits import Window, retry_after
from infra.settings.redis import RedisSettings
from infra.settings.search import SearchSettings

log = logging.getLogger(__name__)
T = TypeVar("T")

PREFIX = "rl"
CHANGES = f"{PREFIX}:changes"
CHANGES_SEQ = f"{PREFIX}:changes:seq"
# Raises each KB's revision (never lowers it), numbers the change and publishes it, in one step:
# KEYS = the sequence, then the KBs' revision keys; ARGV = the channel, the change's JSON, then
# the revisions.
_ANNOUNCE = """
for i = 2, #KEYS do
  local current = tonumber(redis.call('GET', KEYS[i]) or '-1')
  if tonumber(ARGV[i + 1]) > current then redis.call('SET', KEYS[i], ARGV[i + 1]) end
end
local seq = redis.call('INCR', KEYS[1])
redis.call('PUBLISH', ARGV[1], seq .. ' ' .. ARGV[2])
return seq
"""
# The processes answering searches from memory: a set of their ids, and a key per process
# holding the number of the last change it applied, which lives as long as its lease.
FOLLOWERS = f"{PREFIX}:followers"
FOLLOWER = f"{PREFIX}:follower:"
# Renews a follower's lease, only while it has applied every change announced: KEYS = the
# sequence, its key, the followers' set; ARGV = the last change it applied, the lease (ms), its
# id. 1 if renewed.
_CONFIRM = """
if tonumber(ARGV[1]) < tonumber(redis.call('GET', KEYS[1]) or '0') then return 0 end
redis.call('SET', KEYS[2], ARGV[1], 'PX', ARGV[2])
redis.call('SADD', KEYS[3], ARGV[3])
return 1
"""
# How many followers hold a lease and have not applied change ARGV[1] (forgetting those whose
# lease ran out): KEYS = the followers' set; ARGV[2] = the prefix of their keys. The keys are
# named here, not in KEYS: Ragline's Redis is one server, not a cluster.
_BEHIND = """
local behind = 0
for _, id in ipairs(redis.call('SMEMBERS', KEYS[1])) do
  local applied = redis.call('GET', ARGV[2] .. id)
  if not applied then redis.call('SREM', KEYS[1], id)
  elseif tonumber(applied) < tonumber(ARGV[1]) then behind = behind + 1 end
end
return behind
"""
# How long an announcement waits for followers beyond their lease (clocks' drift).
_LEASE_SLACK = 1.1
# Subscribing again after Redis failed: at most this often.
_RESUBSCRIBE_S = 0.5


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


@dataclass
class Change:
    """What changed: KBs' new revisions, bots whose settings changed, KBs whose status changed
    (every bot attached to one resolves its access again), tenants whose KBs changed, tokens
    revoked, tenants whose audiences changed (their users' readers)."""

    kbs: dict[str, int] = field(default_factory=dict)
    bots: set[str] = field(default_factory=set)
    kb_access: set[str] = field(default_factory=set)
    tenants: set[str] = field(default_factory=set)
    tokens: set[str] = field(default_factory=set)
    people: set[str] = field(default_factory=set)

    def merge(self, other: Change) -> None:
        """Adds another change to this one (the higher revision of a KB wins)."""
        for kb_id, revision in other.kbs.items():
            self.kbs[kb_id] = max(revision, self.kbs.get(kb_id, revision))
        for name in _NAMES:
            getattr(self, name).update(getattr(other, name))

    def __bool__(self) -> bool:
        return bool(self.kbs) or any(getattr(self, name) for name in _NAMES)

    def to_json(self) -> str:
        """The change as it is published."""
        return json.dumps(
            {"kbs": self.kbs, **{name: sorted(getattr(self, name)) for name in _NAMES}}
        )

    @classmethod
    def from_json(cls, raw: str) -> Change:
        """A published change."""
        data = json.loads(raw)
        return cls(
            kbs={str(k): int(v) for k, v in data.get("kbs", {}).items()},
            **{name: set(data.get(name, [])) for name in _NAMES},
        )


# A change's sets of names, as they are published.
_NAMES = ("bots", "kb_access", "tenants", "tokens", "people")


@dataclass(frozen=True)
class Numbered:
    """A change as a listener receives it, with its number; `reset` marks a (re)subscription:
    changes before `seq` may have been missed; `lost`, a subscription lost: changes are not
    followed until the next reset."""

    seq: int
    change: Change
    reset: bool = False
    lost: bool = False


@dataclass(frozen=True)
class Probe:
    """What one round trip before an answer found (`ok` False: Redis did not answer, nothing
    is known)."""

    ok: bool
    # The number of the last change announced.
    seq: int | None = None
    # Over the search's rate: the seconds until it may search again (0: within it).
    retry_after_s: float = 0.0
    answer: bytes | None = None
    vector: NDArray[np.float32] | None = None


@dataclass(frozen=True)
class Limit:
    """A rate limit to count in a probe: the window's counter and the limit."""

    window: Window
    limit: int


@dataclass(frozen=True)
class Remembered:
    """What a search leaves for the next ones: its answer (None: not cacheable) and its query
    vector (None: it came from the cache)."""

    answer_key: str | None
    body: bytes
    found: bool
    model_id: str
    query: str
    vector: NDArray[np.float32] | None


class SearchCache:
    """Search's Redis: every call degrades to a miss when Redis fails."""

    def __init__(self, client: redis.Redis, settings: SearchSettings) -> None:
        self._client = client
        self._settings = settings
        self._skip_until = 0.0
        # When Redis stopped answering (monotonic), None while it answers.
        self._down_since: float | None = None
        self._pending = Change()
        self._announce = client.register_script(_ANNOUNCE)
        self._confirm = client.register_script(_CONFIRM)
        self._behind = client.register_script(_BEHIND)
        self._writes: Drain[Remembered] = Drain("search-cache-writes", self._write)

    @property
    def lease_s(self) -> float:
        """How long a follower's lease lasts once renewed."""
        return self._settings.follower_lease_s

    async def close(self) -> None:
        """Writes what is queued, then closes the connection pool."""
        await self._writes.close()
        await self._client.aclose()

    async def ping(self) -> bool:
        """Whether Redis answers (raises what the client raises: for readiness probes)."""
        return bool(await self._client.ping())

    # --- before an answer -------------------------------------------------------------------

    async def probe(
        self, answer_key: str | None, limit: Limit | None, model_id: str, query: str
    ) -> Probe:
        """One round trip: the last change's number, the rate-limit count (if any), the
        cached answer (if the search is cacheable) and the cached query vector."""
        if self._skipping("probe"):
            if limit is not None:
                RATE_LIMIT_ERRORS.inc()
            return Probe(ok=False)
        pipe = self._client.pipeline(transaction=False)
        pipe.get(CHANGES_SEQ)
        if limit is not None:
            pipe.incrby(limit.window.name, 1)
            pipe.expire(limit.window.name, limit.window.ttl_s)
        if answer_key is not None:
            pipe.get(answer_key)
        pipe.get(self._embedding(model_id, query))
        try:
            found = list(await pipe.execute())
        except (TimeoutError, RedisError, OSError) as exc:
            self._failed("probe", exc)
            if limit is not None:
                RATE_LIMIT_ERRORS.inc()
            return Probe(ok=False)
        self._down_since = None
        seq = int(found.pop(0) or 0)
        retry_after_s = 0.0
        if limit is not None:
            count, _ = found.pop(0), found.pop(0)
            retry_after_s = retry_after("search", int(count), limit.limit, limit.window)
        answer = found.pop(0) if answer_key is not None else None
        raw = found.pop(0)
        vector = np.frombuffer(raw, dtype="<f4").astype(np.float32) if raw else None
        await self._flush()
        return Probe(True, seq, retry_after_s, answer, vector)

    async def kb_revisions(self, kb_ids: list[str]) -> list[int | None] | None:
        """The cached revision of each KB (None where unknown); None if Redis is down."""
        if not kb_ids:
            return []
        keys = [self._revision(kb_id) for kb_id in kb_ids]
        values = await self._safely("kb_revisions", lambda: self._client.mget(keys))
        if values is None:
            return None
        return [None if value is None else int(value) for value in values]

    # --- after an answer --------------------------------------------------------------------

    def remember(self, remembered: Remembered) -> None:
        """Queues the answer and the query vector for caching (never waits)."""
        self._writes.put(remembered)

    async def written(self) -> None:
        """Returns once every write queued so far is done (for tests)."""
        await self._writes.idle()

    async def _write(self, batch: list[Remembered]) -> None:
        if self._skipping("remember"):
            return
        settings = self._settings
        pipe = self._client.pipeline(transaction=False)
        for item in batch:
            if item.answer_key is not None:
                ttl = settings.result_ttl_s if item.found else settings.empty_result_ttl_s
                pipe.set(item.answer_key, item.body, ex=ttl)
            if item.vector is not None:
                data = np.asarray(item.vector, dtype="<f4").tobytes()
                key = self._embedding(item.model_id, item.query)
                pipe.set(key, data, ex=settings.embedding_ttl_s)
        try:
            await pipe.execute()
        except (TimeoutError, RedisError, OSError) as exc:
            self._failed("remember", exc)

    # --- changes ----------------------------------------------------------------------------

    async def announce(self, change: Change, confirmed: bool = True) -> None:
        """Announces a change to every API process (raising the KBs' cached revisions); kept
        and announced later when Redis does not answer. With `confirmed`, returns once every
        process answering from memory has applied it or can no longer answer from memory: its
        lease ran out (when Redis does not answer, no lease outlives the first `lease_s` of the
        outage)."""
        self._pending.merge(change)
        seq = await self._flush()
        if confirmed:
            await (self._outlived() if seq is None else self._followed(seq))

    async def confirm(self, follower: str, applied: int) -> bool:
        """Renews a follower's lease (for `follower_lease_s`), if the last change it applied,
        `applied`, is the last change announced; whether it was renewed."""
        keys = [CHANGES_SEQ, FOLLOWER + follower, FOLLOWERS]
        lease_ms = int(self._settings.follower_lease_s * 1000)
        renewed = await self._safely(
            "confirm", lambda: self._confirm(keys=keys, args=[applied, lease_ms, follower])
        )
        return bool(renewed)

    async def leave(self, follower: str) -> None:
        """Ends a follower's lease (it no longer answers from memory)."""
        pipe = self._client.pipeline(transaction=False)
        pipe.delete(FOLLOWER + follower)
        pipe.srem(FOLLOWERS, follower)
        await self._safely("leave", pipe.execute)

    async def _followed(self, seq: int) -> None:
        """Returns once every follower has applied change `seq` or its lease ran out."""
        deadline = time.monotonic() + self._settings.follower_lease_s * _LEASE_SLACK
        pause = 0.0005
        while True:
            behind = await self._safely(
                "followers", lambda: self._behind(keys=[FOLLOWERS], args=[seq, FOLLOWER])
            )
            if behind is None:
                await self._outlived()
                return
            if not behind:
                return
            if time.monotonic() >= deadline:
                log.warning("%d processes did not apply change %d within their lease", behind, seq)
                return
            await asyncio.sleep(pause)
            pause = min(pause * 2, 0.02)

    async def _outlived(self) -> None:
        """Returns once the leases renewed before Redis stopped answering have run out."""
        if self._down_since is None:
            return
        lease = self._settings.follower_lease_s * _LEASE_SLACK
        await asyncio.sleep(max(0.0, self._down_since + lease - time.monotonic()))

    async def changes(self) -> AsyncIterator[Numbered]:
        """The changes announced from now on, in order, for as long as the caller reads: after
        each (re)subscription first a reset with the number of the last change announced
        before it; when the subscription is lost, a `lost` at once."""
        while True:
            pubsub = self._client.pubsub(ignore_subscribe_messages=True)
            try:
                await pubsub.subscribe(CHANGES)
                yield Numbered(int(await self._client.get(CHANGES_SEQ) or 0), Change(), True)
                while True:
                    message = await pubsub.get_message(timeout=None)
                    if message is None or message.get("type") != "message":
                        continue
                    seq, _, body = message["data"].decode().partition(" ")
                    yield Numbered(int(seq), Change.from_json(body))
            except (TimeoutError, RedisError, OSError) as exc:
                SEARCH_CACHE_ERRORS.labels("changes").inc()
                log.warning("search changes: subscription lost (%s); subscribing again", exc)
            finally:
                await pubsub.aclose()  # type: ignore[no-untyped-call] # redis-py leaves it untyped
            yield Numbered(0, Change(), lost=True)
            await asyncio.sleep(_RESUBSCRIBE_S)

    async def _flush(self) -> int | None:
        """Announces the changes that could not be announced before; the number of the last
        one announced (None if none was, or Redis did not answer)."""
        change = self._pending
        if not change:
            return None
        self._pending = Change()
        kbs = sorted(change.kbs.items())
        keys = [CHANGES_SEQ, *(self._revision(kb_id) for kb_id, _ in kbs)]
        args = [CHANGES, change.to_json(), *(str(revision) for _, revision in kbs)]
        seq = await self._safely("announce", lambda: self._announce(keys=keys, args=args))
        if seq is None:
            change.merge(self._pending)
            self._pending = change
            return None
        return int(seq)

    # --- plumbing ---------------------------------------------------------------------------

    def _skipping(self, operation: str) -> bool:
        if time.monotonic() < self._skip_until:
            SEARCH_CACHE_ERRORS.labels(operation).inc()
            return True
        return False

    def _failed(self, operation: str, exc: BaseException) -> None:
        SEARCH_CACHE_ERRORS.labels(operation).inc()
        if self._down_since is None:
            self._down_since = time.monotonic()
        self._skip_until = time.monotonic() + self._settings.cache_retry_after_s
        log.warning("search cache unavailable (%s): %s", operation, exc)

    async def _safely(self, operation: str, call: Callable[[], Awaitable[T]]) -> T | None:
        if self._skipping(operation):
            return None
        try:
            result = await call()
        except (TimeoutError, RedisError, OSError) as exc:
            self._failed(operation, exc)
            return None
        self._down_since = None
        if self._pending and operation != "announce":
            await self._flush()
        return result

    @staticmethod
    def _embedding(model_id: str, query: str) -> str:
        return f"{PREFIX}:qemb:{model_id}:{hashlib.sha256(query.encode()).hexdigest()}"

    @staticmethod
    def _revision(kb_id: str) -> str:
        return f"{PREFIX}:kbrev:{kb_id}"
