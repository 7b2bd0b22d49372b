"""Runs a stage handler on one Kafka message: the one place that maps errors to actions
(retry with backoff, redeliver on an outage, fail the document with a reason, dead-letter),
under the stage's policy (`infra.settings.stages.StagePolicy`), touching the document while it
works. Why each error goes where it goes: docs/concepts/failures.md."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Generic, TypeVar

from pydantic import BaseModel, ValidationError

from core.errors import PermanentError, RetryableError, ServiceUnavailable
from core.periodic import Periodic
from infra.process.metrics import (
    DOCUMENTS_FAILED,
    DOCUMENTS_PROCESSED,
    STAGE_DURATION,
    STAGE_MESSAGES,
)
from infra.settings.ingest import IngestSettings
from infra.settings.stages import StagePolicy
from schemas.domain import STAGE_STATUS, Document, ParseStatus
from schemas.events import DeadLetter, Event, Publish
from workers.ports import DocumentStatus, StageResult

log = logging.getLogger(__name__)

E = TypeVar("E", bound=BaseModel)
DocumentEvent = TypeVar("DocumentEvent", bound=Event)


class StageTimedOut(PermanentError):
    """One try of a stage outlasted the stage's time limit."""


@dataclass(frozen=True)
class Stage(Generic[E]):
    """A pipeline stage: its name, its input event type, its handler and its policy."""

    name: str
    event_type: type[E]
    handler: Callable[[E], Awaitable[StageResult]]
    policy: StagePolicy
    # The stage only writes to Ragline's own services: a try past its time limit means one of
    # them is struggling (under load, MongoDB retries a conflicting transaction for up to
    # 120 s), not that the input is bad.
    slow_means_outage: bool = False
    # Undoes what the stage made visible of a document's run before the run is marked failed
    # (the index stage takes its points out of search).
    on_failure: Callable[[E], Awaitable[None]] | None = None


def document_stage(
    name: str,
    event_type: type[DocumentEvent],
    enters: ParseStatus,
    handler: Callable[[DocumentEvent, Document], Awaitable[StageResult]],
    documents: DocumentStatus,
    policy: StagePolicy,
    *,
    slow_means_outage: bool = False,
    on_failure: Callable[[DocumentEvent], Awaitable[None]] | None = None,
) -> Stage[DocumentEvent]:
    """A stage that works on a document: each message first moves the document to `enters`
    (or checks it is still there), and one whose document is gone, superseded or re-indexed
    since is skipped; the handler gets the current document."""

    async def handle(event: DocumentEvent) -> StageResult:
        return await _on_current_document(
            event, enters, documents, handler, first=event.opens_stage
        )

    return Stage(name, event_type, handle, policy, slow_means_outage, on_failure)


async def _on_current_document(
    event: DocumentEvent,
    enters: ParseStatus,
    documents: DocumentStatus,
    handler: Callable[[DocumentEvent, Document], Awaitable[StageResult]],
    *,
    first: bool,
) -> StageResult:
    """Runs the handler on the document as read (moved to `enters` first if `first`); skips a
    message whose document is gone, superseded or re-indexed since."""
    document = await documents.advance(
        event.document_id, event.generation, enters, first=first, stores=event.stored_on_entry
    )
    if document is None:
        return StageResult(skipped=True)
    return await handler(event, document)


def carried_stage(
    name: str,
    event_type: type[DocumentEvent],
    enters: ParseStatus,
    handler: Callable[[DocumentEvent, Document | None], Awaitable[StageResult]],
    documents: DocumentStatus,
    policy: StagePolicy,
) -> Stage[DocumentEvent]:
    """A `document_stage` whose handler needs nothing of the document that its opening
    message does not carry (`Event.carries_run`): that message moves the document into the
    stage in one write and reads nothing back, and the handler gets None. If the move does
    not happen (the message is a replay, or the run moved on) and for every other message,
    the document is read as in `document_stage`."""

    async def handle(event: DocumentEvent) -> StageResult:
        entering = event.carries_run and event.opens_stage
        if entering and await documents.enter(
            event.document_id, event.generation, enters, stores=event.stored_on_entry
        ):
            return await handler(event, None)
        # A move that missed cannot be made by trying again: the document is read (as for a
        # later batch's message), in one round trip.
        return await _on_current_document(
            event, enters, documents, handler, first=event.opens_stage and not entering
        )

    return Stage(name, event_type, handle, policy)


