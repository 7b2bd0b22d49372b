"""Every failure the client raises, under one root (`RaglineError`): the API's refusals, one
class per status, and the ways a request can fail to get an answer at all."""

from __future__ import annotations

from typing import Any

import httpx
from pydantic import ValidationError

from ragline_client.models import ErrorBody, FieldProblem


class RaglineError(Exception):
    """Root of every error the Ragline client raises."""


class APIConnectionError(RaglineError):
    """The API could not be reached (refused, reset, DNS): no answer came back."""


class APITimeoutError(APIConnectionError):
    """The API did not answer within the client's timeout."""


class UnexpectedResponseError(RaglineError):
    """The API answered something this client cannot read (not JSON, or not the schema's
    shape): usually a proxy in the way, or a server of another version."""

    def __init__(self, message: str, response: httpx.Response) -> None:
        super().__init__(message)
        self.response = response
        self.status_code = response.status_code


class WaitTimeout(RaglineError, TimeoutError):
    """A wait (`wait_until_final`) ran out before the document reached a final status."""


class APIStatusError(RaglineError):
    """The API refused the request: `status_code`, its message (`detail`) and, for invalid
    input, each field's problem (`field_errors`)."""

    def __init__(self, response: httpx.Response, detail: str, errors: list[FieldProblem]) -> None:
        super().__init__(f"{response.status_code}: {detail}")
        self.response = response
        self.status_code = response.status_code
        self.detail = detail
        self.field_errors = errors


class BadRequestError(APIStatusError):
    """400: the body could not be read (not UTF-8 JSON, or a malformed form)."""


class AuthenticationError(APIStatusError):
    """401: no valid credentials (a missing, unknown, expired or revoked token)."""


class PermissionDeniedError(APIStatusError):
    """403: the token may not do this (an admin's token is needed, or a bot's token was used
    where only a person's is accepted)."""


class NotFoundError(APIStatusError):
    """404: nothing by that id (or code) in the caller's tenant that the caller may read."""


class ConflictError(APIStatusError):
    """409: the resource's state does not allow it (a code taken, a KB being deleted, a job
    already ended)."""


class PayloadTooLargeError(APIStatusError):
    """413: the file or body is larger than the deployment allows."""


class UnsupportedMediaTypeError(APIStatusError):
    """415: the file type is not supported; the message lists the supported ones."""


class InvalidRequestError(APIStatusError):
    """422: invalid input; `field_errors` names each field and what is wrong with it."""


class RetryableStatusError(APIStatusError):
    """A refusal that passes: try again after `retry_after_s` seconds (the client already
    retried as often as it was allowed to)."""

    def __init__(self, response: httpx.Response, detail: str, errors: list[FieldProblem]) -> None:
        super().__init__(response, detail, errors)
        self.retry_after_s = retry_after_s(response)


class RateLimitError(RetryableStatusError):
    """429: too many requests for the tenant (or bot) right now."""


class ServiceUnavailableError(RetryableStatusError):
    """503: a service Ragline depends on is unavailable or slow right now."""


class InternalServerError(APIStatusError):
    """500 or another 5xx: the server failed; its logs say why."""


STATUS_ERRORS: dict[int, type[APIStatusError]] = {
    400: BadRequestError,
    401: AuthenticationError,
    403: PermissionDeniedError,
    404: NotFoundError,
    409: ConflictError,
    413: PayloadTooLargeError,
    415: UnsupportedMediaTypeError,
    422: InvalidRequestError,
    429: RateLimitError,
    503: ServiceUnavailableError,
}


def retry_after_s(response: httpx.Response, default_s: float = 1.0) -> float:
    """The answer's `Retry-After` in seconds (`default_s` when it has none or it is not a
    number of seconds)."""
    try:
        return max(0.0, float(response.headers.get("retry-after", default_s)))
    except ValueError:
        return default_s


def status_error(response: httpx.Response) -> APIStatusError:
    """The typed error of an error answer, with the API's message and field problems."""
    detail, errors = _error_body(response)
    kind = STATUS_ERRORS.get(response.status_code)
    if kind is None:
        kind = InternalServerError if response.status_code >= 500 else APIStatusError
    return kind(response, detail, errors)


def _error_body(response: httpx.Response) -> tuple[str, list[FieldProblem]]:
    try:
        data: Any = response.json()
    except ValueError:
        data = None
    try:
        body = ErrorBody.model_validate(data)
    except ValidationError:
        text = " ".join(response.text.split())[:300]
        return text or response.reason_phrase or "no message", []
    return body.detail, list(body.errors or [])


def unreadable(response: httpx.Response, what: str, exc: Exception | None = None) -> RaglineError:
    """The error of an answer that is not what the API's schema says."""
    reason = f": {exc}" if exc is not None else ""
    return UnexpectedResponseError(f"unexpected answer to {what}{reason}", response)


__all__ = [
    "APIConnectionError",
    "APIStatusError",
    "APITimeoutError",
    "AuthenticationError",
    "BadRequestError",
    "ConflictError",
    "InternalServerError",
    "InvalidRequestError",
    "NotFoundError",
    "PayloadTooLargeError",
    "PermissionDeniedError",
    "RaglineError",
    "RateLimitError",
    "RetryableStatusError",
    "ServiceUnavailableError",
    "UnexpectedResponseError",
    "UnsupportedMediaTypeError",
    "WaitTimeout",
]
