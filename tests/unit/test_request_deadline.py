"""A request that outlives its budget is answered 503 with `Retry-After` (api.deadline)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator

import httpx
from fastapi import APIRouter, FastAPI
from fastapi.routing import APIRoute
from pymongo import _csot
from starlette.responses import StreamingResponse
from starlette.types import Message, Receive, Scope, Send

from api.app import api_routes
from api.deadline import RETRY_AFTER_S, RequestDeadline, bulk_operation
from infra.mongo.client import mongo_errors

BUDGET_S = 0.3
BULK_BUDGET_S = 3.0
never = asyncio.Event()


def app_with_deadline() -> FastAPI:
    app = FastAPI()
    seen: dict[str, float | None] = {}

    @app.get("/hang")
    async def hang() -> dict[str, str]:
        await never.wait()
        return {}

    @app.get("/quick")
    async def quick() -> dict[str, str]:
        return {"answer": "at once"}

    # In a router of their own, included as the API includes its routers.
    bulk_router = APIRouter(prefix="/bulk")

    @bulk_router.post("/first")
    async def first() -> dict[str, float | None]:
        return {"remaining": _remaining()}

    @bulk_router.post("/{name}")
    @bulk_operation
    async def bulk(name: str) -> dict[str, float | None]:
        seen["remaining"] = _remaining()
        await asyncio.sleep(BUDGET_S * 2)
        return {"remaining": seen["remaining"]}

    @bulk_router.post("/{name}/operation")
    @bulk_operation
    async def bulk_operation_bound(name: str) -> dict[str, float | None]:
        async with mongo_errors():
            inside = _remaining()
        return {"request": _remaining(), "operation": inside}

    app.include_router(bulk_router)

    @app.post("/plain")
    async def plain() -> dict[str, float | None]:
        return {"remaining": _remaining()}

    @app.get("/stream")
    async def stream() -> StreamingResponse:
        async def parts() -> AsyncIterator[bytes]:
            yield b"first part"
            await never.wait()

        return StreamingResponse(parts())

    @app.get("/mcp")
    async def mcp_stream() -> dict[str, str]:
        await asyncio.sleep(BUDGET_S * 5)  # past the budget and its grace
        return {"session": "kept"}

    @app.post("/mcp")
    async def mcp_call() -> dict[str, str]:
        await asyncio.sleep(BUDGET_S * 5)
        return {"result": "late"}

    routes = [*(r for r in app.router.routes if isinstance(r, APIRoute)), *bulk_router.routes]
    app.add_middleware(
        RequestDeadline, timeout_s=BUDGET_S, bulk_timeout_s=BULK_BUDGET_S, routes=routes
    )
    return app


def _remaining() -> float | None:
    """What PyMongo gives each operation of the request now (its client-side timeout)."""
    return _csot.remaining()


def client() -> httpx.AsyncClient:
    return httpx.AsyncClient(
        transport=httpx.ASGITransport(app_with_deadline()), base_url="http://t"
    )


async def test_a_request_past_its_budget_is_answered_503_with_retry_after() -> None:
    async with client() as http:
        started = time.monotonic()
        answer = await http.get("/hang")
        took = time.monotonic() - started
    assert answer.status_code == 503
    assert answer.headers["retry-after"] == str(RETRY_AFTER_S)
    assert answer.headers["content-type"] == "application/json"
    assert "longer than 0.3 s" in answer.json()["detail"]
    assert took < BUDGET_S + 2.0


async def test_a_quick_request_is_untouched() -> None:
    async with client() as http:
        answer = await http.get("/quick")
    assert answer.status_code == 200
    assert answer.json() == {"answer": "at once"}


async def test_database_operations_get_what_is_left_of_the_budget() -> None:
    async with client() as http:
        plain = (await http.post("/plain")).json()["remaining"]
        bulk = (await http.post("/bulk/records")).json()["remaining"]
    assert plain is not None
    assert 0 < plain <= BUDGET_S
    # A bulk operation has the longer budget: it outlived the ordinary one and still answered.
    assert bulk is not None
    assert BUDGET_S < bulk <= BULK_BUDGET_S


async def test_a_route_the_router_tries_first_keeps_its_own_budget() -> None:
    async with client() as http:
        # `/bulk/first` also fits `/bulk/{name}`, but is declared before it: the router picks
        # it, and it is not a bulk route.
        first = (await http.post("/bulk/first")).json()["remaining"]
        again = (await http.post("/bulk/second")).json()["remaining"]
        plain = (await http.post("/plain")).json()["remaining"]
    assert first is not None
    assert 0 < first <= BUDGET_S
    assert again is not None
    assert BUDGET_S < again <= BULK_BUDGET_S
    assert plain is not None
    assert 0 < plain <= BUDGET_S


async def test_each_database_operation_of_a_bulk_request_gets_the_normal_budget() -> None:
    async with client() as http:
        remaining = (await http.post("/bulk/second/operation")).json()
    assert BUDGET_S < remaining["request"] <= BULK_BUDGET_S
    assert 0 < remaining["operation"] <= BUDGET_S


async def test_an_answer_already_started_is_cut_short_not_answered_twice() -> None:
    sent: list[Message] = []

    async def send(message: Message) -> None:
        sent.append(message)

    bodies = [{"type": "http.request", "body": b"", "more_body": False}]

    async def receive() -> Message:
        if bodies:
            return bodies.pop()
        await never.wait()  # as a server does: the next message is the client leaving
        return {"type": "http.disconnect"}

    app = app_with_deadline()
    scope = {
        "type": "http", "method": "GET", "path": "/stream", "raw_path": b"/stream",
        "query_string": b"", "headers": [], "app": app, "root_path": "",
        "server": ("t", 80), "scheme": "http", "http_version": "1.1", "client": ("c", 1),
    }  # fmt: skip
    await app(scope, receive, send)
    assert [m["type"] for m in sent] == ["http.response.start", "http.response.body"]
    assert sent[0]["status"] == 200
    # The body never ends: the server closes the connection, and the client sees it cut.
    assert sent[1]["more_body"] is True


async def test_an_mcp_call_is_bounded_and_its_stream_keeps_its_own_time() -> None:
    async with client() as http:
        stream = await http.get("/mcp")
        call = await http.post("/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "tools/call"})
    assert stream.status_code == 200
    assert call.status_code == 503
    assert call.headers["retry-after"] == "5"


def _scope(method: str, path: str) -> dict[str, object]:
    return {"type": "http", "method": method, "path": path, "root_path": "", "headers": []}


def test_the_apis_own_bulk_routes_get_the_bulk_budget() -> None:
    """The API's routes as it includes them: uploads, record batches and a change of model get
    the bulk budget; a search, a listing and a new token do not."""
    deadline = RequestDeadline(
        quick, timeout_s=BUDGET_S, bulk_timeout_s=BULK_BUDGET_S, routes=api_routes()
    )
    for method, path in [
        ("POST", "/api/v1/knowledge-bases/kb_1/documents"),
        ("POST", "/api/v1/knowledge-bases/kb_1/documents/batch"),
        ("POST", "/api/v1/generations"),
    ]:
        assert deadline.budget(_scope(method, path)) == BULK_BUDGET_S, (method, path)
    for method, path in [
        ("POST", "/api/v1/search"),
        ("GET", "/api/v1/knowledge-bases/kb_1/documents"),
        ("POST", "/api/v1/tokens"),
        ("POST", "/api/v1/generations/2/cancel"),
    ]:
        assert deadline.budget(_scope(method, path)) == BUDGET_S, (method, path)


async def quick(scope: Scope, receive: Receive, send: Send) -> None:
    """An app that answers nothing (the middleware's budget is what is asked)."""
