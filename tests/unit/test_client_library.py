"""The client library against the API it is a client of: every operation the served OpenAPI
schema has is a method of both clients, with the same signature; the checked-in models and sync
client are what they generate to; refusals are their typed errors, and retries are bounded and
honour `Retry-After` (over httpx's mock transport: the retry policy is the client's own logic;
the live API's refusals are tests/e2e/test_client_library.py's and test_limits.py's).

Cost: about 5 s (building the app's schema and generating the models once); no server.
"""

from __future__ import annotations

import importlib.util
import inspect
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import httpx
import pytest

from docs.hooks.openapi_page import operations, served_schema
from ragline_client import (
    APITimeoutError,
    AsyncRagline,
    InternalServerError,
    InvalidRequestError,
    Ragline,
    RateLimitError,
    RetryPolicy,
    ServiceUnavailableError,
    UnexpectedResponseError,
)
from ragline_client._shared import OPERATIONS

ROOT = Path(__file__).resolve().parents[2]
NO_WAIT = RetryPolicy(max_retries=2, backoff_s=0.0)


@pytest.fixture(scope="module")
def schema() -> dict[str, Any]:
    """The OpenAPI schema the API serves."""
    return served_schema()


def _generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location("client_generate", ROOT / "client/generate.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_operation_of_the_served_schema_is_a_method_of_both_clients(
    schema: dict[str, Any],
) -> None:
    served = {(method.upper(), path) for method, path, _ in operations(schema)}
    called = {(op.method, op.path) for op in OPERATIONS.values()}
    assert served - called == set(), "operations of the API with no client method"
    assert called - served == set(), "client methods of operations the API does not have"
    for name in OPERATIONS:
        sync_method, async_method = getattr(Ragline, name), getattr(AsyncRagline, name)
        # The same parameters (answers differ only as an iterator differs from an async one).
        sync_parameters = inspect.signature(sync_method).parameters
        assert sync_parameters == inspect.signature(async_method).parameters, name
        assert inspect.iscoroutinefunction(async_method) or inspect.isasyncgenfunction(
            async_method
        ), name
        assert sync_method.__doc__, name


def test_the_checked_in_models_and_sync_client_are_what_they_generate_to(
    schema: dict[str, Any],
) -> None:
    assert _generator().stale(schema) == [], "run `python client/generate.py`"


def test_a_changed_schema_is_caught_as_drift(schema: dict[str, Any]) -> None:
    changed = {**schema, "components": {**schema["components"]}}
    schemas = dict(changed["components"]["schemas"])
    knowledge_base = dict(schemas["KnowledgeBaseOut"])
    knowledge_base["properties"] = {
        **knowledge_base["properties"],
        "added": {"type": "string", "title": "Added"},
    }
    schemas["KnowledgeBaseOut"] = knowledge_base
    changed["components"]["schemas"] = schemas
    assert _generator().stale(changed) == ["client/ragline_client/models.py"]


def _client(answers: list[Callable[[httpx.Request], httpx.Response]]) -> tuple[Ragline, list[str]]:
    """A client whose requests get `answers` in turn; the list of what it sent."""
    sent: list[str] = []
    replies: Iterator[Callable[[httpx.Request], httpx.Response]] = iter(answers)

    def handle(request: httpx.Request) -> httpx.Response:
        sent.append(f"{request.method} {request.url.path}")
        return next(replies)(request)

    http = httpx.Client(transport=httpx.MockTransport(handle))
    return Ragline(base_url="http://ragline.test", http_client=http, retry_policy=NO_WAIT), sent


def _status(code: int, headers: dict[str, str] | None = None, **body: Any) -> Any:
    return lambda request: httpx.Response(code, json=body, headers=headers)


HEALTHY = _status(200, status="ok")


def test_a_429_is_sent_again_after_its_retry_after() -> None:
    client, sent = _client([_status(429, {"Retry-After": "0"}, detail="too many"), HEALTHY])
    assert client.health().status == "ok"
    assert sent == ["GET /healthz", "GET /healthz"]


def test_a_wait_longer_than_the_policy_allows_is_raised_at_once() -> None:
    client, sent = _client([_status(429, {"Retry-After": "3600"}, detail="too many searches")])
    with pytest.raises(RateLimitError) as refused:
        client.health()
    assert (refused.value.retry_after_s, refused.value.detail) == (3600.0, "too many searches")
    assert len(sent) == 1


def test_unavailable_is_retried_a_bounded_number_of_times() -> None:
    down = _status(503, {"Retry-After": "0"}, detail="mongodb unavailable")
    client, sent = _client([down, down, down, HEALTHY])
    with pytest.raises(ServiceUnavailableError, match="mongodb unavailable"):
        client.health()
    assert len(sent) == 3  # the first try and two retries


def test_a_timed_out_post_is_not_sent_twice_but_a_get_is() -> None:
    def timed_out(request: httpx.Request) -> httpx.Response:
        raise httpx.ReadTimeout("timed out", request=request)

    client, sent = _client([timed_out])
    with pytest.raises(APITimeoutError):
        client.add_text("kb", title="t", content="c")
    assert len(sent) == 1
    client, sent = _client([timed_out, HEALTHY])
    assert client.health().status == "ok"
    assert len(sent) == 2


def test_a_post_that_never_left_is_sent_again() -> None:
    def refused(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("connection refused", request=request)

    client, sent = _client([refused, _status(422, detail="title: required", errors=[])])
    with pytest.raises(InvalidRequestError, match="title: required"):
        client.add_text("kb", content="no title")
    assert len(sent) == 2


def test_an_answer_that_is_not_the_api_s_is_said_so() -> None:
    proxy = _status(200, unexpected="a proxy's page")
    client, _ = _client([proxy])
    with pytest.raises(UnexpectedResponseError, match="unexpected answer to health"):
        client.health()
    html = lambda request: httpx.Response(502, text="<html>Bad gateway</html>")  # noqa: E731
    client, _ = _client([html])
    with pytest.raises(InternalServerError, match="502: <html>Bad gateway</html>"):
        client.health()
