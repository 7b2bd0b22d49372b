"""What keeps searches current, in one place: KB revisions, bots' access and tenants' KBs, held
in the memory of each process that searches, and the changes that retire them.

Three kinds of state can go out of date:
- answers, keyed by the revision of every KB they searched: every write that changes what a KB
  holds or shows raises the KB's revision in MongoDB, and the writer tells this component the
  new revision;
- bots' resolved access (their settings and attached, active KBs): out of date when the bot
  changes or when one of its KBs is enabled, disabled or deleted;
- a tenant's KBs as people's searches see them (which are active, their default retrieval).

Writers (the KB, bot and document services, the intake and the index stage) tell this
component; it announces the change to every process (`infra.search_cache.SearchCache.announce`:
a numbered message on a Redis channel). A process that searches listens from its first search
on and applies each change to what it holds. A search reads what it needs from memory, and
its one round trip to Redis (`SearchCache.probe`) brings the number of the last change
announced: if this process has not applied that change yet, the search waits for it (a moment:
it is already on its way) and, if anything changed meanwhile, looks again (`settle`). So a
deleted document, a disabled KB or a changed bot is seen by the very next search in every
process, however many there are. When changes cannot be followed (Redis down, a change missed,
the subscription lost), nothing held is trusted: it is dropped and read again from MongoDB
until the process listens again.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Generic, TypeVar

from infra.bot_repository import BotRepository
from infra.knowledge_base_repository import KnowledgeBaseRepository
from infra.metrics import SEARCH_INVALIDATIONS
from infra.search_cache import Change, Numbered, SearchCache
from schemas.domain import KnowledgeBase

log = logging.getLogger(__name__)
V = TypeVar("V")

# How long a search waits for this process to apply a change its probe saw announced.
SETTLE_TIMEOUT_S = 0.25


@dataclass(frozen=True)
class Held(Generic[V]):
    """A value held in memory, what it depends on, and until when it may be used."""

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
    ) -> None:
        self._cache = cache
        self._kbs = kbs
        self._bots = bots
        self._ttl_s = ttl_s
        self._access: dict[str, Held[object]] = {}
        self._tenant_kbs: dict[str, Held[object]] = {}
        self._revisions: dict[str, int] = {}
        # The number of the last change applied; None while this process does not listen.
        self._seq: int | None = None
        # Raised by every change applied and every reset: a search that saw another epoch when
        # it began planning plans again (`settle`).
        self._epoch = 0
        self._applied = asyncio.Condition()
        self._listener: asyncio.Task[None] | None = None

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
        """Stops listening."""
        if self._listener is not None:
            self._listener.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._listener
            self._listener = None

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

    # --- read by searches -------------------------------------------------------------------

    @property
    def epoch(self) -> int:
        """What a search notes when it begins planning (`settle`); starts listening."""
        self._listen()
        return self._epoch

    def access(self, bot_id: str) -> object | None:
        """A bot's resolved access held here, or None."""
        return self._held(self._access, bot_id)

    def remember_access(self, bot_id: str, access: object, kb_ids: set[str], since: int) -> None:
        """Holds a bot's access, resolved from MongoDB since `epoch` was `since` (dropped when
        the bot or one of `kb_ids` changes, or after the time to live)."""
        self._hold(self._access, bot_id, access, kb_ids, since)

    def tenant_kbs(self, tenant_id: str) -> object | None:
        """A tenant's KBs as people's searches see them, held here, or None."""
        return self._held(self._tenant_kbs, tenant_id)

    def remember_tenant_kbs(self, tenant_id: str, kbs: object, since: int) -> None:
        """Holds a tenant's KBs, read since `epoch` was `since` (dropped when one changes)."""
        self._hold(self._tenant_kbs, tenant_id, kbs, set(), since)

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
            await self.kbs_changed(known)
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

    def _held(self, table: dict[str, Held[object]], key: str) -> object | None:
        if self._seq is None:
            self._listen()
            return None
        held = table.get(key)
        if held is None or held.expires_at < time.monotonic():
            return None
        return held.value

    def _hold(
        self,
        table: dict[str, Held[object]],
        key: str,
        value: object,
        kb_ids: set[str],
        since: int,
    ) -> None:
        # Held only if nothing changed while it was read: it might be from before the change.
        if self._seq is None or self._epoch != since:
            return
        table[key] = Held(value, frozenset(kb_ids), time.monotonic() + self._ttl_s)

    def _listen(self) -> None:
        if self._listener is None or self._listener.done():
            self._listener = asyncio.get_running_loop().create_task(self._follow())

    async def _follow(self) -> None:
        try:
            async for numbered in self._cache.changes():
                async with self._applied:
                    self._apply(numbered)
                    self._applied.notify_all()
        finally:
            self._reset("stopped", listening=False)

    def _apply(self, numbered: Numbered) -> None:
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
        for bot_id in change.bots:
            self._access.pop(bot_id, None)
        if change.kb_access:
            for bot_id, held in list(self._access.items()):
                if held.kb_ids & change.kb_access:
                    del self._access[bot_id]
        for tenant_id in change.tenants:
            self._tenant_kbs.pop(tenant_id, None)

    def _reset(self, why: str, listening: bool = True) -> None:
        """Drops everything held (and, unless `listening`, stops trusting it until the next
        subscription)."""
        SEARCH_INVALIDATIONS.labels(f"reset_{why}").inc()
        self._access.clear()
        self._tenant_kbs.clear()
        self._revisions.clear()
        self._epoch += 1
        if not listening:
            self._seq = None
