"""Callers that wait at the same moment share one call (`core.coalescing`), and each gets its
own answers."""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import Sequence

import pytest

from core.coalescing import Coalescer
from core.errors import PermanentError


class Engine:
    """A batch call that answers each request with its double, records the batches it was
    given, and can be held busy until released."""

    def __init__(self) -> None:
        self.batches: list[list[int]] = []
        self.busy = asyncio.Event()
        self.release = asyncio.Event()
        self.release.set()
        self.refuse: set[int] = set()

    async def run(self, requests: list[int]) -> list[int]:
        self.batches.append(list(requests))
        self.busy.set()
        await self.release.wait()
        if self.refuse & set(requests):
            raise PermanentError(f"refused {sorted(self.refuse & set(requests))}")
        return [2 * request for request in requests]

    def hold(self) -> None:
        self.busy.clear()
        self.release.clear()


async def _queued(
    *groups: Sequence[int], into: Coalescer[int, int]
) -> list[asyncio.Task[list[int]]]:
    """Tasks submitting each group, run until each is waiting for its answers."""
    tasks = [asyncio.create_task(into.submit(group)) for group in groups]
    await asyncio.sleep(0)  # one turn of the loop: each task has queued its group
    return tasks


async def test_a_lone_group_goes_out_at_once_alone() -> None:
    engine = Engine()
    coalescer = Coalescer(engine.run)
    assert await coalescer.submit([1, 2, 3]) == [2, 4, 6]
    assert await coalescer.submit([]) == []
    assert engine.batches == [[1, 2, 3]]
    await coalescer.close()


async def test_groups_queued_while_the_engine_is_busy_share_the_next_call() -> None:
    engine = Engine()
    coalescer = Coalescer(engine.run)
    engine.hold()
    first = asyncio.create_task(coalescer.submit([1]))
    await engine.busy.wait()
    queued = await _queued([2, 3], [4], [5, 6, 7], into=coalescer)
    engine.release.set()
    assert await first == [2]
    assert [await task for task in queued] == [[4, 6], [8], [10, 12, 14]]
    assert engine.batches == [[1], [2, 3, 4, 5, 6, 7]]
    await coalescer.close()


async def test_a_batch_takes_at_most_max_batch_groups() -> None:
    engine = Engine()
    coalescer = Coalescer(engine.run, max_batch=2)
    engine.hold()
    first = asyncio.create_task(coalescer.submit([0]))
    await engine.busy.wait()
    queued = await _queued([1], [2], [3], [4], [5], into=coalescer)
    engine.release.set()
    await first
    assert [await task for task in queued] == [[2], [4], [6], [8], [10]]
    assert engine.batches == [[0], [1, 2], [3, 4], [5]]
    await coalescer.close()


async def test_several_calls_in_flight_batch_only_what_waits_for_all_of_them() -> None:
    engine = Engine()
    coalescer = Coalescer(engine.run, in_flight=2)
    engine.hold()
    queued = await _queued([1], into=coalescer)
    queued += await _queued([2], into=coalescer)  # the second call starts at once
    queued += await _queued([3], [4], into=coalescer)  # these wait for either to end
    engine.release.set()
    assert [await task for task in queued] == [[2], [4], [6], [8]]
    assert sorted(map(sorted, engine.batches)) == [[1], [2], [3, 4]]
    await coalescer.close()


async def test_a_refused_request_fails_only_its_own_caller() -> None:
    engine = Engine()
    coalescer = Coalescer(engine.run, isolate=(PermanentError,))
    engine.hold()
    first = asyncio.create_task(coalescer.submit([1]))
    await engine.busy.wait()
    engine.refuse = {13}
    good, bad, other = await _queued([2], [13, 14], [3], into=coalescer)
    engine.release.set()
    await first
    assert await good == [4]
    assert await other == [6]
    with pytest.raises(PermanentError, match="13"):
        await bad
    await coalescer.close()


async def test_an_error_not_isolated_fails_the_whole_batch() -> None:
    engine = Engine()
    coalescer = Coalescer(engine.run)
    engine.hold()
    first = asyncio.create_task(coalescer.submit([1]))
    await engine.busy.wait()
    engine.refuse = {13}
    tasks = await _queued([2], [13], into=coalescer)
    engine.release.set()
    await first
    for task in tasks:
        with pytest.raises(PermanentError):
            await task
    await coalescer.close()


async def test_a_caller_that_gives_up_leaves_the_others_answered() -> None:
    engine = Engine()
    coalescer = Coalescer(engine.run)
    engine.hold()
    first = asyncio.create_task(coalescer.submit([1]))
    await engine.busy.wait()
    gone, kept = await _queued([2], [3], into=coalescer)
    gone.cancel()
    engine.release.set()
    await first
    assert await kept == [6]
    assert gone.cancelled()
    assert engine.batches == [[1], [3]]
    await coalescer.close()


async def test_a_shared_call_runs_outside_its_first_callers_context() -> None:
    # A request's deadline is a context variable (`pymongo.timeout`): the call the next
    # callers share must not carry the first caller's.
    deadline: contextvars.ContextVar[str] = contextvars.ContextVar("deadline", default="none")
    seen: list[str] = []

    async def run(requests: list[int]) -> list[int]:
        seen.append(deadline.get())
        return requests

    coalescer = Coalescer(run)
    deadline.set("the first caller's")
    assert await coalescer.submit([1]) == [1]
    assert seen == ["none"]
    await coalescer.close()


async def test_a_call_whose_callers_all_gave_up_is_cancelled_and_the_queue_goes_on() -> None:
    # As a caller's own call would be when its time limit cancels it: a call left hanging
    # (a database that stopped answering) must not hold up every group queued behind it.
    engine = Engine()
    coalescer = Coalescer(engine.run)
    engine.hold()
    first = asyncio.create_task(coalescer.submit([1]))
    await engine.busy.wait()
    (queued,) = await _queued([2], into=coalescer)
    engine.busy.clear()
    first.cancel()
    await engine.busy.wait()  # the next call started without the first being released
    assert engine.batches == [[1], [2]]
    engine.release.set()
    assert await queued == [4]
    assert first.cancelled()
    await coalescer.close()
