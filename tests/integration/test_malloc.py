"""Memory a thread freed, which malloc keeps in the thread's arena, goes back to the system
when asked (`infra.process.malloc`), as the embed worker asks after each batch. Each check runs in a
process of its own (about a second each)."""

from __future__ import annotations

import asyncio
import re
import subprocess
import sys
import threading
from pathlib import Path

from prometheus_client import REGISTRY

import infra.process.metrics  # noqa: F401  (defines the gauges read below)
from infra.process.malloc import malloc_info, release_free_memory, releasing_free_memory

MB = 1024 * 1024
REPO = Path(__file__).resolve().parents[2]


def private_mb() -> float:
    """This process's private resident memory (RssAnon), in MB."""
    status = Path("/proc/self/status").read_text()
    match = re.search(r"RssAnon:\s+(\d+) kB", status)
    assert match is not None
    return int(match.group(1)) / 1024


def fragment(kept: list[bytearray]) -> None:
    """Leaves ~60 MB freed in a thread's malloc arena, held in place by small blocks kept
    between the freed ones (fragmentation)."""

    def churn() -> None:
        # Blocks under malloc's mmap threshold come from the thread's arena.
        blocks = []
        for _ in range(600):
            blocks.append(bytearray(100_000))
            kept.append(bytearray(1000))
        blocks.clear()

    thread = threading.Thread(target=churn)
    thread.start()
    thread.join()


def _in_a_new_process(check: str) -> None:
    """Runs one of the checks below in a new Python process. Where a new thread's blocks land
    depends on the process's arenas and heap, which in a pytest worker every earlier test has
    shaped (one fresh-clone run saw 15 MB given back there instead of 60)."""
    script = (
        "import asyncio, inspect\n"
        "from tests.integration import test_malloc\n"
        f"result = test_malloc.{check}()\n"
        "if inspect.iscoroutine(result):\n"
        "    asyncio.run(result)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=REPO, capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr[-3000:]


def freed_memory_is_given_back() -> None:
    """A thread's freed blocks go back to the system when asked."""
    kept: list[bytearray] = []
    fragment(kept)
    before = private_mb()
    assert malloc_info()["free"] > 40 * MB

    assert release_free_memory()

    assert before - private_mb() > 40, (before, private_mb())


async def freed_memory_is_given_back_by_itself() -> None:
    """The same, by the process's own periodic release."""
    kept: list[bytearray] = []
    async with releasing_free_memory(0.05):
        fragment(kept)
        before = private_mb()
        await asyncio.sleep(0.5)
        after = private_mb()

    assert before - after > 40, (before, after)


def test_freed_memory_kept_by_a_threads_arena_is_given_back() -> None:
    _in_a_new_process("freed_memory_is_given_back")


def test_a_process_gives_free_memory_back_by_itself_while_it_runs() -> None:
    _in_a_new_process("freed_memory_is_given_back_by_itself")


def test_the_metrics_show_what_malloc_and_the_interpreter_hold() -> None:
    """What ops read to tell live growth from fragmentation (in this process: milliseconds)."""

    def held() -> dict[str, float]:
        figures = {"blocks": REGISTRY.get_sample_value("ragline_python_allocated_blocks") or 0}
        for kind in ("in_use", "mmapped", "free"):
            figures[kind] = REGISTRY.get_sample_value("ragline_malloc_bytes", {"kind": kind}) or 0
        return figures

    before = held()
    kept = [bytearray(100_000) for _ in range(500)]
    objects = [object() for _ in range(20_000)]
    during = held()
    del kept, objects
    after = held()

    live = (during["in_use"] + during["mmapped"]) - (before["in_use"] + before["mmapped"])
    assert live > 45 * MB, (before, during)
    assert during["blocks"] - before["blocks"] >= 20_000
    assert (after["in_use"] + after["mmapped"]) - (before["in_use"] + before["mmapped"]) < 5 * MB
    assert after["blocks"] - before["blocks"] < 1_000