class StageRunner(Generic[E]):
    """Decodes, runs, retries and reports one stage's messages."""

    def __init__(
        self,
        stage: Stage[E],
        documents: DocumentStatus,
        publish: Publish,
        dead_letter: DeadLetter,
        backoff: IngestSettings,
    ) -> None:
        self._stage = stage
        self._documents = documents
        self._publish = publish
        self._dead_letter = dead_letter
        self._backoff_settings = backoff

    async def run(self, raw: bytes) -> None:
        """Handles one raw message to completion (or raises if nothing could be recorded)."""
        name = self._stage.name
        try:
            event = self._stage.event_type.model_validate_json(raw)
        except ValidationError as exc:
            log.error("%s: undecodable message sent to dead letters: %s", name, exc)
            await self._dead_letter(raw, {"stage": name, "error": f"invalid message: {exc}"})
            STAGE_MESSAGES.labels(name, "invalid").inc()
            return
        started = time.perf_counter()
        try:
            await self._run_with_retries(raw, event)
        finally:
            STAGE_DURATION.labels(name).observe(time.perf_counter() - started)

    async def _run_with_retries(self, raw: bytes, event: E) -> None:
        name = self._stage.name
        attempts = self._stage.policy.max_attempts
        subject = _subject(event)
        for attempt in range(1, attempts + 1):
            # The whole try counts as work on the document, publishing included (a producer
            # waiting for a broker that came back is not a stuck document).
            heartbeat = (
                Periodic(
                    f"{name}: noting progress",
                    self._backoff_settings.stall_after_s / 4,
                    lambda: self._heartbeat(event),
                )
                if isinstance(event, Event)
                else None
            )
            if heartbeat is not None:
                heartbeat.start()
            try:
                result = await self._within_time_limit(event)
                if result.publish:
                    await self._publish(result.publish)
                if result.after_publish is not None:
                    await result.after_publish()
            except RetryableError as exc:
                if attempt < attempts:
                    STAGE_MESSAGES.labels(name, "retried").inc()
                    delay = self._backoff(attempt)
                    log.warning(
                        "%s: %s for %s (attempt %d of %d), retrying in %.1f s",
                        name, exc, subject, attempt, attempts, delay,
                    )  # fmt: skip
                    await asyncio.sleep(delay)
                    await self._count_retry(event)
                    continue
                if isinstance(exc, ServiceUnavailable) and exc.platform:
                    STAGE_MESSAGES.labels(name, "redelivered").inc()
                    log.warning("%s: %s for %s; the message comes back later", name, exc, subject)
                    raise
                await self._fail(
                    raw, event, f"{name} failed after {attempts} attempts: {exc}", attempts
                )
                return
            except PermanentError as exc:
                await self._fail(raw, event, str(exc), attempt)
                return
            except Exception as exc:
                log.exception("%s: unexpected error on %s", name, subject)
                await self._fail(
                    raw,
                    event,
                    f"internal error in the {name} stage ({type(exc).__name__})",
                    attempt,
                )
                return
            finally:
                if heartbeat is not None:
                    await heartbeat.stop()
            outcome = "skipped" if result.skipped else "ok"
            STAGE_MESSAGES.labels(name, outcome).inc()
            if result.finished_document:
                DOCUMENTS_PROCESSED.labels(name).inc()
            return

    async def _within_time_limit(self, event: E) -> StageResult:
        limit = self._stage.policy.time_limit_s
        try:
            return await asyncio.wait_for(self._stage.handler(event), timeout=limit)
        except TimeoutError as exc:
            if self._stage.slow_means_outage:
                raise ServiceUnavailable(
                    "vector store",
                    f"one try of the {self._stage.name} stage took over {limit:g} s "
                    "(the vector store or MongoDB answers too slowly)",
                ) from exc
            raise StageTimedOut(
                f"the {self._stage.name} stage gave up after {limit:g} s (its time limit for one "
                "document); the file may be malformed or too complex to process"
            ) from exc

    async def _heartbeat(self, event: Event) -> None:
        """Touches the document while the stage works on it (a failed touch is only logged:
        the work goes on)."""
        try:
            await self._documents.touch(event.document_id, event.generation)
        except RetryableError as exc:
            log.warning("could not note progress on %s: %s", event.document_id, exc)

    async def _count_retry(self, event: E) -> None:
        status = STAGE_STATUS.get(self._stage.name)
        if isinstance(event, Event) and status is not None:
            await self._documents.count_retry(event.document_id, event.generation, status)

    async def _fail(self, raw: bytes, event: E, reason: str, attempts: int) -> None:
        """Dead-letters the message and, for a document's event, marks the document failed."""
        name = self._stage.name
        subject = _subject(event)
        log.warning("%s: %s failed: %s", name, subject, reason)
        headers = {"stage": name, "error": reason, "attempts": str(attempts)}
        if isinstance(event, Event):
            await self._undo(event)
            await self._documents.mark_failed(event.document_id, event.generation, reason)
            headers["document_id"] = event.document_id
            DOCUMENTS_FAILED.labels(name).inc()
        await self._dead_letter(raw, headers)
        STAGE_MESSAGES.labels(name, "failed").inc()

    async def _undo(self, event: E) -> None:
        """Runs the stage's `on_failure`. A service being away propagates (the message comes
        back, and the failure is recorded then); anything else is logged, and the failure
        recorded regardless."""
        if self._stage.on_failure is None:
            return
        try:
            await self._stage.on_failure(event)
        except RetryableError:
            raise
        except Exception:
            log.exception("%s: could not undo the work on %s", self._stage.name, _subject(event))

    def _backoff(self, attempt: int) -> float:
        settings = self._backoff_settings
        delay: float = settings.retry_backoff_s * (2 ** (attempt - 1))
        return min(delay, settings.retry_backoff_max_s)


def _subject(event: BaseModel) -> str:
    """What a log line is about: the document, or the message."""
    if isinstance(event, Event):
        return f"document {event.document_id}"
    return f"message {getattr(event, 'event_id', '?')}"
