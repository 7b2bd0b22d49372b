"""What the machine gave a long run: its CPU accounts between two readings and each process's
share (pure logic on written figures), and the fixed probe's work (about 0.2 CPU-s)."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks.machine import MachineTimes, cpu_pct_between, fixed_work


def stat_file(tmp_path: Path, name: str, line: str) -> Path:
    path = tmp_path / name
    path.write_text(line + "\ncpu0 1 2 3 4 5 6 7 8 0 0\n")
    return path


def test_busy_and_steal_are_shares_of_all_the_time_between_two_readings(tmp_path: Path) -> None:
    # user nice system idle iowait irq softirq steal guest guest_nice
    before = MachineTimes.read(stat_file(tmp_path, "a", "cpu  100 0 50 800 20 0 10 20 0 0"))
    after = MachineTimes.read(stat_file(tmp_path, "b", "cpu  400 0 100 1100 40 0 30 50 0 0"))
    # Busy 300 + 50 + 20 = 370 ticks, idle 300 + 20 = 320, steal 30: 720 in all.
    assert after.since(before) == {"busy_pct": 51.4, "steal_pct": 4.17}
    assert before.since(before) == {"busy_pct": 0.0, "steal_pct": 0.0}


def test_each_process_cpu_is_its_seconds_over_the_wall_in_percent_of_a_core() -> None:
    before = {"api": 10.0, "embed-1": 4.0, "_wall": 100.0}
    after = {"api": 16.0, "embed-1": 4.5, "new": 1.2, "_wall": 160.0}
    assert cpu_pct_between(before, after, 60.0) == {"api": 10.0, "embed-1": 0.8, "new": 2.0}
    assert cpu_pct_between(before, after, 0.0) == {}


def test_the_fixed_work_takes_cpu_time_and_no_less_wall_time() -> None:
    wall, cpu = fixed_work(size=200_000, repeats=3)
    assert cpu > 0
    assert wall >= cpu * 0.9  # a wall below the CPU would mean the clocks were misread


def test_a_stat_file_without_a_cpu_line_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="not enough values"):
        MachineTimes.read(stat_file(tmp_path, "c", "cpu  1 2 3"))
