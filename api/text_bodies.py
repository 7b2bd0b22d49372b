"""Refuses a JSON request body whose strings are not text, before any handler sees it.

JSON may spell a UTF-16 surrogate on its own (`"\\udacf"`); decoded, that is a string no
store can write (MongoDB's BSON and Redis want UTF-8) and no answer can echo. Rather than
have each of the API's request models check every string, this middleware reads a JSON body
once and answers 422 naming the field, as validation errors are answered. Only bodies that
hold such an escape at all are decoded twice; every other request passes with its body as
it came.
"""

from __future__ import annotations

import json
import re
from typing import Any

from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from core.urls import is_text, quoted

# A \uD800-\uDFFF escape: only bodies holding one can decode to a lone surrogate.
_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")


def lone_surrogate_field(body: bytes) -> tuple[str, str] | None:
    """Where the JSON `body` holds a string with a lone surrogate (`records.0.title`, or
    `body`) and that string quoted, or None (also for a body that is no JSON: the request's
    own validation says so)."""
    if not _SURROGATE_ESCAPE.search(body):
        return None
    try:
        value = json.loads(body)
    except ValueError:
        return None
    return _find(value, [])


def _find(value: Any, path: list[str]) -> tuple[str, str] | None:
    if isinstance(value, str):
        return None if is_text(value) else (".".join(path) or "body", quoted(value))
    if isinstance(value, dict):
        for key, item in value.items():
            if not is_text(key):
                return (".".join(path) or "body", quoted(key))
            found = _find(item, [*path, key])
            if found:
                return found
    if isinstance(value, list):
        for index, item in enumerate(value):
            found = _find(item, [*path, str(index)])
            if found:
                return found
    return None


class TextOnlyJsonBodies:
    """ASGI middleware: a JSON body with a lone surrogate is answered 422."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not _is_json(scope):
            await self.app(scope, receive, send)
            return
        chunks: list[bytes] = []
        while True:
            message = await receive()
            if message["type"] != "http.request":  # the client went away
                await self.app(scope, _replay([message], receive), send)
                return
            chunks.append(message.get("body", b""))
            if not message.get("more_body", False):
                break
        body = b"".join(chunks)
        found = lone_surrogate_field(body)
        if found is not None:
            field, value = found
            message_text = f"{field}: {value} holds characters that are not text (a lone surrogate)"
            problem = {"field": field, "message": message_text}
            answer = JSONResponse({"detail": message_text, "errors": [problem]}, status_code=422)
            await answer(scope, receive, send)
            return
        whole: Message = {"type": "http.request", "body": body, "more_body": False}
        await self.app(scope, _replay([whole], receive), send)


def _is_json(scope: Scope) -> bool:
    """Whether the body is read as JSON: so declared, or (as the API reads it) undeclared."""
    for name, value in scope.get("headers", ()):
        if name == b"content-type":
            kind = bytes(value).split(b";", 1)[0].strip().lower()
            return kind == b"application/json" or kind.endswith(b"+json")
    return True


def _replay(messages: list[Message], receive: Receive) -> Receive:
    """A `receive` that gives `messages` first, then what the client sends next."""
    pending = list(messages)

    async def replayed() -> Message:
        if pending:
            return pending.pop(0)
        return await receive()

    return replayed
