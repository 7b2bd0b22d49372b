"""Item permissions, property-tested over HTTP: no search ever returns a chunk its caller may
not read, and every readable item the query matches is found.

A tenant of its own with four users, two audiences, two KBs of four texts each (every text
matches the query) and a bot attached to them. Each example gives every item a random owner,
visibility, audiences, grants and archive flag (through `PATCH`, as an admin would), random
audience members and a random set of attached KBs and retrieval mode for the bot, then searches
as a user (people's form, any mode), as the bot for nobody and as the bot for a user, each
twice (the second answer comes from the cache). The expected answer is computed here from the
access table (`may_read`), independently of the service's rule.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from infra.mongo.client import connect
from infra.mongo.token_repository import TokenRepository
from schemas.domain import Role
from tests.conftest import RunningPipeline, unique

pytestmark = pytest.mark.e2e

USERS = ("ann", "ben", "cat", "dan")
AUDIENCES = ("crew", "board")
QUERIES = ("Where is the orchard ledger kept?", "orchard ledger location")
ITEM_WORDS = (
    "copper kettle harbour lantern",
    "granite quarry winter sledge",
    "violet meadow spring apiary",
    "saffron market caravan tent",
    "glacier station radio mast",
    "bamboo grove tea terrace",
    "coral reef diving boat",
    "desert oasis palm well",
)


@dataclass
class Item:
    """One text of the world: its KB and document id."""

    kb_id: str
    document_id: str


@dataclass
class World:
    """The tenant's admin client, its users' clients, items, KBs and bot."""

    admin: httpx.Client
    users: dict[str, httpx.Client]
    search: httpx.Client
    kbs: list[str]
    items: list[Item] = field(default_factory=list)
    bot_id: str = ""


def _admin_token(running: RunningPipeline, tenant: str) -> str:
    async def issue() -> str:
        client = connect(running.settings().mongo)
        tokens = TokenRepository(client[running.database], "", "default")
        _, token = await tokens.issue(tenant, Role.ADMIN, "governance property test")
        await client.close()
        return token

    return asyncio.run(issue())


def _ok(response: httpx.Response, status: int = 200) -> dict[str, Any]:
    assert response.status_code == status, response.text
    return dict(response.json())


@pytest.fixture(scope="module")
def world(stack: RunningPipeline) -> Iterator[World]:
    tenant = unique("govprop")
    admin = httpx.Client(
        base_url=stack.url,
        headers={"Authorization": f"Bearer {_admin_token(stack, tenant)}"},
        timeout=60,
    )
    users = {}
    for user in USERS:
        token = _ok(
            admin.post("/api/v1/tokens", json={"name": user, "role": "user", "user_id": user}),
            201,
        )["token"]
        users[user] = httpx.Client(
            base_url=stack.url, headers={"Authorization": f"Bearer {token}"}, timeout=60
        )
    for tag in AUDIENCES:
        _ok(admin.put(f"/api/v1/audiences/{tag}", json={"description": tag}))
    kbs = [_ok(admin.post("/api/v1/knowledge-bases", json={"name": n}), 201)["id"] for n in "AB"]
    search = httpx.Client(
        base_url=stack.url, headers={"X-Internal-Secret": stack.internal_secret}, timeout=60
    )
    built = World(admin, users, search, kbs)
    for n, words in enumerate(ITEM_WORDS):
        kb_id = kbs[n % 2]
        body = {
            "title": f"Ledger note {n}",
            "content": f"The orchard ledger is kept in the {words} cabinet, entry {n}.",
        }
        path = f"/api/v1/knowledge-bases/{kb_id}/documents/text"
        document = _ok(admin.post(path, json=body), 202)
        built.items.append(Item(kb_id, document["id"]))
    deadline = time.monotonic() + 120
    for item in built.items:
        while True:
            status = _ok(
                admin.get(f"/api/v1/knowledge-bases/{item.kb_id}/documents/{item.document_id}")
            )["parse_status"]
            if status == "indexed":
                break
            assert status != "failed", item
            assert time.monotonic() < deadline, status
            time.sleep(0.2)
    bot = {"name": "guarded", "knowledge": {"enabled": True, "kb_ids": kbs, "top_k": 10}}
    built.bot_id = _ok(admin.post("/api/v1/bots", json=bot), 201)["id"]
    yield built
    for client in (admin, search, *users.values()):
        client.close()


@dataclass(frozen=True)
class Policy:
    """One item's governance as the example sets it."""

    owner: str
    visibility: str
    audiences: tuple[str, ...]
    grants: tuple[str, ...]
    archived: bool


