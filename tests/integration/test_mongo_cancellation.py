"""Operations cancelled while MongoDB hangs leave the client working (`infra.mongo.cancellation`).

An AnyIO cancel scope (the MCP SDK runs each tool call in one) cancels a task again and again
until it leaves the scope. Operations cut that way while the server was frozen, waiting for
it to answer again, once left PyMongo's topology lock held by no one on Python 3.11: after
the resume, every operation of that client waited forever, cancellation included.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import os
import random
import signal
import threading
from pathlib import Path
from typing import Any

import anyio
import pymongo
import pytest

from infra.mongo.client import connect
from infra.settings.mongo import MongoSettings
from tests.conftest import servers, unique
from tests.freezing import freeze

pytestmark = [
    pytest.mark.local_servers,
    pytest.mark.timeout(150),
    # A read cut between PyMongo opening a connection and taking the pool's lock leaves that
    # connection's socket to the garbage collector (PyMongo closes it only on errors raised
    # later); the test collects them before it ends, so none is blamed on a later test.
    pytest.mark.filterwarnings(
        "ignore:Exception ignored in. <socket.socket fd=[0-9]+, family=2, type=1, proto=6, "
        "laddr=\\('127\\.0\\.0\\.1', [0-9]+\\), raddr=\\('127\\.0\\.0\\.1', [0-9]+\\)>"
        ":pytest.PytestUnraisableExceptionWarning"
    ),
]

FROZEN_S = 8.0
# How long the client may take to answer once the server is resumed (it answers in
# milliseconds; a wedged client never does).
RESUMED_S = 60.0


async def _cut_reads_while_frozen(mongo_url: str, mongo_pid: int) -> tuple[int, Any]:
    """Reads cut by AnyIO cancel scopes at random moments while the server is frozen; then,
    resumed, the number of reads cut and what the same client reads."""
    client = connect(MongoSettings(url=mongo_url, timeout_ms=5000))
    things = client[unique("cancel")]["things"]
    await things.insert_one({"_id": 1, "name": "kept"})
    cut = 0

    async def read_until_cut(after_s: float) -> None:
        nonlocal cut
        with (
            anyio.move_on_after(after_s) as scope,
            pymongo.timeout(5),
            contextlib.suppress(pymongo.errors.PyMongoError),
        ):
            await things.find_one({"_id": 1})
        cut += scope.cancelled_caught

    try:
        await freeze(mongo_pid)
        chance = random.Random(7)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + FROZEN_S
        while loop.time() < deadline:
            async with anyio.create_task_group() as group:
                for _ in range(40):
                    group.start_soon(read_until_cut, chance.uniform(0.05, 1.5))
    finally:
        os.kill(mongo_pid, signal.SIGCONT)
    with pymongo.timeout(20):
        found = await things.find_one({"_id": 1})
    await client.close()
    return cut, found


def test_reads_cut_while_mongodb_is_frozen_leave_the_client_working(tmp_path: Path) -> None:
    with servers(tmp_path) as services:
        pid = int(services.process("mongodb").process.pid)  # type: ignore[union-attr]
        outcome: list[Any] = []

        def scenario() -> None:
            try:
                outcome.append(asyncio.run(_cut_reads_while_frozen(services.mongo_url, pid)))
            except BaseException as exc:  # reported by the test below
                outcome.append(exc)

        # On a loop of its own in a daemon thread: a client wedged as before fails this test
        # instead of holding the suite's event loop forever.
        thread = threading.Thread(target=scenario, daemon=True)
        thread.start()
        thread.join(timeout=FROZEN_S + RESUMED_S)
        assert not thread.is_alive(), "the client still waits, long after MongoDB resumed"
        gc.collect()  # the sockets of connections the cuts left behind, see `pytestmark`
    (result,) = outcome
    if isinstance(result, BaseException):
        raise result
    cut, found = result
    assert cut > 20, cut  # reads really were cut while they waited
    assert found == {"_id": 1, "name": "kept"}
