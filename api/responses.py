"""The error answers routes declare in the OpenAPI schema, all with one body (`ErrorBody`: a
`detail` message, and per-field `errors` for invalid input). A router names the statuses all
its routes can answer; a route adds its own: `responses=refusals(404, 409)`."""

from __future__ import annotations

from typing import Any

from schemas.api import ErrorBody

WHY: dict[int, str] = {
    400: "the body could not be read: not UTF-8 JSON, or a malformed form",
    401: "no valid credentials: a bearer token (the internal secret for the internal search)",
    403: "the token may not do this (an admin's token is needed, or the item is not the caller's)",
    404: "nothing by that id in the caller's tenant (or nothing the caller may read)",
    409: "the resource's state does not allow it (taken, being deleted, already ended)",
    413: "the body is larger than allowed",
    415: "the file type is not supported; `detail` lists the supported ones",
    422: "invalid input: `detail` names each field and what is wrong with it",
    429: "too many requests: try again after `Retry-After` seconds",
    503: (
        "a service Ragline depends on is unavailable or not answering within the request's "
        "time budget: try again after `Retry-After` seconds"
    ),
}
HEADERS: dict[int, dict[str, Any]] = {
    401: {"WWW-Authenticate": {"description": "`Bearer`", "schema": {"type": "string"}}},
    429: {"Retry-After": {"description": "seconds to wait", "schema": {"type": "integer"}}},
    503: {"Retry-After": {"description": "seconds to wait", "schema": {"type": "integer"}}},
}


def refusals(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """The OpenAPI declaration of these error answers, for a route's or router's `responses`."""
    declared: dict[int | str, dict[str, Any]] = {}
    for status in statuses:
        declared[status] = {"model": ErrorBody, "description": WHY[status]}
        if status in HEADERS:
            declared[status]["headers"] = HEADERS[status]
    return declared


# What a request body can be refused as: unreadable, too large, invalid.
BODY = (400, 413, 422)
# What every route behind a bearer token can answer: no or a bad token, a token without the
# right (a bot's token anywhere but /mcp), a service down.
AUTHENTICATED = refusals(401, 403, 503)
