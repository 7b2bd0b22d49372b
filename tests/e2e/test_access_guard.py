"""The access guard, property-tested: a bot never gets a chunk it may not read.

A world of three tenants, each with two active KBs and a disabled one, every KB holding one
document that matches the query. For random bots (tenant, attached KBs, knowledge on or off)
and random requests (KB ids of any tenant, unknown ones, or none), the answer holds exactly the
KBs that are attached to the bot, its tenant's, active, and requested.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass, field

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from infra.mongo.client import connect
from infra.mongo.token_repository import TokenRepository
from schemas.domain import Role
from tests.conftest import RunningPipeline, unique

pytestmark = pytest.mark.e2e

QUERY = "What is the guard phrase?"


@dataclass
class Tenant:
    """A tenant's admin client, its KBs, and a bot to reconfigure."""

    name: str
    http: httpx.Client
    active: list[str] = field(default_factory=list)
    disabled: list[str] = field(default_factory=list)
    bot_id: str = ""


@dataclass
class World:
    """The tenants and the search caller."""

    tenants: list[Tenant]
    search: httpx.Client

    def all_kbs(self) -> list[str]:
        return [kb for t in self.tenants for kb in t.active + t.disabled]


def _token(running: RunningPipeline, tenant: str) -> str:
    import asyncio

    async def issue() -> str:
        client = connect(running.settings().mongo)
        tokens = TokenRepository(client[running.database], "", "default")
        _, token = await tokens.issue(tenant, Role.ADMIN, "guard test")
        await client.close()
        return token

    return asyncio.run(issue())


def _wait_indexed(http: httpx.Client, kb_id: str, document_id: str) -> None:
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        status = http.get(f"/api/v1/knowledge-bases/{kb_id}/documents/{document_id}").json()
        if status["parse_status"] == "indexed":
            return
        assert status["parse_status"] != "failed", status
        time.sleep(0.2)
    raise AssertionError(f"{document_id} not indexed")


@pytest.fixture(scope="module")
def world(stack: RunningPipeline) -> Iterator[World]:
    """Three tenants with their KBs and bots, all documents indexed."""
    tenants = []
    for _ in range(3):
        name = unique("tenant")
        token = _token(stack, name)
        http = httpx.Client(
            base_url=stack.url, headers={"Authorization": f"Bearer {token}"}, timeout=30
        )
        tenant = Tenant(name, http)
        pending = []
        for number in range(3):
            kb = http.post("/api/v1/knowledge-bases", json={"name": f"KB {number}"}).json()["id"]
            text = f"# {kb}\n\nThe guard phrase is saffron lantern. This is knowledge base {kb}."
            doc = http.post(
                f"/api/v1/knowledge-bases/{kb}/documents",
                files={"file": ("guard.md", text.encode())},
            ).json()["id"]
            pending.append((kb, doc))
        for kb, doc in pending:
            _wait_indexed(http, kb, doc)
        tenant.active = [kb for kb, _ in pending[:2]]
        tenant.disabled = [pending[2][0]]
        assert http.delete(f"/api/v1/knowledge-bases/{tenant.disabled[0]}").status_code == 200
        bot = http.post("/api/v1/bots", json={"name": "guarded", "knowledge": {}})
        tenant.bot_id = bot.json()["id"]
        tenants.append(tenant)
    search = httpx.Client(
        base_url=stack.url,
        headers={"X-Internal-Secret": stack.internal_secret},
        timeout=30,
    )
    yield World(tenants, search)
    for tenant in tenants:
        tenant.http.close()
    search.close()


@st.composite
def scenarios(draw: st.DrawFn, world: World) -> tuple[Tenant, bool, list[str], list[str] | None]:
    tenant = draw(st.sampled_from(world.tenants))
    own = tenant.active + tenant.disabled
    attached = draw(st.lists(st.sampled_from(own), unique=True))
    enabled = draw(st.booleans())
    requested = draw(
        st.one_of(
            st.none(),
            st.lists(st.sampled_from([*world.all_kbs(), "kb_does_not_exist"]), max_size=6),
        )
    )
    return tenant, enabled, attached, requested


def test_a_bot_sees_exactly_its_attached_active_requested_kbs(world: World) -> None:
    @settings(
        max_examples=40,
        deadline=None,
        suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    )
    @given(scenarios(world))
    def check(scenario: tuple[Tenant, bool, list[str], list[str] | None]) -> None:
        tenant, enabled, attached, requested = scenario
        response = tenant.http.patch(
            f"/api/v1/bots/{tenant.bot_id}",
            json={
                "knowledge": {
                    "enabled": enabled,
                    "kb_ids": attached,
                    "score_threshold": 0.0,
                    "top_k": 10,
                }
            },
        )
        assert response.status_code == 200, response.text
        body: dict[str, object] = {"bot_id": tenant.bot_id, "session_id": "s", "query": QUERY}
        if requested is not None:
            body["kb_ids"] = requested
        answer = world.search.post("/api/v1/internal/knowledge/search", json=body)
        assert answer.status_code == 200, answer.text
        hits = answer.json()["hits"]
        # The KBs hold near-identical texts: copies fold into one hit and are listed in
        # `also_in`, which must obey the guard just the same.
        seen = {hit["kb_id"] for hit in hits} | {
            copy["kb_id"] for hit in hits for copy in hit["also_in"]
        }
        allowed = set(attached) & set(tenant.active) if enabled else set()
        if requested is not None:
            allowed &= set(requested)
        assert seen == allowed

    check()
