"""Another tenant's admin cannot reach, change or even detect this tenant's resources: every
operation of the API that takes an id answers them exactly as it answers for an id that does
not exist, and nothing changes."""

from __future__ import annotations

import asyncio
import re
from typing import Any

import httpx
import pytest

from infra.mongo.client import connect
from infra.mongo.token_repository import TokenRepository
from schemas.domain import Role
from tests.conftest import unique
from tests.e2e.client import Api

pytestmark = pytest.mark.e2e

# Operations that create or replace an entry named by the caller in the caller's own tenant:
# another tenant using the same name makes their own, touching nothing here.
OWN_NAMESPACE = {("PUT", "/api/v1/users/{user_id}"), ("PUT", "/api/v1/audiences/{tag}")}
# The deployment's own resources (the vector store's generations): no tenant's admin reaches
# them, whatever the id, so the outsider gets the same 403 for one that exists and one that
# does not.
DEPLOYMENT_PREFIX = "/api/v1/generations"
# A body each kind of request accepts, so that the answer is about the id, not the body
# (by method and path where methods differ).
BODIES_BY_METHOD: dict[tuple[str, str], Any] = {
    ("PUT", "/api/v1/knowledge-bases/{kb_id}/documents/{document_id}"): {"content": "planted"},
}
BODIES: dict[str, Any] = {
    "/api/v1/knowledge-bases/{kb_id}": {"description": "taken over"},
    "/api/v1/knowledge-bases/{kb_id}/documents/text": {"title": "x", "content": "planted"},
    "/api/v1/knowledge-bases/{kb_id}/documents/batch": {
        "records": [{"external_id": "x", "content": "planted"}]
    },
    "/api/v1/knowledge-bases/{kb_id}/documents/{document_id}": {"tags": ["taken"]},
    "/api/v1/knowledge-bases/{kb_id}/documents/sync": {"source": "planted", "records": []},
    # A closed local port: refused as a loopback address, nothing is fetched.
    "/api/v1/knowledge-bases/{kb_id}/crawl-jobs": {"urls": ["http://127.0.0.1:9/"]},
    "/api/v1/knowledge-bases/{kb_id}/evaluations": {"cases": [{"query": "q", "expected": ["d"]}]},
    "/api/v1/knowledge-bases/{kb_id}/evaluations/{evaluation_id}/apply": {"target": "kb"},
    "/api/v1/bots/{bot_id}": {"name": "taken over"},
    "/api/v1/bots/{bot_id}/tokens": {"name": "planted"},
    "/api/v1/users/{user_id}": {"display_name": "x"},
    "/api/v1/audiences/{tag}": {"description": "x"},
    "/api/v1/audiences/{tag}/members": {"user_ids": []},
}


async def _outsider(api: Api) -> str:
    client = connect(api.running.settings().mongo)
    tokens = TokenRepository(client[api.running.database], "", "default")
    _, secret = await tokens.issue(unique("elsewhere"), Role.ADMIN, "outsider")
    await client.close()
    return secret


