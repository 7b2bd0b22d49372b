"""Requests in micro-batches: callers that wait at the same moment share one call.

Used for query embeddings (`infra.embedding.batching`), the stores' rankings
(`infra.vectorstore`), and the pipeline's MongoDB round trips and model calls
(`infra.mongo.document_repository`, `infra.mongo.lifecycle`, `infra.mongo.blob_store`,
`workers.embed.handler`, `workers.records.coalescing`).

A caller submits its group of requests (a search's dense, sparse and probe queries) and waits;
groups queue while a call is running, and the next call takes every group that queued (up to
`max_batch` groups), flattened into one batch, and hands each caller back its own answers. A
lone group goes out at once: the queue only forms while the engine is busy, so nothing waits
when it is idle. `max_wait_s` adds an optional short wait to collect a batch before the first
call of a burst. `in_flight` calls may run at once (a server answers several in parallel);
further groups queue for the first call to finish.

A shared call belongs to none of its callers: it runs in a context of its own, so one caller's
context variables (a request's `pymongo.timeout` deadline) never bound the others' requests.
It is cancelled only when every one of its callers has given up (cancelled: a time limit), as
a caller's own call would be; the groups queued behind it go on.
"""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import Awaitable, Callable, Sequence
from typing import Generic, TypeVar

RequestT = TypeVar("RequestT")
AnswerT = TypeVar("AnswerT")

RunBatch = Callable[[list[RequestT]], Awaitable[Sequence[AnswerT]]]


class _Group(Generic[RequestT, AnswerT]):
    __slots__ = ("future", "requests")

    def __init__(self, requests: list[RequestT], future: asyncio.Future[list[AnswerT]]) -> None:
        self.requests = requests
        self.future = future


class Coalescer(Generic[RequestT, AnswerT]):
    """Runs groups of requests through `run` (one answer per request, in order), batching the
    groups that arrive while earlier calls are running."""

    def __init__(
        self,
        run: RunBatch[RequestT, AnswerT],
        max_batch: int = 32,
        max_wait_s: float = 0.0,
        in_flight: int = 1,
        isolate: tuple[type[Exception], ...] = (),
    ) -> None:
        """`isolate`: errors after which each group of a failed batch is run alone, so that a
        request the engine rejects fails only its own caller."""
        self._run = run
        self._max_batch = max(1, max_batch)
        self._max_wait_s = max_wait_s
        self._in_flight = max(1, in_flight)
        self._isolate = isolate
        self._queue: list[_Group[RequestT, AnswerT]] = []
        self._workers: set[asyncio.Task[None]] = set()

    async def submit(self, requests: Sequence[RequestT]) -> list[AnswerT]:
        """The answers to `requests`, in order, from a call shared with the groups beside it."""
        if not requests:
            return []
        future: asyncio.Future[list[AnswerT]] = asyncio.get_running_loop().create_future()
        self._queue.append(_Group(list(requests), future))
        # A finished worker may still be in the set until its done-callback runs.
        if sum(1 for worker in self._workers if not worker.done()) < self._in_flight:
            worker = asyncio.create_task(self._drain(), context=contextvars.Context())
            self._workers.add(worker)
            worker.add_done_callback(self._workers.discard)
        return await future

    async def _drain(self) -> None:
        while self._queue:
            if self._max_wait_s and len(self._queue) < self._max_batch:
                await asyncio.sleep(self._max_wait_s)
            batch, self._queue = self._queue[: self._max_batch], self._queue[self._max_batch :]
            waiting = [group for group in batch if not group.future.done()]
            if waiting:
                await self._answer(waiting)

    async def _answer(self, groups: list[_Group[RequestT, AnswerT]]) -> None:
        call = asyncio.ensure_future(
            self._call([request for group in groups for request in group.requests])
        )

        def gave_up(_: asyncio.Future[list[AnswerT]]) -> None:
            if all(group.future.cancelled() for group in groups):
                call.cancel()

        for group in groups:
            group.future.add_done_callback(gave_up)
        try:
            answers = await call
        except asyncio.CancelledError:
            task = asyncio.current_task()
            if call.cancelled() and task is not None and not task.cancelling():
                return  # every caller gave up (a time limit): the queue goes on
            for group in groups:
                group.future.cancel()
            raise
        except Exception as exc:
            if len(groups) > 1 and isinstance(exc, self._isolate):
                for group in groups:
                    await self._answer([group])
                return
            for group in groups:
                if not group.future.done():
                    group.future.set_exception(exc)
            return
        start = 0
        for group in groups:
            end = start + len(group.requests)
            if not group.future.done():
                group.future.set_result(answers[start:end])
            start = end

    async def _call(self, requests: list[RequestT]) -> list[AnswerT]:
        answers = list(await self._run(requests))
        if len(answers) != len(requests):
            raise RuntimeError(f"a batch of {len(requests)} requests got {len(answers)} answers")
        return answers

    async def close(self) -> None:
        """Waits for the calls in progress (queued groups are still answered)."""
        while self._workers:
            await asyncio.gather(*self._workers, return_exceptions=True)
