"""Work done every so often in the background: the one way Ragline runs a periodic task and
stops it."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from types import TracebackType

log = logging.getLogger(__name__)


class Periodic:
    """Runs `work` every `period_s` seconds in a task of its own, from `start()` (or entering
    it with `async with`) until `await stop()` (or leaving it). The first run comes after one
    period, or at once with `at_once`. A run that raises is logged and the next one comes as
    planned: an expected failure (a service down) is best logged by `work` itself, in its own
    words."""

    def __init__(
        self,
        name: str,
        period_s: float,
        work: Callable[[], Awaitable[object]],
        *,
        at_once: bool = False,
    ) -> None:
        self.name = name
        self._period_s = period_s
        self._work = work
        self._at_once = at_once
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        """Starts the runs (again, once stopped)."""
        if self._task is None:
            self._task = asyncio.create_task(self._run(), name=self.name)

    async def stop(self) -> None:
        """Cancels the run under way, if any, and returns once the task has ended."""
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def __aenter__(self) -> Periodic:
        self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.stop()

    async def _run(self) -> None:
        if not self._at_once:
            await asyncio.sleep(self._period_s)
        while True:
            try:
                await self._work()
            except Exception:
                log.exception("%s failed; it runs again in %g s", self.name, self._period_s)
            await asyncio.sleep(self._period_s)