async def _resources(api: Api) -> dict[str, str]:
    """One of each kind of resource in tenant `default`, by path parameter."""
    auth = api.auth
    kb = await api.create_kb()
    document = await api.upload(kb["id"], "memo.txt", b"The vault code changes on Mondays.")
    await api.wait_final(kb["id"], document["id"])
    broken = await api.upload(kb["id"], "broken.pdf", b"%PDF-1.7\n1 0 obj\n<<")
    await api.wait_final(kb["id"], broken["id"])
    bot = (await api.http.post("/api/v1/bots", json={"name": "b"}, headers=auth)).json()
    bot_token = await api.http.post(
        f"/api/v1/bots/{bot['id']}/tokens", json={"name": "t"}, headers=auth
    )
    tag = unique("crew").lower()
    await api.http.put(f"/api/v1/audiences/{tag}", json={"description": "c"}, headers=auth)
    user = unique("user")
    await api.http.put(f"/api/v1/users/{user}", json={"display_name": "U"}, headers=auth)
    evaluation = await api.http.post(
        f"/api/v1/knowledge-bases/{kb['id']}/evaluations",
        json={"cases": [{"query": "vault code", "expected": [document["id"]]}]},
        headers=auth,
    )
    assert evaluation.status_code in (200, 201, 202), evaluation.text
    async with asyncio.timeout(60):
        while True:
            letters = (await api.http.get("/api/v1/dead-letters", headers=auth)).json()["items"]
            found = [x for x in letters if x.get("document_id") == broken["id"]]
            if found:
                break
            await asyncio.sleep(0.3)
    crawl = await api.http.post(
        f"/api/v1/knowledge-bases/{kb['id']}/crawl-jobs",
        json={"urls": ["http://127.0.0.1:9/"]},
        headers=auth,
    )
    assert crawl.status_code == 202, crawl.text
    return {
        "job_id": crawl.json()["job_id"],
        "kb_id": kb["id"],
        "document_id": document["id"],
        "evaluation_id": evaluation.json()["id"],
        "bot_id": bot["id"],
        "token_id": bot_token.json()["id"],
        "tag": tag,
        "user_id": user,
        "topic": "missing-topic",
        "letter_id": found[0]["id"],
        # The vector store's first generation (the deployment's: refused to any tenant's
        # admin alike, whether it exists or not).
        "number": "1",
    }


def _fill(path: str, values: dict[str, str]) -> str:
    return re.sub(r"\{(\w+)\}", lambda m: values[m.group(1)], path)


async def test_another_tenants_admin_gets_what_a_missing_id_gets(api: Api) -> None:
    ids = await _resources(api)
    missing = {key: f"nope-{key.replace('_', '-')}" for key in ids}
    outsider = {"Authorization": f"Bearer {await _outsider(api)}"}
    spec = (await api.http.get("/openapi.json")).json()
    operations = [
        (method.upper(), path)
        for path, methods in spec["paths"].items()
        if "{" in path and path.startswith("/api/v1/")
        for method in methods
    ]
    # Last, what makes entries of the outsider's own (after it, its deletes find them).
    operations.sort(key=lambda op: op in OWN_NAMESPACE)
    checked = 0
    for verb, path in operations:
        body = BODIES_BY_METHOD.get((verb, path), BODIES.get(path))
        if verb not in ("POST", "PUT", "PATCH"):
            body = None

        async def call(values: dict[str, str], verb: str = verb, path: str = path,
                       body: Any = body) -> httpx.Response:  # fmt: skip
            return await api.http.request(verb, _fill(path, values), json=body, headers=outsider)

        foreign = await call(ids)
        absent = await call(missing)
        where = f"{verb} {path}"
        assert foreign.status_code == absent.status_code, (where, foreign.text)
        if path.startswith(DEPLOYMENT_PREFIX):
            assert foreign.status_code == 403, (where, foreign.status_code, foreign.text)
            assert "deployment's admin token" in foreign.json()["detail"]
        elif (verb, path) not in OWN_NAMESPACE:
            assert foreign.status_code == 404, (where, foreign.status_code, foreign.text)
            assert foreign.json()["detail"]
        checked += 1
    assert checked >= 30

    # Nothing of tenant `default` changed or disappeared.
    kb = await api.kb(ids["kb_id"])
    assert kb["description"] != "taken over"
    assert kb["document_count"] == 2
    document = await api.document(ids["kb_id"], ids["document_id"])
    assert document["tags"] == []
    assert document["parse_status"] == "indexed"
    bot = await api.http.get(f"/api/v1/bots/{ids['bot_id']}", headers=api.auth)
    assert bot.json()["name"] == "b"
    tokens = await api.http.get(f"/api/v1/bots/{ids['bot_id']}/tokens", headers=api.auth)
    assert [t["id"] for t in tokens.json()["items"]] == [ids["token_id"]]
    letters = await api.http.get("/api/v1/dead-letters", headers=api.auth)
    assert ids["letter_id"] in [x["id"] for x in letters.json()["items"]]
