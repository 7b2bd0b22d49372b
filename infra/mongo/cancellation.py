"""PyMongo's waits on its own locks, made safe to cancel on Python 3.11.

PyMongo's async client waits for a server or a pooled connection with
`asyncio.wait_for(condition.wait(), timeout)`. On Python 3.11, `wait_for` runs the wait in a
task of its own. When the caller is cancelled while `wait_for` is cancelling that inner task
(its own timeout, or a first cancellation), a second cancellation makes `wait_for` return at
once and leaves the inner task behind; the inner task then takes the condition's lock back
with no one left to release it. Every later operation of the client waits for that lock
forever, in a loop that ignores cancellation (a condition's wait must hold its lock again
before it may end), so no request bound can end it either. AnyIO cancel scopes (the MCP SDK's
task groups) cancel a task again and again until it leaves the scope, so an MCP tool call cut
while MongoDB did not answer was enough to leave the API answering no request that needs
MongoDB (seen in the freeze tests).

Python 3.12's `wait_for` waits in the caller's own task, under `asyncio.timeout`, so the lock
is always taken back by the task that will release it. `make_condition_waits_cancel_safe`
gives PyMongo that behaviour on Python 3.11 (nothing to do on 3.12 and later).
"""

from __future__ import annotations

import asyncio
import sys
from types import ModuleType
from typing import Any

import pymongo.asynchronous.pool
import pymongo.asynchronous.topology
import pymongo.lock

# The modules that bind PyMongo's condition wait by name.
_USERS: tuple[ModuleType, ...] = (
    pymongo.lock,
    pymongo.asynchronous.pool,
    pymongo.asynchronous.topology,
)
_NAME = "_async_cond_wait"


async def condition_wait(condition: Any, timeout: float | None) -> bool:  # noqa: ASYNC109 (PyMongo's signature)
    """Waits on `condition` (its lock held) for at most `timeout` seconds, in this task:
    True if notified, False on timeout. A cancellation ends it with the lock held again."""
    try:
        async with asyncio.timeout(timeout):
            return bool(await condition.wait())
    except TimeoutError:
        return False


def make_condition_waits_cancel_safe() -> None:
    """Puts `condition_wait` in place of PyMongo's condition wait (Python 3.11 only).
    Fails loudly if PyMongo no longer has the function it replaces."""
    if sys.version_info >= (3, 12):
        return
    for module in _USERS:
        if not hasattr(module, _NAME):
            raise RuntimeError(f"{module.__name__} has no {_NAME}: review infra.mongo.cancellation")
        setattr(module, _NAME, condition_wait)
