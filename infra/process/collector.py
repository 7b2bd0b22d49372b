"""The interpreter's garbage collector, kept out of a request's way. What a process makes while
it starts (its modules, the model, the store's tables: about 690,000 objects in the API) lives
as long as the process, yet a full collection walks all of it: 130-280 ms measured, many
searches' whole budget. So the API freezes what it made while starting out of the collector's
reach once it is ready (`freeze_startup`), and every process measures each collection's pause
(`ragline_gc_pause_seconds`)."""

from __future__ import annotations

import gc
import time
from typing import Any

from infra.process.metrics import GC_FROZEN_OBJECTS, GC_PAUSES

_began = 0.0


def freeze_startup() -> int:
    """Collects once, then moves every object alive into the collector's permanent generation,
    which it never walks; how many there are."""
    gc.collect()
    gc.freeze()
    frozen = gc.get_freeze_count()
    GC_FROZEN_OBJECTS.set(frozen)
    return frozen


def measure_pauses() -> None:
    """Measures the pause of every collection from now on (once per process)."""
    if _on_collection not in gc.callbacks:
        gc.callbacks.append(_on_collection)


def _on_collection(phase: str, info: dict[str, Any]) -> None:
    global _began
    if phase == "start":
        _began = time.perf_counter()
    else:
        GC_PAUSES.labels(str(info["generation"])).observe(time.perf_counter() - _began)
