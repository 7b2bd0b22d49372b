"""Typed errors. Adapters translate client exceptions into these at the boundary.

Retryable errors are worth trying again (a service is down or slow); permanent errors are
about the input and will fail the same way every time.
"""

from __future__ import annotations

import math


class RaglineError(Exception):
    """Root of every error Ragline raises on purpose."""


class RetryableError(RaglineError):
    """A transient failure: retry with backoff."""


class PermanentError(RaglineError):
    """A failure caused by the input: retrying cannot help."""


# Ragline's own backing services: while one is away nothing is wrong with the document, so
# a pipeline stage waits for it instead of failing the document.
PLATFORM_SERVICES = frozenset({"mongodb", "kafka", "redis", "qdrant", "vector store"})


class ServiceUnavailable(RetryableError):
    """A backing service (Mongo, Kafka, Qdrant, Redis, embedding API) did not answer."""

    def __init__(self, service: str, detail: str) -> None:
        super().__init__(f"{service} unavailable: {detail}")
        self.service = service
        self.detail = detail

    @property
    def platform(self) -> bool:
        """Whether the service is one of Ragline's own (not an external provider)."""
        return self.service in PLATFORM_SERVICES


class UnsupportedDocumentType(PermanentError):
    """The file's extension is not one Ragline can extract."""

    def __init__(self, extension: str, supported: tuple[str, ...]) -> None:
        shown = extension or "(none)"
        super().__init__(
            f"unsupported file type {shown!r}; supported types: {', '.join(supported)}"
        )
        self.extension = extension
        self.supported = supported


class DocumentTooLarge(PermanentError):
    """The upload exceeds the configured size limit."""

    def __init__(self, limit_bytes: int) -> None:
        super().__init__(f"file exceeds the upload limit of {limit_bytes // (1024 * 1024)} MB")
        self.limit_bytes = limit_bytes


class ExtractionFailed(PermanentError):
    """The document could not be turned into text; the message says why, for the user."""


class InvalidEvent(PermanentError):
    """A pipeline message could not be decoded."""


class NotFound(PermanentError):
    """A resource does not exist for this tenant."""

    def __init__(self, kind: str, identifier: str) -> None:
        super().__init__(f"{kind} {identifier!r} not found")
        self.kind = kind
        self.identifier = identifier


class Conflict(PermanentError):
    """The request conflicts with the resource's current state."""


class InvalidRequest(PermanentError):
    """The request is well-formed but not acceptable."""


class SnapshotInvalid(InvalidRequest):
    """A backup snapshot that cannot be restored: its manifest or one of its files fails its
    check."""


class RateLimited(RaglineError):
    """Too many requests; try again after `retry_after_s`."""

    def __init__(self, what: str, retry_after_s: float) -> None:
        # Whole seconds, rounded up and at least 1: the same figure the HTTP layer
        # sends as `Retry-After`, so the message and the header never disagree.
        self.retry_after_s = max(1, math.ceil(retry_after_s))
        super().__init__(f"too many {what}; try again in {self.retry_after_s} s")


class Unauthorized(RaglineError):
    """Missing or invalid credentials."""


class Forbidden(RaglineError):
    """Valid credentials without the needed role."""
