"""Every HTTP request ends within its time budget: a hanging dependency gives a fast 503.

A server that hangs (frozen, or answering nothing) is worse than one that is down: a refused
connection fails at once, a silent one holds the request until some client gives up. So each
request runs under a deadline (`api.request_timeout_s`, 5 s by default; routes marked
`bulk_operation`, which write up to thousands of records or a whole file, have
`api.bulk_request_timeout_s`):

- every MongoDB operation the request makes is bounded by what is left of it (PyMongo's
  client-side operation timeout, `pymongo.timeout`), so a frozen database fails the
  operation, which the repositories turn into `ServiceUnavailable`, answered 503;
- anything else still running when the deadline passes is cancelled and answered 503 with
  `Retry-After`, unless the answer had already started (then the connection is closed).

`/mcp` is left alone: its streams stay open for as long as a client keeps a session.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable
from typing import Any, TypeVar

import pymongo
from starlette.routing import Match
from starlette.types import ASGIApp, Message, Receive, Scope, Send

log = logging.getLogger(__name__)

# Seconds a client is told to wait before asking again after a 503 for a dependency.
RETRY_AFTER_S = 5
# Past the deadline, the moment the request is cancelled: the database operations' own
# bound (the deadline itself) ends them first, with the answer naming the database.
_GRACE_S = 0.5
_BULK = "__ragline_bulk_operation__"

F = TypeVar("F", bound=Callable[..., Any])


def bulk_operation(endpoint: F) -> F:
    """Marks a route whose work grows with its input (a file, a batch of records): it gets
    `api.bulk_request_timeout_s` instead of `api.request_timeout_s`."""
    setattr(endpoint, _BULK, True)
    return endpoint


def unavailable_answer(detail: str) -> tuple[Message, Message]:
    """The two ASGI messages of a 503 with `Retry-After` and a JSON `detail`."""
    body = json.dumps({"detail": detail}).encode()
    start: Message = {
        "type": "http.response.start",
        "status": 503,
        "headers": [
            (b"content-type", b"application/json"),
            (b"content-length", str(len(body)).encode()),
            (b"retry-after", str(RETRY_AFTER_S).encode()),
        ],
    }
    return start, {"type": "http.response.body", "body": body}


class RequestDeadline:
    """ASGI middleware: runs each HTTP request under its time budget (see the module)."""

    def __init__(self, app: ASGIApp, timeout_s: float, bulk_timeout_s: float) -> None:
        self.app = app
        self.timeout_s = timeout_s
        self.bulk_timeout_s = bulk_timeout_s

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"].startswith("/mcp"):
            await self.app(scope, receive, send)
            return
        budget = self.bulk_timeout_s if self._is_bulk(scope) else self.timeout_s
        started = False

        async def send_tracked(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            with pymongo.timeout(budget):
                async with asyncio.timeout(budget + _GRACE_S):
                    await self.app(scope, receive, send_tracked)
        except TimeoutError:
            what = f"{scope['method']} {scope['path']}"
            if started:
                log.warning("%s went on past its %g s budget and was cut short", what, budget)
                return
            log.warning("%s took longer than %g s: answered 503", what, budget)
            detail = (
                f"the request took longer than {budget:g} s (a service Ragline depends on is "
                f"not answering); try again in {RETRY_AFTER_S} s"
            )
            for message in unavailable_answer(detail):
                await send(message)

    def _is_bulk(self, scope: Scope) -> bool:
        if scope["method"] in ("GET", "HEAD", "OPTIONS"):
            return False
        app = scope.get("app")
        router = getattr(app, "router", None)
        for route in getattr(router, "routes", ()):
            match, _ = route.matches(scope)
            if match == Match.FULL:
                return bool(getattr(getattr(route, "endpoint", None), _BULK, False))
        return False
