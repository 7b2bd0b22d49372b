"""What keeps searches current, in one place: KB revisions, bots' access, tenants' KBs, tokens,
readers and hot answers, held in the memory of each process that searches, and the changes,
announced through Redis, that retire them, so the very next search in every process sees a
change. A process answers from memory only while it holds a lease, renewed in Redis while it has
applied every change announced; an announcement waits until each lease holder has applied it
or its lease ran out. How: docs/concepts/search.md."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Generic, TypeVar

from cachetools import LRUCache

from core.errors import Unauthorized
from infra.mongo.bot_repository import BotRepository
from infra.mongo.knowledge_base_repository import KnowledgeBaseRepository
from infra.process.metrics import SEARCH_ANSWERS_HELD, SEARCH_INVALIDATIONS
from infra.redis.search_cache import Change, Numbered, SearchCache
from schemas.domain import KnowledgeBase, Principal

log = logging.getLogger(__name__)
V = TypeVar("V")

# How long a search waits for this process to apply a change its probe saw announced.
SETTLE_TIMEOUT_S = 0.25


class Kind(StrEnum):
    """What is held in memory, each in a table of its own."""

    # A bot's resolved access, by bot id.
    ACCESS = "access"
    # A tenant's KBs as people's searches see them, by tenant id.
    TENANT_KBS = "tenant_kbs"
    # Who a token stands for, by the token's hash.
    PRINCIPAL = "principal"
    # A user as a reader (with their audiences), by `reader_key`.
    READER = "reader"


def reader_key(tenant_id: str, user_id: str) -> str:
    """A user's key among the readers held."""
    return f"{tenant_id}\x1f{user_id}"


@dataclass(frozen=True)
class Held(Generic[V]):
    """A value held in memory, the KBs it depends on, and until when it may be used."""

    value: V
    kb_ids: frozenset[str]
    expires_at: float


