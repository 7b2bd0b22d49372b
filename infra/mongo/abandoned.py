"""Transactions a failure may have left open on the server, ended as soon as it answers again.

A transaction holds its documents until it commits or aborts: any other write to them waits.
When MongoDB stops answering in the middle of one (frozen, or the network gone), the client's
operation times out and its abort cannot reach the server either, so the server keeps the
transaction open until its own limit ends it (`transactionLifetimeLimitSeconds`, 60 s by
default). Meanwhile every write to the same documents waits: a delete of the document, the
next stage's work on it and, behind that, the later messages of its partition (the chaos soak
found a delete answered 503 for 50 s, and canaries indexed a minute late, after a fault).

So a transaction that ends in a timeout, a lost connection or a cancellation has its session
killed (`killSessions`, which aborts the session's open transaction) from the background, as
soon as the server answers, for a while past the server's own limit. The session is dropped
from the driver's pool first, so no later operation runs under the session being killed.
A process killed in the middle of a transaction cannot do this: the server's limit ends that
one (docs/production.md says to lower it).
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
from collections.abc import Mapping
from typing import Any

import pymongo
from pymongo import AsyncMongoClient
from pymongo.asynchronous.client_session import AsyncClientSession
from pymongo.errors import ConnectionFailure, InvalidOperation, PyMongoError

from infra.process.metrics import MONGO_ABANDONED_TRANSACTIONS

log = logging.getLogger(__name__)

# Between two tries to kill a session while the server does not answer.
RETRY_S = 0.5
# Each try's bound.
TRY_S = 5.0
# Tries stop this long after the failure: past the server's own limit (60 s by default).
GIVE_UP_S = 90.0

# The kills under way (the event loop keeps only weak references to tasks).
_ENDING: set[asyncio.Task[None]] = set()


def may_be_left_open(exc: BaseException) -> bool:
    """Whether a transaction that failed with `exc` may still be open on the server: its
    last operation or its abort never got an answer."""
    if isinstance(exc, asyncio.CancelledError | ConnectionFailure):
        return True
    return isinstance(exc, PyMongoError) and exc.timeout


def end_later(client: AsyncMongoClient[Any], session: AsyncClientSession) -> None:
    """Kills the session on the server from the background, as soon as it answers; the
    session is never used again here."""
    lsid = session.session_id
    # The driver pools a session that saw no network error; this one must not run anything
    # after its kill is sent (`_server_session` is PyMongo's own, pinned in pyproject.toml).
    server_session = getattr(session, "_server_session", None)
    if server_session is not None:
        server_session.mark_dirty()
    # A context of its own: the failed operation's deadline (`pymongo.timeout`, a context
    # variable), long passed, would bound every try.
    task = asyncio.get_running_loop().create_task(
        _kill(client, lsid), context=contextvars.Context()
    )
    _ENDING.add(task)
    task.add_done_callback(_ENDING.discard)


async def _kill(client: AsyncMongoClient[Any], lsid: Mapping[str, Any]) -> None:
    loop = asyncio.get_running_loop()
    give_up = loop.time() + GIVE_UP_S
    while True:
        try:
            with pymongo.timeout(TRY_S):
                await client.admin.command({"killSessions": [lsid]})
        except InvalidOperation:  # the client was closed: its process is ending
            return
        except PyMongoError as exc:
            if loop.time() >= give_up:
                MONGO_ABANDONED_TRANSACTIONS.labels("given_up").inc()
                log.warning("a transaction left open was not ended (%s): the server ends it", exc)
                return
            await asyncio.sleep(RETRY_S)
            continue
        MONGO_ABANDONED_TRANSACTIONS.labels("ended").inc()
        log.info("ended a transaction a failure may have left open")
        return
