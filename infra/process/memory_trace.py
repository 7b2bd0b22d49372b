"""Memory attribution on request: Python allocations traced, snapshots written on SIGUSR2.

With `memory_trace_frames` above 0 (`RAGLINE_MEMORY_TRACE_FRAMES`) a process answers SIGUSR2:
the first one starts tracing its Python allocations (`tracemalloc`, that many frames each; not
from the process's start, which would slow loading the models down several times and trace
what never changes), and each one writes a snapshot to
`<run_dir>/memory/<process>-<pid>-<n>.tracemalloc` (the first one's is empty), with beside it
(`.malloc.json`) what the C allocator holds: `mallinfo2()`, so that native memory in use (the
model runtimes, the vector store's engine) can be told from memory freed but kept by malloc.
Two snapshots compared (`Snapshot.compare_to`) name the lines whose allocations grew in
between: the soak starts tracing before its warm-up and takes a snapshot when the warm-up ends
and one when the load stops. Tracing costs memory and CPU (a trace for every live block), so
it is off by default and meant for diagnosis.
"""

from __future__ import annotations

import itertools
import json
import logging
import os
import signal
import tracemalloc
from pathlib import Path
from types import FrameType

from infra.process.malloc import malloc_info

log = logging.getLogger(__name__)

SNAPSHOT_SIGNAL = signal.SIGUSR2
SNAPSHOT_SUFFIX = ".tracemalloc"
MALLOC_SUFFIX = ".malloc.json"


def snapshot_dir(run_dir: Path) -> Path:
    """Where the processes of a run directory write their snapshots."""
    return run_dir / "memory"


def trace_memory(frames: int, run_dir: Path, process: str) -> bool:
    """Makes SIGUSR2 start tracing with `frames` frames (the first time) and write a snapshot
    (each time); call from the main thread. Does nothing with `frames` 0; returns whether the
    signal is answered."""
    if frames <= 0:
        return False
    directory = snapshot_dir(run_dir)
    directory.mkdir(parents=True, exist_ok=True)
    taken = itertools.count(1)

    def write_snapshot(_signum: int, _frame: FrameType | None) -> None:
        if not tracemalloc.is_tracing():
            tracemalloc.start(frames)
        stem = directory / f"{process}-{os.getpid()}-{next(taken)}"
        # malloc's figures first: taking the snapshot allocates.
        stem.with_name(stem.name + MALLOC_SUFFIX).write_text(json.dumps(malloc_info()))
        snapshot = tracemalloc.take_snapshot()
        partial = stem.with_name(stem.name + ".partial")
        snapshot.dump(str(partial))
        partial.rename(stem.with_name(stem.name + SNAPSHOT_SUFFIX))  # never read half written
        log.info("memory snapshot written to %s%s", stem, SNAPSHOT_SUFFIX)

    signal.signal(SNAPSHOT_SIGNAL, write_snapshot)
    log.warning(
        "SIGUSR2 starts tracing memory allocations (%d frames) and writes a snapshot", frames
    )
    return True