class FreshnessService:
    """Owns KB revisions, bots' access and tenants' KBs as searches see them."""

    def __init__(
        self,
        cache: SearchCache,
        kbs: KnowledgeBaseRepository,
        bots: BotRepository,
        ttl_s: float = 60.0,
        answer_bytes: int = 0,
    ) -> None:
        """`answer_bytes`: the most answers held in memory may take (0: none are held, and
        this process takes no lease)."""
        self._cache = cache
        self._kbs = kbs
        self._bots = bots
        self._ttl_s = ttl_s
        self._held: dict[Kind, dict[str, Held[object]]] = {kind: {} for kind in Kind}
        # Tokens revoked lately (until a principal held for them elsewhere would have expired).
        self._revoked: dict[str, float] = {}
        self._revisions: dict[str, int] = {}
        # The number of the last change applied; None while this process does not listen.
        self._seq: int | None = None
        # Raised by every change applied and every reset: a search that saw another epoch when
        # it began planning plans again (`settle`).
        self._epoch = 0
        self._applied = asyncio.Condition()
        self._listener: asyncio.Task[None] | None = None
        # Answers by their cache key (exact: the key names every KB's revision), and this
        # process's lease on answering from them: its id and until when it holds (monotonic).
        self._answers: LRUCache[str, bytes] | None = (
            LRUCache(maxsize=answer_bytes, getsizeof=len) if answer_bytes else None
        )
        self._follower = secrets.token_hex(8)
        self._lease_until = 0.0
        self._renewer: asyncio.Task[None] | None = None

    async def start(self, timeout_s: float = 2.0) -> bool:
        """Starts listening and waits (up to `timeout_s`) until this process follows changes:
        its searches then read what it holds. Whether it does."""
        self._listen()
        try:
            async with asyncio.timeout(timeout_s), self._applied:
                await self._applied.wait_for(lambda: self._seq is not None)
        except TimeoutError:
            return False
        return True

    async def close(self) -> None:
        """Stops listening (and ends this process's lease)."""
        for task in (self._listener, self._renewer):
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        self._listener = self._renewer = None
        # (The listener's end has already dropped the lease here; Redis still holds it.)
        if self._answers is not None:
            await self._cache.leave(self._follower)

    # --- told by writers --------------------------------------------------------------------

    async def kbs_changed(self, revisions: Mapping[str, int]) -> None:
        """These KBs now have these revisions: answers cached for older ones are out of date."""
        if revisions:
            await self._cache.announce(Change(kbs=dict(revisions)))

    async def kb_changed(self, kb: KnowledgeBase, *, access: bool = False) -> None:
        """A KB was edited; with `access`, enabled, disabled or deleted, so every bot it is
        attached to resolves its access again."""
        change = Change(kbs={kb.id: kb.revision}, tenants={kb.tenant_id})
        if access:
            change.kb_access.add(kb.id)
        await self._cache.announce(change)

    async def bot_changed(self, bot_id: str) -> None:
        """A bot was edited or deleted: its resolved access is out of date."""
        await self._cache.announce(Change(bots={bot_id}))

    async def token_revoked(self, token_id: str) -> None:
        """A token was revoked: this process refuses it from now on, the others once the change
        reaches them (returns once every process answering from memory has it)."""
        self._epoch += 1  # a lookup of the token under way holds nothing it read before
        self._forget_tokens({token_id})
        await self._cache.announce(Change(tokens={token_id}))

    async def people_changed(self, tenant_id: str) -> None:
        """An audience of the tenant changed: its users' readers are out of date."""
        await self._cache.announce(Change(people={tenant_id}))

    # --- read by searches and by requests' authentication -----------------------------------

    def answer(self, key: str, since: int) -> bytes | None:
        """The answer held under cache key `key`, if this process may answer from memory: it
        holds its lease and nothing changed since `epoch` was `since`."""
        if self._answers is None or not self._current(since):
            return None
        return self._answers.get(key)

    def keep_answer(self, key: str, body: bytes) -> None:
        """Holds an answer under its cache key (the least recently used leave first)."""
        answers = self._answers
        if answers is not None and len(body) <= answers.maxsize:
            answers[key] = body
            SEARCH_ANSWERS_HELD.set(answers.currsize)

    @property
    def epoch(self) -> int:
        """What a search notes when it begins planning (`settle`); starts listening."""
        self._listen()
        return self._epoch

    def held(self, kind: Kind, key: str) -> object | None:
        """What is held of that kind under that key, or None."""
        if self._seq is None:
            self._listen()
            return None
        held = self._held[kind].get(key)
        if held is None or held.expires_at < time.monotonic():
            return None
        return held.value

    def hold(
        self,
        kind: Kind,
        key: str,
        value: object,
        since: int,
        kb_ids: Iterable[str] = (),
        until: float | None = None,
    ) -> None:
        """Holds a value read from MongoDB since `epoch` was `since`, until a change retires
        it (one of `kb_ids` among them), its time to live passes, or `until` (monotonic)."""
        # Held only if nothing changed while it was read: it might be from before the change.
        if self._seq is None or self._epoch != since:
            return
        expires_at = time.monotonic() + self._ttl_s
        if until is not None:
            expires_at = min(expires_at, until)
        self._held[kind][key] = Held(value, frozenset(kb_ids), expires_at)

    def check_token(self, principal: Principal) -> None:
        """Refuses a principal whose token this process has seen revoked (a search checks it
        again once it has caught up with the changes: it may have been authenticated before)."""
        if principal.token_id in self._revoked:
            raise Unauthorized("the token was revoked")

    async def revisions(self, kb_ids: list[str], since: int) -> list[int] | None:
        """The current revision of each KB (-1 for one that does not exist), for an answer's
        cache key; None when Redis is unavailable (the answer is then not cached)."""
        held = self._revisions if self._seq is not None else {}
        missing = [kb_id for kb_id in kb_ids if kb_id not in held]
        if not missing:
            return [held[kb_id] for kb_id in kb_ids]
        cached = await self._cache.kb_revisions(missing)
        if cached is None:
            return None
        found = {kb_id: rev for kb_id, rev in zip(missing, cached, strict=True) if rev is not None}
        unknown = [kb_id for kb_id in missing if kb_id not in found]
        if unknown:
            known = await self._kbs.revisions(unknown)
            # Not a change (the revisions were only unknown to Redis): nobody is waited for.
            await self._cache.announce(Change(kbs=dict(known)), confirmed=False)
            found |= {kb_id: known.get(kb_id, -1) for kb_id in unknown}
        if self._seq is not None and self._epoch == since:
            for kb_id, revision in found.items():
                self._revisions[kb_id] = max(revision, self._revisions.get(kb_id, revision))
        return [held.get(kb_id, found.get(kb_id, -1)) for kb_id in kb_ids]

    async def settle(self, seq: int | None, since: int) -> bool:
        """Whether what a search read here since `epoch` was `since` is still current, now that
        its probe saw change `seq` announced (None: Redis did not answer). Waits a moment for
        this process to apply that change; when it cannot, drops everything held."""
        if seq is None:
            if self._seq is not None:
                # Changes cannot be followed: nothing held is trusted until the listener has
                # subscribed again (it starts over with the next search).
                self._reset("unreachable", listening=False)
                if self._listener is not None:
                    self._listener.cancel()
            return self._epoch == since
        if self._seq is None:
            return self._epoch == since
        if self._seq < seq:
            try:
                async with asyncio.timeout(SETTLE_TIMEOUT_S), self._applied:
                    await self._applied.wait_for(lambda: self._seq is None or self._seq >= seq)
            except TimeoutError:
                log.warning("change %d not received within %.2f s", seq, SETTLE_TIMEOUT_S)
                self._reset("late")
        return self._epoch == since

    # --- plumbing ---------------------------------------------------------------------------

    def _current(self, since: int) -> bool:
        """Whether this process holds its lease and nothing changed since `since`."""
        return (
            self._seq is not None and self._epoch == since and time.monotonic() < self._lease_until
        )

    def _listen(self) -> None:
        loop = asyncio.get_running_loop()
        if self._listener is None or self._listener.done():
            self._listener = loop.create_task(self._follow())
        if self._answers is not None and (self._renewer is None or self._renewer.done()):
            self._renewer = loop.create_task(self._renew())

    async def _follow(self) -> None:
        try:
            async for numbered in self._cache.changes():
                async with self._applied:
                    self._apply(numbered)
                    self._applied.notify_all()
                await self._confirm()
        finally:
            self._reset("stopped", listening=False)

    async def _renew(self) -> None:
        """Renews the lease a few times within its length, for as long as the process runs."""
        while True:
            await self._confirm()
            await asyncio.sleep(self._cache.lease_s / 4)

    async def _confirm(self) -> None:
        """Renews the lease if this process has applied every change announced."""
        seq = self._seq
        if seq is None or self._answers is None:
            return
        began = time.monotonic()
        if await self._cache.confirm(self._follower, seq) and self._seq is not None:
            # Redis keeps the lease from when the renewal reached it; here it ends earlier.
            self._lease_until = max(self._lease_until, began + self._cache.lease_s * 0.9)

    def _apply(self, numbered: Numbered) -> None:
        if numbered.lost:
            self._reset("lost", listening=False)
            return
        if numbered.reset:
            self._reset("subscribed")
            self._seq = numbered.seq
            return
        if self._seq is None or numbered.seq <= self._seq:
            return
        if numbered.seq > self._seq + 1:
            self._reset("missed")
            self._seq = numbered.seq
            return
        self._seq = numbered.seq
        self._epoch += 1
        change = numbered.change
        SEARCH_INVALIDATIONS.labels("change").inc()
        for kb_id, revision in change.kbs.items():
            self._revisions[kb_id] = max(revision, self._revisions.get(kb_id, revision))
        access = self._held[Kind.ACCESS]
        for bot_id in change.bots:
            access.pop(bot_id, None)
        if change.kb_access:
            for bot_id, held in list(access.items()):
                if held.kb_ids & change.kb_access:
                    del access[bot_id]
        for tenant_id in change.tenants:
            self._held[Kind.TENANT_KBS].pop(tenant_id, None)
        if change.tokens:
            self._forget_tokens(change.tokens)
        if change.people:
            readers = self._held[Kind.READER]
            for key in [key for key in readers if key.split("\x1f", 1)[0] in change.people]:
                del readers[key]

    def _forget_tokens(self, tokens: set[str]) -> None:
        """Refuses the tokens from now on (`check_token`) and drops their held principals."""
        now = time.monotonic()
        self._revoked = {t: at for t, at in self._revoked.items() if at > now}
        self._revoked.update(dict.fromkeys(tokens, now + self._ttl_s))
        principals = self._held[Kind.PRINCIPAL]
        for digest, held in list(principals.items()):
            if getattr(held.value, "token_id", None) in tokens:
                del principals[digest]

    def _reset(self, why: str, listening: bool = True) -> None:
        """Drops everything held (and, unless `listening`, stops trusting it until the next
        subscription)."""
        SEARCH_INVALIDATIONS.labels(f"reset_{why}").inc()
        for table in self._held.values():
            table.clear()
        self._lease_until = 0.0
        if self._answers is not None:
            self._answers.clear()
            SEARCH_ANSWERS_HELD.set(0)
        self._revisions.clear()
        self._epoch += 1
        if not listening:
            self._seq = None
