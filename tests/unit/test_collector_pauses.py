"""Every garbage collection's pause is measured, by generation (pure: the interpreter's own
collector; no I/O; milliseconds)."""

from __future__ import annotations

import gc

from prometheus_client import REGISTRY

from infra.process.collector import measure_pauses


def _collections(generation: int) -> float:
    value = REGISTRY.get_sample_value(
        "ragline_gc_pause_seconds_count", {"generation": str(generation)}
    )
    return value or 0.0


def test_each_collection_is_counted_with_its_pause_once() -> None:
    measure_pauses()
    measure_pauses()  # a second call adds no second measurement
    before = _collections(2)
    gc.collect()
    assert _collections(2) == before + 1
    before = _collections(0)
    gc.collect(0)
    assert _collections(0) == before + 1
    total = REGISTRY.get_sample_value("ragline_gc_pause_seconds_sum", {"generation": "2"})
    assert total is not None
    assert total > 0
