"""Liveness, readiness and Prometheus metrics."""

from __future__ import annotations

from fastapi import APIRouter, Request, Response
from fastapi.responses import JSONResponse, PlainTextResponse
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from schemas.api import Health, Readiness

router = APIRouter(tags=["operations"])

# What `/readyz` reports without being unready for it: search works without its cache (every
# request then goes to the stores), and with the live generation's embedding model when the
# settings name another (`embedding_model` then says so).
OPTIONAL = frozenset({"redis", "embedding_model"})


@router.get("/healthz")
async def healthz() -> Health:
    """The process is up."""
    return Health(status="ok")


@router.get(
    "/readyz",
    response_model=Readiness,
    responses={503: {"model": Readiness, "description": "starting, or a dependency is down"}},
)
async def readyz(request: Request) -> JSONResponse:
    """The process can serve: storage, queue, model and vector store answer (each is asked
    at once and given 2 s); `checks` names each dependency's state, Redis's too, and
    `embedding_model` says when the settings name another model than the vector store's live
    generation holds (the process serves with the live one's)."""
    services = getattr(request.app.state, "services", None)
    if services is None:
        return JSONResponse(Readiness(status="starting").model_dump(), status_code=503)
    checks = await services.readiness()
    ok = all(value == "ok" for name, value in checks.items() if name not in OPTIONAL)
    body = Readiness(status="ready" if ok else "not ready", checks=checks)
    return JSONResponse(body.model_dump(), status_code=200 if ok else 503)


@router.get(
    "/metrics",
    response_class=PlainTextResponse,
    responses={200: {"content": {"text/plain": {"schema": {"type": "string"}}}}},
)
async def metrics() -> Response:
    """Prometheus exposition of this process's metrics."""
    return Response(generate_latest(), media_type=CONTENT_TYPE_LATEST)
