"""A process started with `memory_trace_frames` starts tracing when it is first sent SIGUSR2,
and writes a tracemalloc snapshot (and malloc's figures) each time, which the soak's helper
finds; without the setting, nothing is traced."""

from __future__ import annotations

import subprocess
import sys
import time
import tracemalloc
from pathlib import Path

from benchmarks import memory
from infra.process.memory_trace import snapshot_dir, trace_memory

REPO = Path(__file__).resolve().parents[2]
# A process that traces, says so, keeps a list growing, and waits to be stopped.
PROBE = """
import sys, time
from pathlib import Path
from infra.process.memory_trace import trace_memory
assert trace_memory(5, Path(sys.argv[1]), "probe")
print("ready", flush=True)
kept = []
while True:
    kept.append(bytes(4096))
    time.sleep(0.001)
"""


def test_a_traced_process_writes_a_snapshot_on_each_signal(tmp_path: Path) -> None:
    with subprocess.Popen(
        [sys.executable, "-c", PROBE, str(tmp_path)],
        cwd=REPO,
        stdout=subprocess.PIPE,
        text=True,
    ) as probe:
        try:
            assert probe.stdout is not None
            assert probe.stdout.readline().strip() == "ready"
            started = memory.request_snapshots({"probe": probe.pid}, snapshot_dir(tmp_path), 30)
            first = memory.request_snapshots({"probe": probe.pid}, snapshot_dir(tmp_path), 30)
            time.sleep(0.5)
            second = memory.request_snapshots({"probe": probe.pid}, snapshot_dir(tmp_path), 30)
        finally:
            probe.kill()
            probe.wait(10)

    assert set(started) == set(first) == set(second) == {"probe"}
    assert len({started["probe"], first["probe"], second["probe"]}) == 3
    # Tracing began with it: it holds only the blocks allocated while it was taken.
    assert len(tracemalloc.Snapshot.load(str(started["probe"])).traces) < 100
    growers = memory.snapshot_growth(
        tracemalloc.Snapshot.load(str(first["probe"])),
        tracemalloc.Snapshot.load(str(second["probe"])),
    )
    assert growers
    assert growers[0].frames[0] == ("<string>", 9)  # `kept.append(bytes(4096))`
    # What malloc held, written beside each snapshot.
    assert memory.malloc_figures(first["probe"])["in_use"] > 0


def test_without_frames_nothing_is_traced(tmp_path: Path) -> None:
    assert trace_memory(0, tmp_path, "probe") is False
    assert trace_memory(-1, tmp_path, "probe") is False
    assert not tracemalloc.is_tracing()
    assert not snapshot_dir(tmp_path).exists()
