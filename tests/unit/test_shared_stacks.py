"""The order the suite's workers take the tests in, and when a shared stack stops
(`tests/shared_stacks.py`): pure logic on stand-ins for pytest's items and a stack. Milliseconds.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from tests.shared_stacks import (
    MODEL_GROUP,
    SharedStacks,
    check_model_modules,
    put_in_order,
    unit_of,
)
from tests.timing import SESSION_ROW, TimeReport


def item(nodeid: str, *fixtures: str) -> Any:
    return SimpleNamespace(nodeid=nodeid, fixturenames=["request", *fixtures])


class Stack:
    """A stand-in for a running stack: counts its stops."""

    def __init__(self) -> None:
        self.stops = 0
        self.pipeline = self

    def stop(self) -> None:
        self.stops += 1


def test_the_longest_go_first_and_the_model_modules_go_together() -> None:
    items = [
        item("tests/e2e/test_a.py::test_1", "mechanics_pipeline"),
        item("tests/e2e/test_b.py::test_1", "running_pipeline"),
        item("tests/e2e/test_b.py::test_2"),  # a test of a model module without the stack
        item("tests/e2e/test_c.py::test_1"),
        item("tests/e2e/test_d.py::test_1", "running_pipeline"),
        item("tests/e2e/test_e.py::test_1"),
        item("tests/e2e/test_e.py::test_2"),
        item("tests/unit/test_f.py::test_1"),
    ]
    together = ["tests/e2e/test_b.py", "tests/e2e/test_d.py"]
    check_model_modules(items, together)
    put_in_order(items, ["tests/e2e/test_e.py", "tests/e2e/test_d.py"], together)

    assert [i.nodeid for i in items] == [
        "tests/e2e/test_e.py::test_1",
        "tests/e2e/test_e.py::test_2",
        # The model's modules rank as test_d, the longest of them; they keep their order.
        "tests/e2e/test_b.py::test_1",
        "tests/e2e/test_b.py::test_2",
        "tests/e2e/test_d.py::test_1",
        "tests/e2e/test_a.py::test_1",
        "tests/e2e/test_c.py::test_1",
        "tests/unit/test_f.py::test_1",
    ]
    # The scheduler hands them out as one unit, every other module alone.
    assert unit_of("tests/e2e/test_b.py", together) == MODEL_GROUP
    assert unit_of("tests/e2e/test_d.py", together) == MODEL_GROUP
    assert unit_of("tests/e2e/test_a.py", together) == "tests/e2e/test_a.py"


def test_the_model_modules_named_must_be_those_on_the_model_stack() -> None:
    items = [
        item("tests/e2e/test_a.py::test_1", "running_pipeline"),
        item("tests/e2e/test_b.py::test_1", "mechanics_pipeline"),
    ]
    with pytest.raises(pytest.UsageError, match=r"not named \['tests/e2e/test_a.py'\]"):
        check_model_modules(items, [])
    with pytest.raises(pytest.UsageError, match=r"without a test on it \['tests/e2e/test_b.py'\]"):
        check_model_modules(items, ["tests/e2e/test_a.py", "tests/e2e/test_b.py"])
    # The packaged list matches this suite (a module run alone is checked as collected).
    check_model_modules(items, ["tests/e2e/test_a.py", "tests/e2e/test_c.py"])


def run(plugin: SharedStacks, items: list[Any], index: int) -> None:
    """Runs pytest's protocol hook of the plugin around the test `items[index]`."""
    nextitem = items[index + 1] if index + 1 < len(items) else None
    hook = plugin.pytest_runtest_protocol(items[index], nextitem)
    next(hook)
    with pytest.raises(StopIteration):
        hook.send(None)


def test_a_stack_stops_after_the_last_test_that_needs_it_and_starts_again_if_asked() -> None:
    session = SimpleNamespace(items=[])
    items = [
        item("tests/e2e/test_a.py::test_1", "mechanics_pipeline"),
        item("tests/e2e/test_a.py::test_2"),
        item("tests/e2e/test_b.py::test_1", "mechanics_pipeline"),
        item("tests/unit/test_c.py::test_1"),
        item("tests/unit/test_c.py::test_2"),
    ]
    for each in items:
        each.session = session
    session.items = items
    report = TimeReport(config=None)  # type: ignore[arg-type]  # only its rows are used
    plugin = SharedStacks(report)
    started: list[Stack] = []

    def start() -> Any:
        started.append(Stack())
        return started[-1]

    first: Any = plugin.running("mechanics_pipeline", start)
    assert first is started[0]
    for index in range(3):
        # test_a.py::test_2 does not need it, but a test after it does.
        run(plugin, items, index)
        assert started[0].stops == (1 if index == 2 else 0), index
    assert plugin.stacks == {}
    # What the stop took is the shared stacks' row of the time report, not a module's.
    assert list(report.modules) == [SESSION_ROW]

    run(plugin, items, 3)
    # Asked again (a guess gone wrong), it starts again and stops at the end.
    second: Any = plugin.running("mechanics_pipeline", start)
    assert second is started[1]
    run(plugin, items, 4)
    assert [stack.stops for stack in started] == [1, 1]
