"""People's permissions over HTTP: users, grants, audiences, visibility changes,
archiving, revoked tokens, other tenants, wiki pages and the people's search."""

from __future__ import annotations

import asyncio
import re
import time
from typing import Any

import httpx
import pytest

from infra.mongo.client import connect
from infra.mongo.token_repository import TokenRepository
from schemas.domain import Role
from tests.conftest import unique
from tests.e2e.client import Api

pytestmark = pytest.mark.e2e


class Person:
    """Someone calling the API with their own token (searching one KB, if set)."""

    def __init__(self, api: Api, token: str, user_id: str | None) -> None:
        self.api = api
        self.user_id = user_id
        self.auth = {"Authorization": f"Bearer {token}"}
        self.kb_ids: list[str] | None = None

    async def search(self, query: str, **body: Any) -> list[dict[str, Any]]:
        response = await self.api.http.post(
            "/api/v1/knowledge/search",
            json={"query": query, "score_threshold": 0.0, "kb_ids": self.kb_ids, **body},
            headers=self.auth,
        )
        assert response.status_code == 200, response.text
        return list(response.json()["results"])

    async def call(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        return await self.api.http.request(method, path, headers=self.auth, **kwargs)


async def person(api: Api, user_id: str, role: str = "user") -> Person:
    response = await api.http.post(
        "/api/v1/tokens",
        json={"name": f"{user_id}'s token", "role": role, "user_id": user_id},
        headers=api.auth,
    )
    assert response.status_code == 201, response.text
    return Person(api, response.json()["token"], user_id)


async def put(api: Api, path: str, body: dict[str, Any], expect: int = 200) -> dict[str, Any]:
    response = await api.http.put(path, json=body, headers=api.auth)
    assert response.status_code == expect, response.text
    return dict(response.json())


async def wait_indexed(api: Api, kb_id: str, document_id: str) -> None:
    document = await api.wait_final(kb_id, document_id)
    assert document["parse_status"] == "indexed", document


def sources(results: list[dict[str, Any]]) -> set[str]:
    folded = {a["document_id"] for r in results for a in r["also_in"]}
    return {r["source"] for r in results} | folded


def hit_sources(hits: list[dict[str, Any]]) -> set[str]:
    """The documents of a bot's hits, copies folded into them included."""
    folded = {a["document_id"] for h in hits for a in h["also_in"]}
    return {h["document_id"] for h in hits} | folded


async def test_what_people_may_read_follows_owner_grants_audiences_and_archive(api: Api) -> None:
    run = unique("gov")
    alice, bob, carol = (
        await person(api, f"alice-{run}"),
        await person(api, f"bob-{run}"),
        await person(api, f"carol-{run}"),
    )
    kb = await api.create_kb(f"Governed {run}")
    kb_id = kb["id"]
    for someone in (alice, bob, carol):
        someone.kb_ids = [kb_id]
    assert kb["default_visibility"] == "shared"
    phrase = f"The {run} lighthouse keeper logs the beacon every night"

    # Alice uploads: a user's upload is private to them by default.
    upload = await alice.call(
        "POST",
        f"/api/v1/knowledge-bases/{kb_id}/documents",
        files={"file": ("alice-notes.txt", f"{phrase}. Alice's private notes.".encode())},
    )
    assert upload.status_code == 202, upload.text
    private = upload.json()
    assert (private["visibility_mode"], private["owner_user_id"]) == ("private", alice.user_id)
    assert private["knowledge_item_id"] == private["id"]
    await wait_indexed(api, kb_id, private["id"])
    # An admin's text takes the KB's default: shared with the tenant.
    shared = await api.text(kb_id, {"title": "Beacon rota", "content": f"{phrase}. Rota."})
    await wait_indexed(api, kb_id, shared["id"])

    assert sources(await alice.search(phrase)) == {private["id"], shared["id"]}
    assert sources(await bob.search(phrase)) == {shared["id"]}
    # Bob cannot see it exists, let alone change it.
    path = f"/api/v1/knowledge-bases/{kb_id}/documents/{private['id']}"
    assert (await bob.call("GET", path)).status_code == 404
    assert (await bob.call("GET", f"{path}/content")).status_code == 404
    assert (await bob.call("PATCH", path, json={"visibility_mode": "shared"})).status_code == 404
    assert (await bob.call("DELETE", path)).status_code == 404
    listed = await bob.call("GET", f"/api/v1/knowledge-bases/{kb_id}/documents")
    assert [d["id"] for d in listed.json()["items"]] == [shared["id"]]
    # A bot without a user reads what the whole tenant reads; with Alice, her items too.
    bot = await api.http.post(
        "/api/v1/bots",
        json={
            "name": f"bot {run}",
            "knowledge": {"enabled": True, "kb_ids": [kb_id], "score_threshold": 0.0},
        },
        headers=api.auth,
    )
    assert bot.status_code == 201, bot.text
    bot_id = bot.json()["id"]
    base = {"bot_id": bot_id, "session_id": "s", "query": phrase, "top_k": 10}
    assert hit_sources(await api.internal_search(base)) == {shared["id"]}
    for_alice = await api.internal_search({**base, "user_id": alice.user_id})
    assert hit_sources(for_alice) == {private["id"], shared["id"]}

    # Alice grants Bob: restricted to him; he reads it at his next search.
    embedded = await api.metric(api.worker_metrics("embed"), "ragline_chunks_embedded_total")
    granted = await alice.call(
        "PATCH", path, json={"visibility_mode": "restricted", "user_grants": [bob.user_id]}
    )
    assert granted.status_code == 200, granted.text
    started = time.monotonic()
    while private["id"] not in sources(await bob.search(phrase)):
        assert time.monotonic() - started < 2.0, "the grant did not reach search in 2 s"
        await asyncio.sleep(0.1)
    assert private["id"] not in sources(await carol.search(phrase))
    # Bob can read it but not change it.
    assert (await bob.call("GET", f"{path}/content")).json()["content"].startswith(phrase)
    assert (await bob.call("PATCH", path, json={"tags": ["x"]})).status_code == 403
    # A grant naming nobody known is refused, naming them.
    unknown = await alice.call("PATCH", path, json={"user_grants": ["nobody-" + run]})
    assert unknown.status_code == 422
    assert "nobody-" + run in unknown.text

    # Audiences: Carol reads through "night-shift" while she is a member.
    tag = f"night-{run}"
    await put(api, f"/api/v1/audiences/{tag}", {"description": "Night shift"})
    await put(api, f"/api/v1/audiences/{tag}/members", {"user_ids": [carol.user_id]})
    to_audience = await alice.call(
        "PATCH", path, json={"visibility_mode": "shared", "audience_tags": [tag]}
    )
    assert to_audience.status_code == 200, to_audience.text
    assert private["id"] in sources(await carol.search(phrase))
    assert private["id"] not in sources(await bob.search(phrase))
    assert private["id"] in sources(await carol.search(phrase, retrieval_mode="sparse"))
    await put(api, f"/api/v1/audiences/{tag}/members", {"user_ids": []})
    assert private["id"] not in sources(await carol.search(phrase))
    assert private["id"] not in sources(await carol.search(phrase, retrieval_mode="dense"))

    # Archived: gone from everyone's search, the owner's and admins' included; admins still
    # see it in the list.
    archived = await alice.call("PATCH", path, json={"archived": True})
    assert archived.json()["archived_at"] is not None
    assert private["id"] not in sources(await alice.search(phrase))
    assert private["id"] in {d["id"] for d in (await api.documents(kb_id))["items"]}

    # None of it re-embedded anything.
    assert (
        await api.metric(api.worker_metrics("embed"), "ragline_chunks_embedded_total") == embedded
    )

    # A revoked token is refused at its next request.
    tokens = (await api.http.get("/api/v1/tokens", headers=api.auth)).json()["items"]
    bob_token = next(t for t in tokens if t["user_id"] == bob.user_id)
    assert "token" not in bob_token
    revoked = await api.http.delete(f"/api/v1/tokens/{bob_token['id']}", headers=api.auth)
    assert revoked.status_code == 204
    refused = await bob.call("POST", "/api/v1/knowledge/search", json={"query": "x"})
    assert refused.status_code == 401


async def test_bad_governance_input_is_refused_with_its_reason(api: Api) -> None:
    run = unique("bad")
    kb_id = (await api.create_kb(f"Bad input {run}"))["id"]
    user = await person(api, f"dave-{run}")
    batch = {"records": [{"external_id": "r1", "title": "T", "content": "Body text."}]}

    async def post_batch(body: dict[str, Any], who: Any = None) -> httpx.Response:
        headers = who.auth if who else api.auth
        return await api.http.post(
            f"/api/v1/knowledge-bases/{kb_id}/documents/batch", json=body, headers=headers
        )

    shared = await post_batch({**batch, "visibility_mode": "shared"})
    assert shared.status_code == 422
    assert "confirm_tenant_wide" in shared.text
    assert (await post_batch({**batch, "audience_tags": ["ghosts"]})).status_code == 422
    missing = await post_batch({**batch, "user_grants": ["ghost-user"]})
    assert "ghost-user" in missing.text
    assert (await post_batch({**batch, "visibility_mode": "public"})).status_code == 422
    confirmed = await post_batch(
        {**batch, "visibility_mode": "shared", "confirm_tenant_wide": True}
    )
    assert confirmed.status_code == 202, confirmed.text
    # A user cannot give what they add to someone else, nor administer tokens or audiences.
    as_other = await post_batch({**batch, "owner_user_id": "someone"}, user)
    assert as_other.status_code in (403, 422)
    assert (await user.call("GET", "/api/v1/tokens")).status_code == 403
    assert (await user.call("PUT", "/api/v1/audiences/x", json={})).status_code == 403
    # A user token needs its user.
    no_user = await api.http.post(
        "/api/v1/tokens", json={"name": "n", "role": "user"}, headers=api.auth
    )
    assert no_user.status_code == 422
    # A token that expires is refused once it has.
    short = await api.http.post(
        "/api/v1/tokens",
        json={"name": "short", "role": "admin", "expires_in_s": 1},
        headers=api.auth,
    )
    assert short.status_code == 201, short.text
    assert short.json()["expires_at"] is not None
    short_auth = {"Authorization": f"Bearer {short.json()['token']}"}
    assert (await api.http.get("/api/v1/knowledge-bases", headers=short_auth)).status_code == 200
    await asyncio.sleep(1.2)
    assert (await api.http.get("/api/v1/knowledge-bases", headers=short_auth)).status_code == 401


async def test_another_tenants_items_are_never_seen(api: Api) -> None:
    run = unique("tenant")
    kb_id = (await api.create_kb(f"Tenant A {run}"))["id"]
    phrase = f"The {run} vault combination is kept by the quartermaster"
    document = await api.text(kb_id, {"title": "Vault", "content": phrase})
    await wait_indexed(api, kb_id, document["id"])
    # Tokens issued over the API are of the caller's tenant: another tenant's admin is made
    # through the token repository, as the token CLI does.
    client = connect(api.running.settings().mongo)
    tokens = TokenRepository(client[api.running.database], "", "default")
    _, secret = await tokens.issue(f"other-{run}", Role.ADMIN, "outsider")
    await client.close()
    outsider = Person(api, secret, None)
    assert sources(await outsider.search(phrase)) == set()
    path = f"/api/v1/knowledge-bases/{kb_id}/documents/{document['id']}"
    assert (await outsider.call("GET", path)).status_code == 404


async def test_wiki_pages_are_written_read_governed_and_searched(api: Api) -> None:
    run = unique("wiki")
    kb_id = (await api.create_kb(f"Wiki {run}"))["id"]
    erin, frank = await person(api, f"erin-{run}"), await person(api, f"frank-{run}")
    erin.kb_ids = frank.kb_ids = [kb_id]
    topic = re.sub(r"[^a-z0-9-]", "-", f"runbook-{run}".lower())
    content = f"# Deployment Runbook\n\n## Rollback\n\nRoll back {run} with the previous tag."
    written = await erin.call(
        "POST",
        "/api/v1/knowledge/wiki",
        json={"kb_id": kb_id, "topic": topic, "title": "Runbook", "content": content},
    )
    assert written.status_code == 202, written.text
    page = written.json()
    assert (page["visibility_mode"], page["owner_user_id"]) == ("private", erin.user_id)
    await wait_indexed(api, kb_id, page["document_id"])
    read = (await erin.call("GET", f"/api/v1/knowledge/wiki/{topic}")).json()
    assert read["content"] == content
    assert (await frank.call("GET", f"/api/v1/knowledge/wiki/{topic}")).status_code == 404
    hits = await erin.search(f"roll back {run} previous tag")
    assert hits[0]["source"] == page["document_id"]
    # Chunked by its Markdown headings.
    assert hits[0]["heading_path"][0] == "Deployment Runbook"
    assert sources(await frank.search(f"roll back {run} previous tag")) == set()
    # Frank may not overwrite it; Erin shares a new version with the tenant.
    overwrite = await frank.call(
        "POST",
        "/api/v1/knowledge/wiki",
        json={"kb_id": kb_id, "topic": topic, "title": "Mine", "content": "# Mine"},
    )
    assert overwrite.status_code == 404
    v2 = await erin.call(
        "POST",
        "/api/v1/knowledge/wiki",
        json={
            "kb_id": kb_id,
            "topic": topic,
            "title": "Runbook",
            "content": content + "\n\nVerify the health checks.",
            "visibility_mode": "shared",
        },
    )
    assert v2.status_code == 202, v2.text
    await wait_indexed(api, kb_id, v2.json()["document_id"])
    assert v2.json()["version"] == 2
    pages = (await frank.call("GET", "/api/v1/knowledge/wiki")).json()["items"]
    assert [p["topic"] for p in pages] == [topic]
    assert sources(await frank.search(f"roll back {run} previous tag")) == {
        v2.json()["document_id"]
    }
    deleted = await erin.call("DELETE", f"/api/v1/knowledge/wiki/{topic}")
    assert deleted.status_code == 204
    assert sources(await frank.search(f"roll back {run} previous tag")) == set()
    assert (await erin.call("GET", f"/api/v1/knowledge/wiki/{topic}")).status_code == 404
