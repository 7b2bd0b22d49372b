"""Fixtures of the fault-injection tests: a supervised stack of their own, and its admin."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import httpx
import pytest

from devstack.launcher import Supervisor
from tests.conftest import RunningPipeline, own_stack
from tests.e2e.client import CLIENT_LIMITS, Api

# Settings of the stacks faults are injected into.
FAULT_SETTINGS = {
    # Stages touch a document every 5 s; nothing moving for 20 s is a stall. Shorter, the
    # reconciler's restarts (20 s, 40 s, 80 s of patience) could run out while the consumers
    # of a restarted local broker rejoin, which takes minutes on a busy machine.
    "RAGLINE_INGEST__STALL_AFTER_S": "20",
    # The short deadline keeps the tests quick; more restarts keep the patience before a
    # document is failed long (20 s doubled six times, 42 minutes; in production 600 s doubled
    # three times, 2.5 hours), since what is checked is recovery, not giving up.
    "RAGLINE_RELAY__MAX_REDRIVES": "6",
    "RAGLINE_RELAY__RECONCILE_EVERY_S": "1",
}


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningPipeline]:
    """A stack whose dead processes are started again, as `make run` does."""
    with own_stack(tmp_path_factory.mktemp("faults"), FAULT_SETTINGS) as running:
        yield running


@pytest.fixture(scope="module")
def supervisor(stack: RunningPipeline) -> Iterator[Supervisor]:
    """Starts the stack's processes again when they die (stopped before the stack is)."""
    with Supervisor(stack.services, stack.pipeline, interval_s=0.2) as watching:
        yield watching


@pytest.fixture
async def api(stack: RunningPipeline) -> AsyncIterator[Api]:
    """The admin of tenant `default`."""
    async with httpx.AsyncClient(base_url=stack.url, timeout=30, limits=CLIENT_LIMITS) as http:
        yield Api(http, stack, stack.admin_token)


@pytest.fixture(scope="module")
async def bot(stack: RunningPipeline) -> str:
    """A bot over a KB with one known passage ("when does the harbour ferry leave"),
    asked throughout the faults."""

    async with httpx.AsyncClient(base_url=stack.url, timeout=30, limits=CLIENT_LIMITS) as http:
        api = Api(http, stack, stack.admin_token)
        kb = await api.create_kb("Timetable")
        doc = await api.upload(
            kb["id"], "ferry.md", b"# Ferry\n\nThe harbour ferry leaves at nine."
        )
        await api.wait_final(kb["id"], doc["id"])
        response = await http.post(
            "/api/v1/bots",
            json={"name": "harbour", "knowledge": {"enabled": True, "kb_ids": [kb["id"]]}},
            headers=api.auth,
        )
        assert response.status_code == 201, response.text
        return str(response.json()["id"])
