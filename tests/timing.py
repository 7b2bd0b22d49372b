"""Where a test run's time goes: a report per module, printed at the end of every run and
written to `.ragline/test-times.md`.

Per module: its tests, the seconds its set-up, calls and tear-down took (fixtures included, so
a module's own stack shows in its set-up and tear-down), the CPU seconds of the pytest process
meanwhile, and the CPU seconds of the processes it started that ended meanwhile (its stack's
API, workers and servers, the benchmarks and CLIs it ran: `RUSAGE_CHILDREN`, which counts a
process once it has ended and been waited for). The stacks and servers a worker's modules share
are one row of their own, whenever they end (the servers with the session, a shared stack once
no later test needs it: `tests/shared_stacks.py`). Under pytest-xdist each worker
measures its own modules and the controller puts the rows together.
"""

from __future__ import annotations

import contextlib
import json
import resource
import time
from collections.abc import Generator, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import pytest

REPORT = Path(".ragline") / "test-times.md"
SESSION_ROW = "(shared stacks and servers)"
PRINTED_ROWS = 15


@dataclass
class ModuleTimes:
    """What one module cost."""

    tests: int = 0
    setup_s: float = 0.0
    call_s: float = 0.0
    teardown_s: float = 0.0
    cpu_s: float = 0.0
    children_cpu_s: float = 0.0

    @property
    def wall_s(self) -> float:
        """Set-up, calls and tear-down together."""
        return self.setup_s + self.call_s + self.teardown_s

    def add(self, other: ModuleTimes) -> None:
        """Adds another worker's figures of the same row."""
        for name, value in asdict(other).items():
            setattr(self, name, getattr(self, name) + value)


def _cpu() -> tuple[float, float]:
    """CPU seconds (user and system) of this process and of its ended children."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime, children.ru_utime + children.ru_stime


@dataclass(eq=False)  # a plugin must be hashable
class TimeReport:
    """The pytest plugin: measures in each process, reports in the one that prints."""

    config: pytest.Config
    modules: dict[str, ModuleTimes] = field(default_factory=dict)

    def _row(self, nodeid: str) -> ModuleTimes:
        return self.modules.setdefault(nodeid.split("::", 1)[0], ModuleTimes())

    def _charge(self, row: ModuleTimes, before: tuple[float, float]) -> None:
        cpu, children = _cpu()
        row.cpu_s += cpu - before[0]
        row.children_cpu_s += children - before[1]

    @contextlib.contextmanager
    def shared(self) -> Iterator[None]:
        """Charges what the block takes to the row of the shared stacks and servers, as a
        tear-down (a shared stack stopped between two tests: `tests/shared_stacks.py`)."""
        before, started = _cpu(), time.perf_counter()
        try:
            yield
        finally:
            row = self.modules.setdefault(SESSION_ROW, ModuleTimes())
            row.teardown_s += time.perf_counter() - started
            self._charge(row, before)

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_setup(self, item: pytest.Item) -> Generator[None, Any, None]:
        """A test's set-up, its fixtures' included."""
        before, started = _cpu(), time.perf_counter()
        yield
        row = self._row(item.nodeid)
        row.tests += 1
        row.setup_s += time.perf_counter() - started
        self._charge(row, before)

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_call(self, item: pytest.Item) -> Generator[None, Any, None]:
        """A test's call."""
        before, started = _cpu(), time.perf_counter()
        yield
        row = self._row(item.nodeid)
        row.call_s += time.perf_counter() - started
        self._charge(row, before)

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_teardown(
        self, item: pytest.Item, nextitem: pytest.Item | None
    ) -> Generator[None, Any, None]:
        """A test's tear-down: with the last test of a worker, the session's fixtures end
        too, and that is the session's row."""
        before, started = _cpu(), time.perf_counter()
        yield
        row = self._row(item.nodeid if nextitem is not None else SESSION_ROW)
        row.teardown_s += time.perf_counter() - started
        self._charge(row, before)

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        """A worker hands its rows to the controller."""
        output = getattr(self.config, "workeroutput", None)
        if output is not None:
            output["ragline_times"] = json.dumps({k: asdict(v) for k, v in self.modules.items()})

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node: Any, error: Any) -> None:
        """The controller takes a worker's rows (pytest-xdist's hook)."""
        rows = json.loads(getattr(node, "workeroutput", {}).get("ragline_times", "{}"))
        for name, figures in rows.items():
            self.modules.setdefault(name, ModuleTimes()).add(ModuleTimes(**figures))

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        """Prints the costliest modules and writes the whole table."""
        if getattr(self.config, "workeroutput", None) is not None or not self.modules:
            return
        lines = table(self.modules)
        path = self.config.rootpath / REPORT
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("\n".join(lines) + "\n")
        terminalreporter.write_sep("-", f"where the time went (all modules: {REPORT})")
        for line in [*lines[:-1][: 2 + PRINTED_ROWS], lines[-1]]:
            terminalreporter.write_line(line)


def table(modules: dict[str, ModuleTimes]) -> list[str]:
    """A Markdown table of the rows, costliest in CPU first, and their total last."""
    total = ModuleTimes()
    for row in modules.values():
        total.add(row)
    ordered = sorted(
        modules.items(), key=lambda kv: kv[1].cpu_s + kv[1].children_cpu_s, reverse=True
    )
    lines = [
        "| module | tests | set-up s | calls s | tear-down s | pytest CPU s | processes' CPU s |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for name, row in [*ordered, ("total", total)]:
        lines.append(
            f"| {name} | {row.tests} | {row.setup_s:.1f} | {row.call_s:.1f} | "
            f"{row.teardown_s:.1f} | {row.cpu_s:.1f} | {row.children_cpu_s:.1f} |"
        )
    return lines
