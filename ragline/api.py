"""The API process: `python -m ragline.api`.

Opens the system, serves the HTTP app (`api.app`) with its services and keeps the stalled-
documents gauge current. With the embedded vector store (the local default) this process owns
the store, so it also runs the index stage's Kafka consumer; with a Qdrant server the index
stage is its own worker (`python -m workers index`).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from contextlib import AsyncExitStack
from datetime import timedelta

import pymongo
import uvicorn
from fastapi import FastAPI

from api.app import create_app
from api.state import ApiServices
from core.errors import RetryableError
from core.filters import chunks_where
from core.periodic import Periodic
from infra.kafka.client import build_broker
from infra.mongo.document_repository import DocumentRepository
from infra.process.collector import freeze_startup
from infra.process.logs import configure_logging
from infra.process.metrics import CALLERS_LEARNT, DOCUMENTS_STALLED
from infra.settings import Settings
from ragline.process import open_process
from ragline.system import System
from schemas.domain import utcnow
from services.removal_service import RemovalService
from services.search.callers import learn_callers
from workers.hosting import host_stage
from workers.index.app import INDEX_IN_API

log = logging.getLogger(__name__)

# How long `/readyz` waits for any one dependency (they are asked at once).
PROBE_TIMEOUT_S = 2.0
# How often retired documents' deletes are finished.
SWEEP_EVERY_S = 1.0


async def open_api_services(settings: Settings, stack: AsyncExitStack) -> ApiServices:
    """Everything the HTTP app calls, for as long as `stack` is open."""
    broker = build_broker(settings.kafka, "ragline-api")
    system = await open_process(settings, "api", stack, broker, metrics_server=False)
    await system.open_embedder()
    store = await system.open_vector_store()
    backfilled = await system.governance_service.backfill()
    if backfilled:
        log.info("gave %d documents stored before governance their readers", backfilled)
    if settings.embedded_vector_store:
        await host_stage(system, INDEX_IN_API, stack)
    await broker.start()
    stack.push_async_callback(broker.stop)
    # Searches read bots' access and KB revisions from memory once this process follows the
    # changes to them (without Redis it does not: they are read from MongoDB).
    if not await system.freshness_service.start():
        log.warning("not following search changes yet (Redis): searches read MongoDB")
    elif settings.api.learn_callers:
        learning = asyncio.create_task(_learn_callers(system, settings.api.learn_callers))
        stack.callback(learning.cancel)

    stall_after_s = settings.ingest.stall_after_s
    await stack.enter_async_context(
        Periodic(
            "counting stalled documents",
            min(30.0, max(1.0, stall_after_s / 4)),
            lambda: _report_stalled(system.document_repo, stall_after_s),
            at_once=True,
        )
    )
    # Searches read the generations from memory (`GenerationWatch.latest`): kept fresh here
    # even while none come, so that the first search after a quiet spell does not go to a
    # generation switched away from (or dropped) meanwhile.
    await stack.enter_async_context(
        Periodic(
            "following the vector store's generations",
            settings.generations.refresh_s,
            system.generation_watch.latest,
        )
    )
    await stack.enter_async_context(
        Periodic(
            "finishing deletes",
            SWEEP_EVERY_S,
            lambda: _sweep_deletes(system.removal_service),
            at_once=True,
        )
    )

    async def readiness() -> dict[str, str]:
        # All at once, so that the answer comes within one probe's bound however many hang.
        probes: dict[str, Callable[[], Awaitable[object]]] = {
            "mongodb": lambda: system.mongo.admin.command("ping"),
            "kafka": lambda: broker.ping(timeout=1.0),
            "vector_store": lambda: store.count(
                chunks_where(settings.bootstrap_tenant, kb_id="__readiness__")
            ),
            "redis": system.search_cache.ping,
        }
        states = await asyncio.gather(*(_probe(check) for check in probes.values()))
        checks = dict(zip(probes, states, strict=True))
        # Said, not unready: the process serves with the live generation's model. (Asking
        # for the generations has them read again in the background once they are old.)
        await system.generation_watch.latest()
        checks["embedding_model"] = system.generation_watch.mismatch or "ok"
        return checks

    log.info("API ready on http://%s:%d", settings.api.host, settings.api.port)
    # Started: what was made so far lives as long as the process, out of the collector's walks.
    frozen = freeze_startup()
    log.info("froze %d objects made while starting out of the garbage collector's walks", frozen)
    return ApiServices(system, settings, readiness)


def build_app(settings: Settings) -> FastAPI:
    """The API app of this process."""
    configure_logging(settings.log_level)
    return create_app(lambda stack: open_api_services(settings, stack), settings.api)


async def _learn_callers(system: System, limit: int) -> None:
    """Learns the callers of the newest tokens and bots (`services.search.callers`), in the
    background: requests are answered meanwhile, reading what they need as usual."""
    try:
        learnt = await learn_callers(
            system.token_service,
            system.bot_repo,
            system.access_guard,
            system.policy_service,
            system.search_service,
            limit,
        )
    except RetryableError as exc:
        log.warning("could not learn the callers of the newest tokens: %s", exc)
        return
    CALLERS_LEARNT.set(learnt)
    log.info("learnt %d callers (tokens and bots)", learnt)


async def _report_stalled(documents: DocumentRepository, stall_after_s: float) -> None:
    """Keeps `ragline_documents_stalled` current: documents in progress that stopped moving."""
    try:
        before = utcnow() - timedelta(seconds=stall_after_s)
        DOCUMENTS_STALLED.set(await documents.count_stalled(before))
    except RetryableError as exc:
        log.warning("cannot count stalled documents: %s", exc)


async def _sweep_deletes(removal: RemovalService) -> None:
    """Finishes the deletes of retired documents (closed syncs, interrupted deletes) and takes
    the runs the reconciler failed out of search."""
    try:
        await removal.sweep()
        await removal.withdraw_failed_runs()
    except RetryableError as exc:
        log.warning("cannot finish deletes: %s", exc)


async def _probe(check: Callable[[], Awaitable[object]]) -> str:
    try:
        with pymongo.timeout(PROBE_TIMEOUT_S):
            result = await asyncio.wait_for(check(), timeout=PROBE_TIMEOUT_S)
    except TimeoutError:
        return f"error: no answer within {PROBE_TIMEOUT_S:g} s"
    except Exception as exc:
        return f"error: {type(exc).__name__}: {exc}"[:200]
    if result is False:
        return "error: no answer"
    return "ok"


def main() -> None:
    """Builds the settings and serves the app until SIGINT or SIGTERM."""
    settings = Settings()
    uvicorn.run(
        build_app(settings),
        host=settings.api.host,
        port=settings.api.port,
        log_level=settings.log_level.lower(),
        access_log=False,
        timeout_keep_alive=settings.api.keep_alive_s,
        timeout_graceful_shutdown=10,
    )


if __name__ == "__main__":
    main()
