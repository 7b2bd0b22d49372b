"""The test run's time report (`tests/timing.py`): rows by cost, workers' rows added up.
Costs milliseconds."""

from __future__ import annotations

from tests.timing import ModuleTimes, table


def test_rows_come_costliest_first_with_their_total_last() -> None:
    rows = {
        "tests/unit/test_a.py": ModuleTimes(tests=3, call_s=0.5, cpu_s=0.4),
        "tests/e2e/test_b.py": ModuleTimes(
            tests=2, setup_s=9.0, call_s=20.0, cpu_s=3.0, children_cpu_s=40.0
        ),
    }
    lines = table(rows)
    assert lines[0].startswith("| module | tests | set-up s | calls s |")
    assert lines[2] == "| tests/e2e/test_b.py | 2 | 9.0 | 20.0 | 0.0 | 3.0 | 40.0 |"
    assert lines[3] == "| tests/unit/test_a.py | 3 | 0.0 | 0.5 | 0.0 | 0.4 | 0.0 |"
    assert lines[-1] == "| total | 5 | 9.0 | 20.5 | 0.0 | 3.4 | 40.0 |"


def test_a_modules_rows_from_two_workers_add_up() -> None:
    row = ModuleTimes(tests=1, setup_s=1.0, cpu_s=2.0)
    row.add(ModuleTimes(tests=2, teardown_s=0.5, children_cpu_s=7.0))
    assert row == ModuleTimes(tests=3, setup_s=1.0, teardown_s=0.5, cpu_s=2.0, children_cpu_s=7.0)
    assert row.wall_s == 1.5
