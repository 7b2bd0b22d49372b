"""Freezing a server or worker the way a hang does: SIGSTOP, and the wait until it holds.

`os.kill(pid, SIGSTOP)` returns before the process stops. The kernel stops a process's threads
once one of them is scheduled to take the signal, so on a busy machine its other threads go on
for milliseconds and answer what arrives meanwhile: a test that "froze" a database and then
wrote would see the write answered. `freeze` returns only once every thread is stopped.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from pathlib import Path

# How long a SIGSTOP may take to hold, on the busiest machine the suite runs on.
STOP_BOUND_S = 5.0


def thread_states(pid: int) -> dict[int, str]:
    """The state of each thread of a process, from `/proc` ("T": stopped by a signal)."""
    states = {}
    for task in Path(f"/proc/{pid}/task").iterdir():
        with contextlib.suppress(FileNotFoundError):  # a thread that has just ended
            # "tid (name) state ...": the name may hold spaces and parentheses.
            states[int(task.name)] = (task / "stat").read_text().rsplit(")", 1)[1].split()[0]
    return states


async def until_stopped(pid: int) -> None:
    """Waits until every thread of the process is stopped (SIGSTOP has taken hold)."""
    states = thread_states(pid)
    try:
        async with asyncio.timeout(STOP_BOUND_S):
            while set(states.values()) != {"T"}:
                await asyncio.sleep(0.01)
                states = thread_states(pid)
    except TimeoutError:
        raise AssertionError(
            f"process {pid} not stopped {STOP_BOUND_S} s after SIGSTOP: {states}"
        ) from None


async def freeze(pid: int) -> None:
    """Stops the process and returns once all of it is stopped."""
    os.kill(pid, signal.SIGSTOP)
    await until_stopped(pid)