def may_read(policy: Policy, user: str | None, members: dict[str, set[str]]) -> bool:
    """The access table: private → owner; shared → the tenant, or the audiences' members;
    restricted → grants, audiences' members, owner. Archived → nobody. No user (a bot for
    nobody) → only what the whole tenant may read."""
    if policy.archived:
        return False
    if user is None:
        return policy.visibility == "shared" and not policy.audiences
    in_audience = any(user in members[tag] for tag in policy.audiences)
    if user == policy.owner:
        return True
    if policy.visibility == "shared":
        return not policy.audiences or in_audience
    if policy.visibility == "restricted":
        return user in policy.grants or in_audience
    return False


policies = st.builds(
    Policy,
    owner=st.sampled_from(USERS),
    visibility=st.sampled_from(("private", "shared", "restricted")),
    audiences=st.lists(st.sampled_from(AUDIENCES), unique=True).map(tuple),
    grants=st.lists(st.sampled_from(USERS), unique=True, max_size=2).map(tuple),
    archived=st.booleans(),
)


@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    item_policies=st.lists(policies, min_size=len(ITEM_WORDS), max_size=len(ITEM_WORDS)),
    members=st.fixed_dictionaries({tag: st.sets(st.sampled_from(USERS)) for tag in AUDIENCES}),
    attached=st.sets(st.integers(0, 1), min_size=1),
    user=st.sampled_from(USERS),
    people_mode=st.sampled_from(("dense", "sparse", "hybrid")),
    bot_mode=st.sampled_from(("dense", "hybrid")),
    query=st.sampled_from(QUERIES),
)
def test_no_search_returns_what_its_caller_may_not_read(
    world: World,
    item_policies: list[Policy],
    members: dict[str, set[str]],
    attached: set[int],
    user: str,
    people_mode: str,
    bot_mode: str,
    query: str,
) -> None:
    admin = world.admin
    for item, policy in zip(world.items, item_policies, strict=True):
        _ok(
            admin.patch(
                f"/api/v1/knowledge-bases/{item.kb_id}/documents/{item.document_id}",
                json={
                    "owner_user_id": policy.owner,
                    "visibility_mode": policy.visibility,
                    "audience_tags": list(policy.audiences),
                    "user_grants": list(policy.grants),
                    "archived": policy.archived,
                },
            )
        )
    for tag, users in members.items():
        _ok(admin.put(f"/api/v1/audiences/{tag}/members", json={"user_ids": sorted(users)}))
    kb_ids = [world.kbs[i] for i in sorted(attached)]
    _ok(
        admin.patch(
            f"/api/v1/bots/{world.bot_id}",
            json={
                "knowledge": {
                    "enabled": True,
                    "kb_ids": kb_ids,
                    "top_k": 10,
                    "score_threshold": 0.0,
                    "retrieval_mode": bot_mode,
                }
            },
        )
    )

    def expected(reader: str | None, kbs: list[str]) -> set[str]:
        return {
            item.document_id
            for item, policy in zip(world.items, item_policies, strict=True)
            if item.kb_id in kbs and may_read(policy, reader, members)
        }

    for _ in range(2):  # the second answer is the cached one
        people = _ok(
            world.users[user].post(
                "/api/v1/knowledge/search",
                json={
                    "query": query,
                    "top_k": 20,
                    "retrieval_mode": people_mode,
                    "score_threshold": 0.0,
                },
            )
        )["results"]
        found = {r["source"] for r in people} | {
            a["document_id"] for r in people for a in r["also_in"]
        }
        assert found == expected(user, world.kbs), (user, people_mode)
        for reader in (None, user):
            body: dict[str, Any] = {"bot_id": world.bot_id, "session_id": "s", "query": query}
            if reader is not None:
                body["user_id"] = reader
            hits = _ok(world.search.post("/api/v1/internal/knowledge/search", json=body))["hits"]
            found = {h["document_id"] for h in hits} | {
                a["document_id"] for h in hits for a in h["also_in"]
            }
            assert found == expected(reader, kb_ids), (reader, bot_mode)
