"""The whole stacks the session's modules share (`mechanics_pipeline`, `running_pipeline`):
each starts when a module first needs it and stops as soon as no test after the one just run
needs it, rather than idling to the end of the session.

An idle stack is not free: its API and workers poll Kafka and MongoDB, about a seventh of a core
on this kind of machine (measured with nothing running: 22% once, 14% now, a third of it the
broker). Started by a module early in a
run and kept to the end, each of a worker's stacks used to cost that through every later module,
and both workers started one of each.

A test "after" is one later in the collection's order. That is the order each worker runs its
tests in: under pytest-xdist `make test` hands out whole modules in collection order (`--dist
loadfile`, with the modules of the packaged model's stack as one: `ModelModulesTogether`), and
`put_in_order` keeps each unit's tests together in the collection. A stack stopped too early is
started again by the next module that asks for it, so a wrong guess costs time, never a test.
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pytest
from xdist.scheduler import LoadFileScheduling  # type: ignore[import-untyped]  # no types

from tests.timing import TimeReport

if TYPE_CHECKING:
    from tests.conftest import RunningPipeline

# The fixtures that are a shared stack, by name.
SHARED_STACKS = ("mechanics_pipeline", "running_pipeline")
# The modules on the packaged model's stack (`running_pipeline`), handed out as one (`make test`'s
# scheduler, `ModelModulesTogether`): one worker runs them one after the other, so one such stack
# starts in a run, not one per worker. The scheduler sees only the tests' ids, not their fixtures,
# so the modules are named here; the collection checks the list (`check_model_modules`).
MODEL_MODULES = (
    "tests/e2e/test_bots_and_search.py",
    "tests/e2e/test_evaluations.py",
    "tests/e2e/test_ingest_and_search.py",
    "tests/e2e/test_retrieval_quality.py",
)
MODEL_GROUP = "(the modules on the packaged model's stack)"


def module_of(item: Any) -> str:
    """The path of the test's module, as `tests/e2e/test_x.py`."""
    return str(item.nodeid).split("::", 1)[0]


def unit_of(module: str, together: Sequence[str] = MODEL_MODULES) -> str:
    """The unit a module's tests are handed out in: the module, or `MODEL_GROUP` for the
    modules `together`."""
    return MODEL_GROUP if module in together else module


def check_model_modules(items: list[Any], together: Sequence[str] = MODEL_MODULES) -> None:
    """Fails the run when `together` is not exactly the modules with a test on the packaged
    model's stack."""
    on_model = {module_of(item) for item in items if "running_pipeline" in item.fixturenames}
    collected = {module_of(item) for item in items}
    unlisted = sorted(on_model - set(together))
    idle = sorted(path for path in together if path in collected and path not in on_model)
    if unlisted or idle:
        raise pytest.UsageError(
            "MODEL_MODULES (tests/shared_stacks.py) must name the modules on the packaged "
            f"model's stack: not named {unlisted}, named without a test on it {idle}"
        )


def put_in_order(
    items: list[Any], longest: Sequence[str], together: Sequence[str] = MODEL_MODULES
) -> None:
    """Sorts the tests as the workers take them: the units (`unit_of`) of the `longest`
    modules first, in that order (a unit ranks as its longest module), then the others in the
    order collected; each unit's tests together, each module's in its order."""
    rank: dict[str, tuple[int, int]] = {}
    for index, item in enumerate(items):
        path = module_of(item)
        place = longest.index(path) if path in longest else len(longest)
        first = rank.get(unit_of(path, together), (place, index))
        rank[unit_of(path, together)] = (min(first[0], place), first[1])
    items.sort(key=lambda item: rank[unit_of(module_of(item), together)])


class ModelModulesTogether(LoadFileScheduling):  # type: ignore[misc]  # xdist has no types
    """pytest-xdist's `--dist loadfile` (each module whole to one worker, in collection order),
    with the modules on the packaged model's stack handed out as one. (xdist's own
    `--dist loadgroup` groups by rewriting test ids, which pytest 9.2 no longer lets it do: it
    hands every test out alone, pytest-dev/pytest-xdist#1386.)"""

    def _split_scope(self, nodeid: str) -> str:
        return unit_of(super()._split_scope(nodeid))


@dataclass(eq=False)  # a plugin must be hashable
class SharedStacks:
    """The pytest plugin that keeps the shared stacks: `running(name, start)` gives one,
    starting it if it is not running; each stops after the last test that needs it."""

    report: TimeReport
    stacks: dict[str, RunningPipeline] = field(default_factory=dict)
    _order: dict[int, int] = field(default_factory=dict)
    _last_user: dict[str, int] = field(default_factory=dict)

    def running(self, name: str, start: Callable[[], RunningPipeline]) -> RunningPipeline:
        """The stack `name`, started if it is not running."""
        if name not in self.stacks:
            self.stacks[name] = start()
        return self.stacks[name]

    def stop(self, name: str) -> None:
        """Stops the stack `name` between tests; what its processes cost goes to the time
        report's row of the shared stacks."""
        stack = self.stacks.pop(name)
        with self.report.shared():
            stack.pipeline.stop()

    def stop_all(self) -> None:
        """Stops every stack still running, at the session's end (in the last test's
        tear-down, which the report counts as the shared stacks' already)."""
        while self.stacks:
            self.stacks.popitem()[1].pipeline.stop()

    def _learn(self, items: list[pytest.Item]) -> None:
        self._order = {id(item): index for index, item in enumerate(items)}
        for index, item in enumerate(items):
            for name in SHARED_STACKS:
                if name in getattr(item, "fixturenames", ()):
                    self._last_user[name] = index

    def needed_from(self, items: list[pytest.Item], name: str, item: pytest.Item | None) -> bool:
        """Whether `item` or a test after it needs the stack `name`."""
        if item is None:
            return False
        if id(item) not in self._order:
            self._learn(items)
        return self._order[id(item)] <= self._last_user.get(name, -1)

    @pytest.hookimpl(hookwrapper=True, tryfirst=True)
    def pytest_runtest_protocol(
        self, item: pytest.Item, nextitem: pytest.Item | None
    ) -> Generator[None, Any, None]:
        """After a test, stops each stack that neither the next test nor any after it needs
        (outside the test's own times in the report)."""
        yield
        for name in list(self.stacks):
            if not self.needed_from(item.session.items, name, nextitem):
                self.stop(name)
