"""The CLI's client of the API: the client library's `Ragline`, waiting out rate limits as the
CLI does (announcing each wait), and telling whether an upload was already there."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from ragline_cli.config import Config
from ragline_cli.errors import UnreadableFile
from ragline_client import Ragline, RateLimitError, RetryableStatusError, RetryPolicy
from ragline_client.models import DocumentOut

# How long one request may wait out 429s (as Retry-After says) in all before giving up.
RATE_LIMIT_WAIT_S = 120.0
# The shortest wait after a 429, whatever Retry-After says.
MIN_WAIT_S = 0.5
# Documents per page of a listing (the API's largest page).
PAGE_SIZE = 200
TIMEOUT_S = 60.0


def _unannounced(detail: str, wait_s: float) -> None:
    """Waits without saying so."""


@dataclass
class _Spent:
    """Seconds the current request has waited out rate limits."""

    seconds: float = 0.0


@dataclass(frozen=True)
class RateLimitWaits(RetryPolicy):
    """The CLI's retries: a 429 is sent again after what its `Retry-After` says, for
    `rate_limit_wait_s` seconds per request in all, each wait announced to `on_wait` (the API's
    message, the seconds); other refusals are not sent again; a request that got no answer is
    sent again as the library's policy says."""

    rate_limit_wait_s: float = RATE_LIMIT_WAIT_S
    on_wait: Callable[[str, float], None] = _unannounced
    spent: _Spent = field(default_factory=_Spent, compare=False, repr=False)

    def after_status(self, error: RetryableStatusError, attempt: int) -> float | None:
        """Seconds to wait before sending again after this refusal, or None to give up."""
        if attempt == 0:
            self.spent.seconds = 0.0
        if not isinstance(error, RateLimitError):
            return None
        wait_s = max(MIN_WAIT_S, error.retry_after_s)
        if self.spent.seconds + wait_s > self.rate_limit_wait_s:
            return None
        self.spent.seconds += wait_s
        self.on_wait(error.detail, wait_s)
        return wait_s

    def after_transport_error(
        self, method: str, error: httpx.TransportError, attempt: int
    ) -> float | None:
        """As the library's policy; a request's first failure starts its rate-limit waits."""
        if attempt == 0:
            self.spent.seconds = 0.0
        return super().after_transport_error(method, error, attempt)


@dataclass(frozen=True)
class Upload:
    """What the API did with an uploaded file: a new document (202) or the document that
    already holds these bytes (200)."""

    document: DocumentOut
    already_there: bool


class Client(Ragline):
    """`Ragline` at the configured URL with the configured token, its 429s waited out as
    `RateLimitWaits` says, with `upload`: `upload_file` that also says whether the API already
    held the bytes."""

    def __init__(
        self,
        config: Config,
        *,
        rate_limit_wait_s: float = RATE_LIMIT_WAIT_S,
        on_wait: Callable[[str, float], None] = _unannounced,
    ) -> None:
        self.config = config
        # `upload_file` returns the document only, not whether it is new (202) or was already
        # there (200): the status of the last upload's answer is noted as it passes, until the
        # library says it.
        self._upload_status: int | None = None
        self._connections = httpx.Client(
            timeout=TIMEOUT_S, event_hooks={"response": [self._note_upload_status]}
        )
        policy = RateLimitWaits(rate_limit_wait_s=rate_limit_wait_s, on_wait=on_wait)
        super().__init__(
            config.url.value,
            config.token.value,
            retry_policy=policy,
            http_client=self._connections,
            user_agent="ragline-cli/0.1.0",
        )

    def _note_upload_status(self, response: httpx.Response) -> None:
        request = response.request
        if request.method == "POST" and request.url.path.endswith("/documents"):
            self._upload_status = response.status_code

    def close(self) -> None:
        """Closes the connection pool."""
        super().close()
        self._connections.close()

    def upload(self, kb: str, path: Path, name: str) -> Upload:
        """Uploads a file under `name`; `UnreadableFile` if it cannot be read."""
        self._upload_status = None
        try:
            document = self.upload_file(kb, path, filename=name)
        except OSError as exc:
            raise UnreadableFile(f"cannot read {path}: {exc.strerror}") from exc
        return Upload(document, already_there=self._upload_status == 200)
