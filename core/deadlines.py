"""How long one database operation may take within the request under way: a request with a
long budget (a bulk upload) still has each operation bounded by the normal one, so that a
database that does not answer fails it soon rather than at the end of the long budget."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

_OPERATION_BOUND_S: ContextVar[float | None] = ContextVar("operation_bound_s", default=None)


@contextmanager
def each_operation_within(seconds: float) -> Iterator[None]:
    """Within the block, each database operation is given at most `seconds`."""
    token = _OPERATION_BOUND_S.set(seconds)
    try:
        yield
    finally:
        _OPERATION_BOUND_S.reset(token)


def operation_bound_s() -> float | None:
    """The bound of one database operation here (None: only the request's own, if any)."""
    return _OPERATION_BOUND_S.get()
