"""Periodic work (`core.periodic`): it runs again after a failure, and stopping it ends the run
under way before `stop()` returns. Pure asyncio, well under a second."""

from __future__ import annotations

import asyncio

import pytest

from core.periodic import Periodic


async def test_runs_go_on_after_a_run_that_raises(caplog: pytest.LogCaptureFixture) -> None:
    runs = 0
    third = asyncio.Event()

    async def work() -> None:
        nonlocal runs
        runs += 1
        if runs == 3:
            third.set()
        if runs == 1:
            raise RuntimeError("the first run breaks")

    async with Periodic("test work", 0.001, work, at_once=True):
        await asyncio.wait_for(third.wait(), 5)
    assert runs >= 3
    assert "test work failed" in caplog.text
    assert "the first run breaks" in caplog.text


async def test_stop_ends_the_run_under_way_and_no_run_follows() -> None:
    started = asyncio.Event()
    cancelled = asyncio.Event()
    runs = 0

    async def work() -> None:
        nonlocal runs
        runs += 1
        started.set()
        try:
            await asyncio.Event().wait()  # a run that would never end by itself
        except asyncio.CancelledError:
            cancelled.set()
            raise

    periodic = Periodic("long work", 0.001, work, at_once=True)
    periodic.start()
    await asyncio.wait_for(started.wait(), 5)
    await periodic.stop()
    assert cancelled.is_set()
    assert runs == 1
    assert all(task.get_name() != "long work" for task in asyncio.all_tasks())


async def test_without_at_once_the_first_run_waits_one_period() -> None:
    ran = asyncio.Event()
    periodic = Periodic("later work", 3600, lambda: _set(ran))
    async with periodic:
        await asyncio.sleep(0)
        assert not ran.is_set()
    ran_at_once = asyncio.Event()
    async with Periodic("work at once", 3600, lambda: _set(ran_at_once), at_once=True):
        await asyncio.wait_for(ran_at_once.wait(), 5)


async def _set(event: asyncio.Event) -> None:
    event.set()
