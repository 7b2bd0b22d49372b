"""The HTTP app: admin API, internal search, health and metrics.

HTTP only: routes parse a request, call one service and shape the answer; typed errors become
HTTP statuses here, in one place. The services come from the composition root (`ragline.api`
runs this app with them).
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.routing import BaseRoute, Route

from api.audit_middleware import AuditMiddleware
from api.console import routes as console
from api.deadline import RETRY_AFTER_S, RequestDeadline
from api.limits import BodyLimit
from api.mcp import KnowledgeMcp
from api.routes import (
    audit,
    backups,
    crawl,
    dead_letters,
    documents,
    evaluations,
    generations,
    health,
    knowledge,
    knowledge_bases,
    people,
    playground,
    search,
    tokens,
)
from api.routes import bots as bot_routes
from api.state import ApiServices, OpenServices, Services
from api.text_bodies import TextOnlyJsonBodies
from core.errors import (
    Conflict,
    DocumentTooLarge,
    Forbidden,
    InvalidRequest,
    NotFound,
    PermanentError,
    RaglineError,
    RateLimited,
    RetryableError,
    Unauthorized,
    UnsupportedDocumentType,
)
from infra.mongo.audit_repository import AuditRepository
from infra.settings.api import ApiSettings
from schemas.api import ErrorBody, FieldProblem

log = logging.getLogger(__name__)

STATUS_BY_ERROR: tuple[tuple[type[RaglineError], int], ...] = (
    (NotFound, 404),
    (Unauthorized, 401),
    (Forbidden, 403),
    (Conflict, 409),
    (RateLimited, 429),
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
    if isinstance(exc, RateLimited):
        headers = {"Retry-After": str(exc.retry_after_s)}
    elif status == 503:
        headers = {"Retry-After": str(RETRY_AFTER_S)}
    if status >= 500:
        log.warning("request failed: %s", exc)
    return JSONResponse({"detail": _printable(str(exc))}, status_code=status, headers=headers)


async def _validation_error(_: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    problems = [
        FieldProblem(
            field=_printable(_field_of(error.get("loc", ()))),
            message=_printable(error.get("msg") or "invalid"),
        )
        for error in exc.errors()
    ]
    summary = "; ".join(f"{p.field}: {p.message}" for p in problems) or "invalid request"
    body = ErrorBody(detail=summary, errors=problems)
    return JSONResponse(body.model_dump(mode="json"), status_code=422)


def _printable(text: str) -> str:
    """`text` as an answer can carry it: a lone surrogate in a message (quoted from a
    request) becomes its escape rather than failing the answer's encoding."""
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def _field_of(location: tuple[int | str, ...] | list[int | str]) -> str:
    """Where an invalid value is: `records.0.content` in the body, `query.limit`, or `body`
    for the body as a whole."""
    parts = [str(part) for part in location]
    if parts[:1] == ["body"]:
        parts = parts[1:] or ["body"]
    return ".".join(parts) or "request"


# The API's routers, in the order the app tries them.
ROUTERS = (
    health,
    knowledge_bases,
    documents,
    evaluations,
    bot_routes,
    search,
    tokens,
    people,
    knowledge,
    audit,
    dead_letters,
    crawl,
    backups,
    generations,
    playground,
    console,
)


def api_routes() -> list[BaseRoute]:
    """Every route of the API's routers, with its whole path, in the order the app tries
    them."""
    return [route for module in ROUTERS for route in module.router.routes]


def create_app(open_services: OpenServices, settings: ApiSettings | None = None) -> FastAPI:
    """The API app over the services `open_services` opens for the app's lifetime, with the
    MCP server at `/mcp`."""
    settings = settings or ApiSettings()
    mcp = KnowledgeMcp(lambda: _services_of(app))
    mcp_app = mcp.app(
        issuer_url=f"http://{settings.host}:{settings.port}",
        allowed_hosts=settings.mcp_allowed_hosts,
    )

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        async with AsyncExitStack() as stack:
            app.state.services = await open_services(stack)
            await stack.enter_async_context(mcp.session_manager.run())
            yield
            app.state.services = None

    app = FastAPI(title="Ragline", version="0.1.0", lifespan=lifespan)
    app.add_exception_handler(RaglineError, _ragline_error)
    app.add_exception_handler(RequestValidationError, _validation_error)
    for module in ROUTERS:
        app.include_router(module.router)
    # The MCP app answers `/mcp` only: any other path is the API's (a JSON 404 or 405).
    app.router.routes.append(Route("/mcp", endpoint=mcp_app))
    app.add_middleware(AuditMiddleware, audit=lambda: _audit_of(app))
    app.add_middleware(TextOnlyJsonBodies)
    app.add_middleware(BodyLimit, max_bytes=settings.max_body_mb * 1024 * 1024)
    app.add_middleware(
        RequestDeadline,
        timeout_s=settings.request_timeout_s,
        bulk_timeout_s=settings.bulk_request_timeout_s,
        routes=api_routes(),
    )
    return app


def _services_of(app: FastAPI) -> Services | None:
    """The process's services once the lifespan has opened them."""
    opened: ApiServices | None = getattr(app.state, "services", None)
    return None if opened is None else opened.services


def _audit_of(app: FastAPI) -> AuditRepository | None:
    services = _services_of(app)
    return None if services is None else services.audit_repo
