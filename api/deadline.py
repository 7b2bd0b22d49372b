"""Every HTTP request ends within its time budget: a hanging dependency gives a fast 503.

A server that hangs (frozen, or answering nothing) is worse than one that is down: a refused
connection fails at once, a silent one holds the request until some client gives up. So each
request runs under a deadline (`api.request_timeout_s`, 5 s by default; routes marked
`bulk_operation`, which write up to thousands of records or a whole file, have
`api.bulk_request_timeout_s`):

- every MongoDB operation the request makes is bounded by what is left of it (PyMongo's
  client-side operation timeout, `pymongo.timeout`), and in a bulk request each one also by
  the normal budget (`core.deadlines`), so a frozen database fails the operation soon,
  which the repositories turn into `ServiceUnavailable`, answered 503;
- anything else still running when the deadline passes is cancelled and answered 503 with
  `Retry-After`, unless the answer had already started (then the connection is closed).

`/mcp` is bounded the same way for its POSTs (the server is stateless with JSON answers, so
each POST is a whole JSON-RPC exchange, a tool call included); its other requests (a GET
opening a stream of server messages) are left alone.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from contextlib import nullcontext
from typing import Any, TypeVar

import pymongo
from starlette.responses import JSONResponse
from starlette.routing import BaseRoute, Match
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from core.deadlines import each_operation_within

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


def unavailable_answer(detail: str) -> JSONResponse:
    """A 503 with `Retry-After` and a JSON `detail` (the API's error shape)."""
    return JSONResponse(
        {"detail": detail}, status_code=503, headers={"Retry-After": str(RETRY_AFTER_S)}
    )


# The request methods that never get the bulk budget.
_READS = frozenset({"GET", "HEAD", "OPTIONS"})
# The bulk routes answering one request method, each with the routes before it that may too.
BulkRoutes = list[tuple[BaseRoute, list[BaseRoute]]]


def _answers(route: BaseRoute, method: str | None) -> bool:
    """Whether the route may answer the method (None: a method no route names)."""
    methods = getattr(route, "methods", None)
    return methods is None or (method is not None and method in methods)


def bulk_routes(routes: Sequence[BaseRoute], method: str | None) -> BulkRoutes:
    """The routes answering `method` that have the bulk budget, each with the routes the
    router tries before it, so that a request is matched against the few bulk routes (and,
    only when one matches, against those before it)."""
    answering = [route for route in routes if _answers(route, method)]
    return [
        (route, answering[:position])
        for position, route in enumerate(answering)
        if getattr(getattr(route, "endpoint", None), _BULK, False)
    ]


def bulk_table(routes: Sequence[BaseRoute]) -> dict[str | None, BulkRoutes]:
    """`bulk_routes` for every method the routes name (and None for any other)."""
    named: set[str] = set()
    for route in routes:
        named |= set(getattr(route, "methods", None) or ())
    return {method: bulk_routes(routes, method) for method in [*sorted(named - _READS), None]}


class RequestDeadline:
    """ASGI middleware: runs each HTTP request under its time budget (see the module)."""

    def __init__(
        self,
        app: ASGIApp,
        timeout_s: float,
        bulk_timeout_s: float,
        routes: Sequence[BaseRoute],
    ) -> None:
        """`routes`: every route the app answers, in the order its router tries them, each
        with its whole path. (FastAPI keeps an included router as one opaque entry of the
        app's routes, so they are given rather than read from the app.)"""
        self.app = app
        self.timeout_s = timeout_s
        self.bulk_timeout_s = bulk_timeout_s
        self._bulk = bulk_table(routes)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or (
            scope["path"].startswith("/mcp") and scope["method"] != "POST"
        ):
            await self.app(scope, receive, send)
            return
        budget = self.budget(scope)
        started = False

        async def send_tracked(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        # A bulk request's work may take its long budget, but no one database operation more
        # than the normal one: a database that does not answer fails it as soon as elsewhere.
        per_operation = (
            each_operation_within(self.timeout_s) if budget > self.timeout_s else nullcontext()
        )
        try:
            with pymongo.timeout(budget), per_operation:
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
            await unavailable_answer(detail)(scope, receive, send)

    def budget(self, scope: Scope) -> float:
        """The request's budget: the bulk one if the route the router will pick for it is a
        bulk route (s)."""
        return self.bulk_timeout_s if self._is_bulk(scope) else self.timeout_s

    def _is_bulk(self, scope: Scope) -> bool:
        if scope["method"] in _READS:
            return False
        method = scope["method"]
        for route, before in self._bulk[method if method in self._bulk else None]:
            if route.matches(scope)[0] == Match.FULL:
                return not any(other.matches(scope)[0] == Match.FULL for other in before)
        return False
