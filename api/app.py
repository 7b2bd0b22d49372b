"""The HTTP app: admin API, internal search, health and metrics.

With the embedded vector store (the local default) this process owns the store, so it also runs
the index stage's Kafka consumer; with a Qdrant server the index stage is its own worker.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from datetime import timedelta

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse

from api.routes import bots as bot_routes
from api.routes import documents, evaluations, health, knowledge_bases, search, tokens
from api.state import Services
from core.errors import (
    Conflict,
    DocumentTooLarge,
    Forbidden,
    InvalidRequest,
    NotFound,
    PermanentError,
    RaglineError,
    RetryableError,
    Unauthorized,
    UnsupportedDocumentType,
)
from core.filters import chunks_where
from infra.blob_store import BlobStore
from infra.bots import BotRepository
from infra.documents import DocumentRepository
from infra.embedding.factory import build_embedder
from infra.evaluations import EvaluationRepository
from infra.kafka import build_broker, ensure_topics
from infra.knowledge_bases import KnowledgeBaseRepository
from infra.lifecycle import DocumentLifecycle
from infra.logs import configure_logging
from infra.metrics import DOCUMENTS_STALLED
from infra.mongo import connect, ensure_indexes
from infra.search_cache import SearchCache, connect_redis
from infra.settings import Settings
from infra.sparse import SparseEncoder
from infra.tokens import TokenRepository
from infra.vectorstore.factory import open_vector_store
from schemas.domain import utcnow
from schemas.events import ChunkBatchEmbedded
from schemas.topics import ALL_TOPICS
from services.evaluation import Evaluations, Evaluator
from services.intake import Intake, Removal
from services.search.access import AccessGuard
from services.search.retrieval import Retriever
from services.search.service import SearchService
from workers.index.handler import IndexHandler
from workers.wiring import RunnerSlot, build_runner, kafka_publisher, subscribe_stage

log = logging.getLogger(__name__)

STATUS_BY_ERROR: tuple[tuple[type[RaglineError], int], ...] = (
    (NotFound, 404),
    (Unauthorized, 401),
    (Forbidden, 403),
    (Conflict, 409),
    (DocumentTooLarge, 413),
    (UnsupportedDocumentType, 415),
    (InvalidRequest, 422),
    (PermanentError, 422),
    (RetryableError, 503),
)


def _status_of(exc: RaglineError) -> int:
    for error_type, status in STATUS_BY_ERROR:
        if isinstance(exc, error_type):
            return status
    return 500


async def _ragline_error(_: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RaglineError)
    status = _status_of(exc)
    headers = {"WWW-Authenticate": "Bearer"} if status == 401 else None
    if status >= 500:
        log.warning("request failed: %s", exc)
    return JSONResponse({"detail": str(exc)}, status_code=status, headers=headers)


async def _validation_error(_: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    problems = []
    for error in exc.errors():
        location = ".".join(str(part) for part in error.get("loc", ()) if part != "body")
        problems.append({"field": location, "message": error.get("msg", "invalid")})
    summary = "; ".join(f"{p['field']}: {p['message']}" for p in problems)
    return JSONResponse({"detail": summary, "errors": problems}, status_code=422)


def create_app(settings: Settings) -> FastAPI:
    """The API app for these settings."""
    configure_logging(settings.log_level)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        async with AsyncExitStack() as stack:
            app.state.services = await _start(settings, app, stack)
            log.info("API ready on http://%s:%d", settings.api.host, settings.api.port)
            yield
            app.state.services = None

    app = FastAPI(title="Ragline", version="0.1.0", lifespan=lifespan)
    app.add_exception_handler(RaglineError, _ragline_error)
    app.add_exception_handler(RequestValidationError, _validation_error)
    for module in (health, knowledge_bases, documents, evaluations, bot_routes, search, tokens):
        app.include_router(module.router)
    return app


async def _start(settings: Settings, app: FastAPI, stack: AsyncExitStack) -> Services:
    if settings.kafka.create_topics:
        await ensure_topics(settings.kafka, ALL_TOPICS)
    client = connect(settings.mongo)
    stack.push_async_callback(client.close)
    db = client[settings.mongo.database]
    await ensure_indexes(db)
    cache = SearchCache(connect_redis(settings.redis), settings.search)
    stack.push_async_callback(cache.close)
    kbs = KnowledgeBaseRepository(db, cache)
    documents_repo = DocumentRepository(db, settings.ingest.parse_error_max_chars)
    blobs = BlobStore(db)
    embedder = await asyncio.to_thread(build_embedder, settings.embedding)
    if embedder.dimensions != settings.embedding.dimensions:
        raise PermanentError(
            f"the embedding model makes {embedder.dimensions}-dimensional vectors; set "
            f"RAGLINE_EMBEDDING__DIMENSIONS={embedder.dimensions}"
        )
    store = await open_vector_store(settings)
    stack.push_async_callback(store.close)

    lifecycle = DocumentLifecycle(client, db, cache)
    broker = build_broker(settings.kafka, "ragline-api")
    if settings.embedded_vector_store:
        slot = RunnerSlot()
        subscribe_stage(broker, settings, "index", slot)
        handler = IndexHandler(documents_repo, lifecycle, store, blobs)
        slot.runner = build_runner(
            broker, settings, "index", ChunkBatchEmbedded, handler, documents_repo
        )
    await broker.start()
    stack.push_async_callback(broker.stop)

    bots = BotRepository(db)
    guard = AccessGuard(bots, kbs, cache)
    search_service = SearchService(
        guard,
        kbs,
        Retriever(embedder, store, cache, SparseEncoder(), settings.search.depth),
        cache,
        settings.search,
    )
    services = Services(
        settings=settings,
        tokens=TokenRepository(
            db, settings.admin_token.get_secret_value(), settings.bootstrap_tenant
        ),
        kbs=kbs,
        documents=documents_repo,
        blobs=blobs,
        intake=Intake(documents_repo, kbs, lifecycle, blobs, kafka_publisher(broker)),
        removal=Removal(documents_repo, kbs, lifecycle, blobs, store),
        bots=bots,
        guard=guard,
        search=search_service,
        evaluations=Evaluations(
            kbs, documents_repo, Evaluator(search_service), EvaluationRepository(db)
        ),
        store=store,
    )
    stalled = asyncio.create_task(_report_stalled(documents_repo, settings.ingest.stall_after_s))
    stack.callback(stalled.cancel)

    async def readiness() -> dict[str, str]:
        checks: dict[str, str] = {}
        checks["mongodb"] = await _probe(lambda: client.admin.command("ping"))
        checks["kafka"] = await _probe(lambda: broker.ping(timeout=1.0))
        checks["vector_store"] = await _probe(
            lambda: store.count(chunks_where(settings.bootstrap_tenant, kb_id="__readiness__"))
        )
        return checks

    app.state.readiness = readiness
    return services


async def _report_stalled(documents: DocumentRepository, stall_after_s: float) -> None:
    """Keeps `ragline_documents_stalled` current: documents in progress that stopped moving."""
    period = min(30.0, max(1.0, stall_after_s / 4))
    while True:
        try:
            before = utcnow() - timedelta(seconds=stall_after_s)
            DOCUMENTS_STALLED.set(await documents.count_stalled(before))
        except RetryableError as exc:
            log.warning("cannot count stalled documents: %s", exc)
        await asyncio.sleep(period)


async def _probe(check: Callable[[], Awaitable[object]]) -> str:
    try:
        result = await asyncio.wait_for(check(), timeout=2.0)
    except Exception as exc:
        return f"error: {type(exc).__name__}: {exc}"[:200]
    if result is False:
        return "error: no answer"
    return "ok"
