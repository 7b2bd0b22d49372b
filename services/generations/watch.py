"""Each process's view of the vector store's generations (`schemas.index_generations`).

A process reads the generations again, in the background, once its view is `refresh_s` old and
something needs it, so a migration's start, switch or cancel reaches every process within
about that. A write uses a view at most `valid_s` old (past that, it waits for MongoDB and
fails with `ServiceUnavailable` if it does not answer): a process never writes with an older
one, which is what lets a migration know when every process writes to the generation it builds
(`settle_s`). A search uses the last view, however old: while MongoDB does not answer, searches
go on against the live generation they know.

At start the first generation is recorded if there is none: the store the deployment had is
the configured model's. When the configured model differs from the live generation's, the
process says so (`mismatch`) and works with the live generation's model regardless: a model
changes only by a migration.
"""

from __future__ import annotations

import asyncio
import logging
import time

from core.errors import RetryableError, ServiceUnavailable
from infra.mongo.generation_repository import GenerationRepository
from infra.process.metrics import GENERATIONS
from schemas.index_generations import KEPT, Generations, ModelIdentity

log = logging.getLogger(__name__)


class GenerationWatch:
    """The generations as this process read them last."""

    def __init__(
        self,
        repository: GenerationRepository,
        configured: ModelIdentity,
        refresh_s: float,
        valid_s: float,
    ) -> None:
        self._repository = repository
        self._configured = configured
        self._refresh_s = refresh_s
        self._valid_s = valid_s
        self._view: Generations | None = None
        self._read_at = 0.0
        self._reading = asyncio.Lock()
        self._refreshing: asyncio.Task[None] | None = None

    async def start(self) -> Generations:
        """Reads the generations, recording the first (with the configured model) if there is
        none, and warns when the configured model is not the live generation's (once)."""
        if self._view is not None:
            return await self.current()
        view = await self._repository.adopt(self._configured)
        self._keep(view)
        message = self.mismatch
        if message:
            log.warning("%s", message)
        return view

    @property
    def started(self) -> bool:
        """Whether the generations were read once (`start`)."""
        return self._view is not None

    @property
    def configured(self) -> ModelIdentity:
        """The model the settings name."""
        return self._configured

    @property
    def mismatch(self) -> str | None:
        """What to tell an operator when the settings name another model than the live
        generation's (None when they agree)."""
        if self._view is None or self._view.live.model == self._configured:
            return None
        live = self._view.live
        return (
            f"the settings name the embedding model {self._configured.label}, but the vector "
            f"store's live generation {live.number} holds {live.model.label}: searching and "
            f"indexing with {live.model.label}. To change models, start a migration "
            "(`ragline generations migrate`, or POST /api/v1/generations)"
        )

    async def current(self) -> Generations:
        """The generations for a write: the last view while it is at most `valid_s` old
        (read again in the background once it is `refresh_s` old, so that nobody waits for
        MongoDB); past that, read now, and `ServiceUnavailable` if they cannot be. The first
        call starts the watch (`start`) if nothing did."""
        if self._view is None:
            return await self.start()
        age = self._age()
        if age > self._refresh_s:
            self._refresh_later()
        if age <= self._valid_s:
            return self._view
        return await self._read()

    async def latest(self) -> Generations:
        """The generations for a search: the last view, however old (read again in the
        background once it is `refresh_s` old). A search never waits for MongoDB here: it
        keeps answering from the live generation it knows, whose store outlasts a switch by
        the grace period."""
        if self._view is None:
            return await self.start()
        if self._age() > self._refresh_s:
            self._refresh_later()
        return self._view

    def _refresh_later(self) -> None:
        if self._refreshing is None or self._refreshing.done():
            self._refreshing = asyncio.create_task(self._refresh())

    async def _refresh(self) -> None:
        try:
            await self._read()
        except ServiceUnavailable as exc:
            log.warning("%s", exc)

    async def _read(self) -> Generations:
        async with self._reading:
            if self._view is not None and self._age() <= self._refresh_s:
                return self._view
            try:
                view = await self._repository.kept()
            except RetryableError as exc:
                raise ServiceUnavailable(
                    "mongodb", f"the vector store's generations cannot be read: {exc}"
                ) from exc
            if view is None:
                raise ServiceUnavailable("mongodb", "no generation of the vector store is live")
            self._keep(view)
            return view

    def _keep(self, view: Generations) -> None:
        previous = self._view
        self._view = view
        self._read_at = time.monotonic()
        for state in KEPT:
            GENERATIONS.labels(state.value).set(sum(g.state is state for g in view.kept))
        if previous is not None and previous.kept != view.kept:
            log.info(
                "vector store generations: %s",
                ", ".join(f"{g.number} {g.state.value} ({g.model.label})" for g in view.kept),
            )

    def _age(self) -> float:
        return time.monotonic() - self._read_at
