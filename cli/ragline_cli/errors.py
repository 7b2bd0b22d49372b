"""The CLI's exit codes and typed errors: each error knows the code it exits with. The client
library's errors (`ragline_client.errors`) become these in one place, `from_library`."""

from __future__ import annotations

from enum import IntEnum

from pydantic import ValidationError

from ragline_client import (
    APIConnectionError,
    APIStatusError,
    AuthenticationError,
    InternalServerError,
    PermissionDeniedError,
    RaglineError,
    RateLimitError,
    ServiceUnavailableError,
    UnexpectedResponseError,
)

# How much of an answer it could not read the CLI shows (on one line).
SHOWN_CHARS = 300


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
    """The API answered with an error status (or with what the CLI cannot read): its message
    (`detail`), then the status; the exit code says whether the request, the token or the
    service was the trouble."""

    def __init__(self, status: int, detail: str, exit_code: ExitCode = ExitCode.REFUSED) -> None:
        super().__init__(f"{detail} (HTTP {status})")
        self.status = status
        self.detail = detail
        self.exit_code = exit_code


class ClientFailure(CliError):
    """Any other failure of the client library (none that the commands expect)."""

    exit_code = ExitCode.UNAVAILABLE


# The exit code of each of the library's refusals that is not the request's own fault (every
# other status exits REFUSED).
EXIT_CODES: tuple[tuple[type[APIStatusError], ExitCode], ...] = (
    (AuthenticationError, ExitCode.UNAUTHORIZED),
    (PermissionDeniedError, ExitCode.UNAUTHORIZED),
    (RateLimitError, ExitCode.UNAVAILABLE),
    (ServiceUnavailableError, ExitCode.UNAVAILABLE),
    (InternalServerError, ExitCode.UNAVAILABLE),
)


def _one_line(text: str) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= SHOWN_CHARS else flat[: SHOWN_CHARS - 1] + "…"


def _unreadable(error: UnexpectedResponseError) -> ApiError:
    """An answer that is not JSON, or not of the schema's shape (a proxy in the way, or a
    server of another version): what was asked, and the first thing wrong with the answer."""
    request = error.response.request
    problem = str(error)
    cause = error.__cause__
    if isinstance(cause, ValidationError) and cause.errors():
        first, *others = cause.errors()
        where = ".".join(str(part) for part in first["loc"])
        problem = f"{where}: {first['msg']}" if where else str(first["msg"])
        if others:
            problem += f" (and {len(others)} more problems)"
    detail = f"unexpected answer to {request.method} {request.url.path}: {_one_line(problem)}"
    return ApiError(error.status_code, f"{detail}; is this Ragline's API?")


def from_library(error: RaglineError) -> CliError:
    """The CLI's error for one of the client library's: its message and exit code."""
    if isinstance(error, APIConnectionError):
        return ApiUnreachable(str(error))
    if isinstance(error, APIStatusError):
        code = next((c for kind, c in EXIT_CODES if isinstance(error, kind)), ExitCode.REFUSED)
        return ApiError(error.status_code, error.detail, code)
    if isinstance(error, UnexpectedResponseError):
        return _unreadable(error)
    return ClientFailure(_one_line(str(error)))
