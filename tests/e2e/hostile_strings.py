"""Hostile strings in every text input of the API: each request the fuzzer saw accepted is sent
again with one of its inputs (a path parameter, a query parameter, a string in the JSON body)
replaced by each value below, and every answer must be a clear one (no 5xx; a 4xx says why).

The fuzzer alone missed such values: it draws strings from each field's schema, so a URL field
(`^https?://\\S+$`) got URL-like ASCII, and ten cases per operation rarely held a lone surrogate
or a control character in a host. Here every input meets every value, deterministically.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qsl, quote, urlsplit

import httpx
from schemathesis.engine.recorder import Request

# Values a hostile or broken client sends. JSON carries lone surrogates as `\udXXX` escapes
# (json.dumps writes them so); in a URL they are percent-encoded as the bytes a client would
# send (surrogatepass), which the server cannot decode as UTF-8.
HOSTILE: dict[str, str] = {
    "lone high surrogate": "a\ud800b",
    "lone low surrogate": "\udc00",
    "reversed surrogate pair": "\ude00\ud83d",
    "NUL": "a\x00b",
    "control characters": "\x01\x07\x1b[31m\x7f",
    "C1 control, line and paragraph separators": "\x85\u2028\u2029",
    "right-to-left override and mark": "\u202eevil\u202c\u200f",
    "zero-width characters and BOM": "\ufeff\u200b\u200d",
    "10,000 characters": "x" * 10_000,
    "astral, combining and Thai": "\U0001f600e\u0301\u0e01\u0e34",
}
# What an input that took a URL gets besides: hosts and ports no URL may have.
HOSTILE_URLS: dict[str, str] = {
    "IDNA: empty label": "http://a..b/",
    "IDNA: bare xn-- label": "https://xn--/",
    "IDNA: full-width dot and sharp s": "https://stra\u00dfe\uff0eexample/",
    "IDNA: Arabic-Indic digit before Latin": "https://\u0661a.com/",
    "IDNA: 64-character label": f"https://{'a' * 64}.example/",
    "surrogates in a host": "https://\udacf\udee0",
    "surrogates in a port": "http://0td:\ud87c\udee7",
    "control character in a host": "http://exa\x07mple.com/",
    "right-to-left mark in a host": "https://\u200fexample.com/",
}
# At most this many inputs of one operation are swept (the run stays bounded).
MAX_INPUTS = 6


@dataclass
class SweepReport:
    """What went wrong, and how many hostile requests each operation got."""

    failures: list[str] = field(default_factory=list)
    sent: Counter[str] = field(default_factory=Counter)


@dataclass(frozen=True)
class _Input:
    kind: str  # "path", "query" or "body"
    where: tuple[str | int, ...]  # a path segment's index, a query name, a body field's path

    looks_like_url: bool = False

    def label(self) -> str:
        return f"{self.kind} {'.'.join(str(part) for part in self.where)}"

    def values(self) -> dict[str, str]:
        """The hostile values this input gets."""
        return {**HOSTILE, **HOSTILE_URLS} if self.looks_like_url else HOSTILE


def sweep(http: httpx.Client, accepted: dict[str, Request]) -> SweepReport:
    """Sends every accepted request again once per input and hostile value."""
    report = SweepReport()
    for label, request in sorted(accepted.items()):
        template = label.split(" ", 1)[1]
        for target in inputs(template, request):
            for name, value in target.values().items():
                report.sent[label] += 1
                try:
                    problem = _problem(_send(http, request, target, value))
                except httpx.TransportError as exc:  # the server dropped the request
                    problem = f"no answer: {exc!r}"
                if problem:
                    report.failures.append(f"{label}, {target.label()} = {name}: {problem}")
    return report


def _body(request: Request) -> Any:
    content_type = _header(request, "content-type")
    if request.body is None or not content_type.startswith("application/json"):
        return None
    return json.loads(request.body)


def _header(request: Request, name: str) -> str:
    for key, values in request.headers.items():
        if key.lower() == name:
            return values[0] if values else ""
    return ""


def inputs(template: str, request: Request) -> list[_Input]:
    """The inputs of the request a client fills with text (at most `MAX_INPUTS`)."""
    return list(_inputs(template, request))[:MAX_INPUTS]


def _inputs(template: str, request: Request) -> Iterator[_Input]:
    for index, segment in enumerate(template.strip("/").split("/")):
        if segment.startswith("{"):
            yield _Input("path", (index,))
    for name, value in parse_qsl(urlsplit(request.uri).query, keep_blank_values=True):
        yield _Input("query", (name,), _is_url(value))
    for where, value in _strings(_body(request), ()):
        yield _Input("body", where, _is_url(value))


def _is_url(value: str) -> bool:
    return value.lower().startswith(("http://", "https://"))


def _strings(
    value: Any, where: tuple[str | int, ...]
) -> Iterator[tuple[tuple[str | int, ...], str]]:
    if isinstance(value, str):
        yield where, value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from _strings(item, (*where, key))
    elif isinstance(value, list):
        for index, item in enumerate(value[:2]):
            yield from _strings(item, (*where, index))


def _replaced(value: Any, where: tuple[str | int, ...], new: str) -> Any:
    if not where:
        return new
    head, rest = where[0], where[1:]
    if isinstance(value, dict):
        return {k: _replaced(v, rest, new) if k == head else v for k, v in value.items()}
    return [_replaced(v, rest, new) if i == head else v for i, v in enumerate(value)]


def _quoted(text: str) -> str:
    return quote(text.encode("utf-8", "surrogatepass"), safe="")


def _send(http: httpx.Client, request: Request, target: _Input, value: str) -> httpx.Response:
    parts = urlsplit(request.uri)
    segments = parts.path.strip("/").split("/")
    query = parse_qsl(parts.query, keep_blank_values=True)
    body = _body(request)
    if target.kind == "path":
        segments[int(target.where[0])] = _quoted(value)
    elif target.kind == "query":
        query = [(k, value if k == target.where[0] else v) for k, v in query]
    else:
        body = _replaced(body, target.where, value)
    path = "/" + "/".join(segments)
    if query:
        path += "?" + "&".join(f"{_quoted(k)}={_quoted(v)}" for k, v in query)
    headers: dict[str, str] = {}
    content: bytes | None = request.body  # none, or not JSON (an upload's form): as it was
    if body is not None:
        headers, content = {"Content-Type": "application/json"}, json.dumps(body).encode()
    elif content_type := _header(request, "content-type"):
        headers = {"Content-Type": content_type}
    return http.request(request.method, path, content=content, headers=headers)


def _problem(answer: httpx.Response) -> str | None:
    """What is wrong with an answer to a hostile request, or None."""
    if answer.status_code >= 500:
        return f"{answer.status_code}: {answer.text[:300]}"
    if answer.status_code < 400:
        return None
    try:
        detail = answer.json().get("detail")
    except (ValueError, AttributeError):
        return f"{answer.status_code} without a JSON body: {answer.text[:200]!r}"
    if not isinstance(detail, str) or not detail.strip():
        return f"{answer.status_code} without a message in `detail`"
    return None
