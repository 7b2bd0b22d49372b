"""A transaction left open does not hold its documents for a minute.

The server keeps a transaction whose client gave up open until its own limit (60 s by
default): every other write to its documents waits that long. When MongoDB froze under the
transaction, the client ends it as soon as the server answers (`infra.mongo.abandoned`); when
the process died in it, the local stack's server ends it after 10 s
(`devstack.mongo_server`).

The transaction's next write is sent only once every thread of the server is stopped
(`tests.freezing`). A SIGSTOP holds only once the kernel schedules one of the process's threads
to take it; a run of this test on a busy machine, which wrote straight after the signal, found
the transaction committed (12, not 10): most likely the server answered that write and the
commit before it stopped, and only the commit's reply was lost. Costs about 16 s (one MongoDB,
Kafka and Redis of their own; a 1.5 s freeze; a 10 s wait).
"""

from __future__ import annotations

import asyncio
import os
import signal
import threading
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

import pymongo
import pytest
from pymongo.asynchronous.client_session import AsyncClientSession

from core.errors import ServiceUnavailable
from devstack.mongo_server import TRANSACTION_LIFETIME_S
from infra.mongo.client import connect, in_transaction
from infra.settings.mongo import MongoSettings
from tests.conftest import servers, unique
from tests.freezing import freeze

pytestmark = [pytest.mark.local_servers, pytest.mark.timeout(120)]

# The transaction's bound: its second write times out while the server is frozen.
BOUND_S = 1.5
# Once resumed, another write to the document goes through within this: the server would
# hold it until the abandoned transaction's limit (60 s).
WRITES_AGAIN_S = 20.0


async def _write_after_an_abandoned_transaction(mongo_url: str, mongo_pid: int) -> dict[str, Any]:
    client = connect(MongoSettings(url=mongo_url, timeout_ms=5000))
    counters = client[unique("abandoned")]["counters"]
    await counters.insert_one({"_id": "kb", "documents": 0})

    async def count_two(session: AsyncClientSession) -> None:
        await counters.update_one({"_id": "kb"}, {"$inc": {"documents": 1}}, session=session)
        await freeze(mongo_pid)  # the server stops before the transaction ends
        await counters.update_one({"_id": "kb"}, {"$inc": {"documents": 1}}, session=session)

    try:
        with pytest.raises(ServiceUnavailable), pymongo.timeout(BOUND_S):
            await in_transaction(client, count_two)
    finally:
        os.kill(mongo_pid, signal.SIGCONT)
    with pymongo.timeout(WRITES_AGAIN_S):
        await counters.update_one({"_id": "kb"}, {"$inc": {"documents": 10}})
        found = await counters.find_one({"_id": "kb"})
    await client.close()
    assert found is not None
    return found


@pytest.fixture(scope="module")
def mongo(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, int]]:
    """The local stack's MongoDB: its URL and process id."""
    with servers(tmp_path_factory.mktemp("abandoned")) as services:
        yield services.mongo_url, int(services.process("mongodb").process.pid)  # type: ignore[union-attr]


def _on_a_loop_of_its_own(scenario: Callable[[], Awaitable[Any]], limit_s: float) -> Any:
    """What the scenario returns, run on a loop in a daemon thread: a write the server holds
    fails the test, not the suite."""
    outcome: list[Any] = []

    def run() -> None:
        try:
            outcome.append(asyncio.run(scenario()))  # type: ignore[arg-type]
        except BaseException as exc:  # reported below
            outcome.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(timeout=limit_s)
    assert not thread.is_alive(), "a write still waits for a transaction left open"
    (result,) = outcome
    if isinstance(result, BaseException):
        raise result
    return result


def test_a_transaction_cut_off_by_a_frozen_server_holds_nothing_once_it_answers(
    mongo: tuple[str, int],
) -> None:
    url, pid = mongo
    found = _on_a_loop_of_its_own(
        lambda: _write_after_an_abandoned_transaction(url, pid), WRITES_AGAIN_S + 30
    )
    # The transaction's count was rolled back; the later write went through alone.
    assert found == {"_id": "kb", "documents": 10}


async def _write_after_a_dead_transaction(mongo_url: str) -> tuple[dict[str, Any], float]:
    """A transaction whose process is gone (it never commits nor aborts) while others run
    theirs: what a later write to its document finds, and how long it waited."""
    dead = connect(MongoSettings(url=mongo_url, timeout_ms=5000))
    alive = connect(MongoSettings(url=mongo_url, timeout_ms=5000))
    db = unique("dead")
    await alive[db]["counters"].insert_many([{"_id": "kb", "documents": 0}, {"_id": "other"}])
    session = dead.start_session()
    await session.start_transaction()
    await dead[db]["counters"].update_one(
        {"_id": "kb"}, {"$inc": {"documents": 1}}, session=session
    )

    async def others_transactions() -> None:
        # The server ends idle transactions when it next looks at its transactions.
        while True:
            await in_transaction(
                alive,
                lambda s: alive[db]["counters"].update_one(
                    {"_id": "other"}, {"$inc": {"n": 1}}, session=s
                ),
            )
            await asyncio.sleep(0.2)

    traffic = asyncio.create_task(others_transactions())
    loop = asyncio.get_running_loop()
    started = loop.time()
    with pymongo.timeout(WRITES_AGAIN_S * 2):
        await alive[db]["counters"].update_one({"_id": "kb"}, {"$inc": {"documents": 10}})
    waited = loop.time() - started
    traffic.cancel()
    found = await alive[db]["counters"].find_one({"_id": "kb"})
    await session.end_session()
    await dead.close()
    await alive.close()
    assert found is not None
    return found, waited


def test_a_transaction_of_a_dead_process_holds_its_documents_for_seconds_not_a_minute(
    mongo: tuple[str, int],
) -> None:
    url, _ = mongo
    found, waited = _on_a_loop_of_its_own(
        lambda: _write_after_a_dead_transaction(url), WRITES_AGAIN_S * 2 + 30
    )
    assert found == {"_id": "kb", "documents": 10}
    # It waited for the transaction (the server did not let it through at once), and was let
    # through once the transaction's lifetime passed: well before MongoDB's default 60 s.
    assert TRANSACTION_LIFETIME_S * 0.8 <= waited < WRITES_AGAIN_S * 2
