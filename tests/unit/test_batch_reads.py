"""A batch of a stage's messages is worked as one consumer per partition would: the messages
of one key (one document, one connector record) in the order read, the keys at once. Pure
asyncio, no servers: milliseconds."""

from __future__ import annotations

import asyncio

import pytest
from aiokafka import ConsumerRecord

from workers.hosting import run_by_key


def _record(partition: int, offset: int, key: bytes | None, value: bytes) -> ConsumerRecord:
    return ConsumerRecord(
        topic="t",
        partition=partition,
        offset=offset,
        timestamp=0,
        timestamp_type=0,
        key=key,
        value=value,
        checksum=None,
        serialized_key_size=0,
        serialized_value_size=len(value),
        headers=(),
    )


async def test_one_keys_messages_run_in_order_and_the_keys_at_once() -> None:
    # Document a's first message is held until b's has started: only keys worked at once get
    # past it; a's second message must wait for its first.
    b_started = asyncio.Event()
    seen: list[bytes] = []

    async def run(value: bytes) -> None:
        if value == b"a1":
            await asyncio.wait_for(b_started.wait(), 5)
        if value == b"b1":
            b_started.set()
        seen.append(value)

    batch = [_record(0, 0, b"a", b"a1"), _record(0, 1, b"b", b"b1"), _record(0, 2, b"a", b"a2")]
    await run_by_key(batch, run)

    assert seen == [b"b1", b"a1", b"a2"]


async def test_an_error_stops_its_keys_later_messages_and_is_raised_once_the_others_are_done() -> (
    None
):
    seen: list[bytes] = []

    async def run(value: bytes) -> None:
        if value == b"a1":
            raise RuntimeError("nothing could be recorded")
        await asyncio.sleep(0)
        seen.append(value)

    batch = [
        _record(0, 0, b"a", b"a1"),
        _record(0, 1, b"a", b"a2"),
        _record(1, 0, b"b", b"b1"),
        _record(1, 1, b"b", b"b2"),
    ]
    with pytest.raises(RuntimeError, match="nothing could be recorded"):
        await run_by_key(batch, run)

    # The batch is read again from its start (the stage skips what it did): a2 must not have
    # run before a1, and b's messages ran to their end.
    assert seen == [b"b1", b"b2"]


async def test_messages_without_a_key_run_one_after_another() -> None:
    running = 0
    most = 0

    async def run(value: bytes) -> None:
        nonlocal running, most
        running += 1
        most = max(most, running)
        await asyncio.sleep(0)
        running -= 1

    await run_by_key([_record(0, n, None, b"x") for n in range(4)], run)

    assert most == 1
