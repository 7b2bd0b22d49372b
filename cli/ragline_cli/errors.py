"""The CLI's exit codes and typed errors: each error knows the code it exits with."""

from __future__ import annotations

from enum import IntEnum


class ExitCode(IntEnum):
    """What `ragline` exits with (documented in the README and in `ragline --help`)."""

    OK = 0
    # The work was done but did not succeed: a document failed or a file was refused, or an
    # evaluation scored under --fail-under.
    FAILED = 1
    # Bad arguments, an unreadable input file, nothing to ingest.
    USAGE = 2
    # No API URL or token configured.
    NOT_CONFIGURED = 3
    # The API refused the request (not found, conflict, invalid, too large, unsupported).
    REFUSED = 4
    # The API refused the token (missing, invalid, revoked, or without the needed role).
    UNAUTHORIZED = 5
    # The API could not be reached or failed (connection, timeout, 5xx, still rate limited).
    UNAVAILABLE = 6
    # --timeout passed before every document was indexed or failed.
    TIMED_OUT = 7
    # Interrupted (Ctrl-C); the server goes on with what it accepted.
    INTERRUPTED = 130


class CliError(Exception):
    """Root of the CLI's errors: a message for the user and the code to exit with."""

    exit_code: ExitCode = ExitCode.USAGE

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class UsageError(CliError):
    """The command line or an input file is not usable as given."""

    exit_code = ExitCode.USAGE


class UnreadableFile(UsageError):
    """A local file could not be read."""


class NotConfigured(CliError):
    """No API URL or token was given by flag, environment or config file."""

    exit_code = ExitCode.NOT_CONFIGURED


class Interrupted(CliError):
    """Ctrl-C: the CLI stops following; what the API accepted goes on being processed."""

    exit_code = ExitCode.INTERRUPTED


class ApiUnreachable(CliError):
    """No answer from the API: connection refused, DNS, timeout."""

    exit_code = ExitCode.UNAVAILABLE


class ApiError(CliError):
    """The API answered with an error status; `detail` is its message."""

    exit_code = ExitCode.REFUSED

    def __init__(self, status: int, detail: str) -> None:
        super().__init__(f"{detail} (HTTP {status})")
        self.status = status
        self.detail = detail


class Unauthorized(ApiError):
    """401: the token is missing, unknown, expired or revoked."""

    exit_code = ExitCode.UNAUTHORIZED


class Forbidden(ApiError):
    """403: the token is valid but may not do this (an admin's operation, say)."""

    exit_code = ExitCode.UNAUTHORIZED


class NotFound(ApiError):
    """404: no such knowledge base, document, token or evaluation in the token's tenant."""


class Conflict(ApiError):
    """409: the request conflicts with the resource's state (a taken code, an inactive KB)."""


class TooLarge(ApiError):
    """413: the upload or body is over the API's limit."""


class UnsupportedType(ApiError):
    """415: the API does not ingest files of this type."""


class Invalid(ApiError):
    """422: the request is malformed; the detail names the field."""


class RateLimited(ApiError):
    """429 even after waiting as told by Retry-After, as many times as the client retries."""

    exit_code = ExitCode.UNAVAILABLE

    def __init__(self, status: int, detail: str, retry_after_s: float) -> None:
        super().__init__(status, detail)
        self.retry_after_s = retry_after_s


class ServerError(ApiError):
    """5xx: the API or a service behind it failed; try again later."""

    exit_code = ExitCode.UNAVAILABLE


ERROR_BY_STATUS: dict[int, type[ApiError]] = {
    401: Unauthorized,
    403: Forbidden,
    404: NotFound,
    409: Conflict,
    413: TooLarge,
    415: UnsupportedType,
    422: Invalid,
}


def api_error(status: int, detail: str) -> ApiError:
    """The typed error for an error status."""
    if status >= 500:
        return ServerError(status, detail)
    return ERROR_BY_STATUS.get(status, ApiError)(status, detail)
