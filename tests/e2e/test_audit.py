"""The audit log: every change asked of the API, who asked, when, and how it ended."""

from __future__ import annotations

from datetime import datetime

import pytest

from infra.mongo.client import connect
from infra.mongo.token_repository import TokenRepository
from schemas.domain import Role
from tests.conftest import unique
from tests.e2e.client import Api

pytestmark = pytest.mark.e2e


async def test_changes_are_audited_with_their_outcome(api: Api) -> None:
    run = unique("audit")
    kb = await api.create_kb(f"Audited {run}")
    missing = await api.http.delete(f"/api/v1/knowledge-bases/kb_{run}", headers=api.auth)
    assert missing.status_code == 404
    user = await api.http.post(
        "/api/v1/tokens",
        json={"name": run, "role": "user", "user_id": f"ann-{run}"},
        headers=api.auth,
    )
    user_auth = {"Authorization": f"Bearer {user.json()['token']}"}
    refused = await api.http.post(
        "/api/v1/knowledge-bases", json={"name": "not mine"}, headers=user_auth
    )
    assert refused.status_code == 403
    # Reads and searches are not changes.
    await api.http.get(f"/api/v1/knowledge-bases/{kb['id']}", headers=api.auth)
    await api.http.post("/api/v1/knowledge/search", json={"query": run}, headers=api.auth)

    page = await api.http.get("/api/v1/audit", params={"limit": 50}, headers=api.auth)
    assert page.status_code == 200, page.text
    entries = page.json()["items"]
    mine = [e for e in entries if run in e["path"] or e["token_id"] == user.json()["id"]]
    created = next(
        e for e in entries if e["path"] == "/api/v1/knowledge-bases" and e["status"] == 201
    )
    assert (created["method"], created["outcome"], created["role"]) == ("POST", "ok", "admin")
    assert [(e["method"], e["status"], e["outcome"], e["role"]) for e in mine] == [
        ("POST", 403, "refused", "user"),
        ("DELETE", 404, "refused", "admin"),
    ]
    assert mine[0]["user_id"] == f"ann-{run}"
    assert not any(e["path"].endswith("/search") or e["method"] == "GET" for e in entries)
    # Newest first, compared as times: the JSON leaves out a whole second's fraction.
    moments = [datetime.fromisoformat(e["at"]) for e in entries]
    assert moments == sorted(moments, reverse=True)
    older = await api.http.get(
        "/api/v1/audit", params={"before": entries[0]["at"], "limit": 500}, headers=api.auth
    )
    assert entries[0]["id"] not in {e["id"] for e in older.json()["items"]}

    # Users cannot read it; another tenant's admin sees none of it.
    assert (await api.http.get("/api/v1/audit", headers=user_auth)).status_code == 403
    client = connect(api.running.settings().mongo)
    tokens = TokenRepository(client[api.running.database], "", "default")
    _, outsider = await tokens.issue(f"other-{run}", Role.ADMIN, "outsider")
    await client.close()
    theirs = await api.http.get("/api/v1/audit", headers={"Authorization": f"Bearer {outsider}"})
    assert theirs.json()["items"] == []


async def test_no_secret_reaches_a_log(api: Api) -> None:
    run = unique("secrets")
    issued = await api.http.post(
        "/api/v1/tokens",
        json={"name": run, "role": "user", "user_id": f"sam-{run}"},
        headers=api.auth,
    )
    user_token = issued.json()["token"]
    user_auth = {"Authorization": f"Bearer {user_token}"}
    kb = await api.create_kb(f"Secrets {run}")
    text = await api.http.post(
        f"/api/v1/knowledge-bases/{kb['id']}/documents/text",
        json={"title": "Note", "content": f"The {run} note."},
        headers=user_auth,
    )
    assert (await api.wait_final(kb["id"], text.json()["id"]))["parse_status"] == "indexed"
    await api.http.post("/api/v1/knowledge/search", json={"query": run}, headers=user_auth)
    await api.http.get("/api/v1/knowledge-bases", headers={"Authorization": "Bearer rl_wrong"})
    await api.internal_search({"tenant_id": "default", "kb_ids": [kb["id"]], "query": run})
    logs = [process.log_path for process in api.running.pipeline.processes]
    assert logs
    for path in logs:
        text_of_log = path.read_text(errors="replace")
        for secret in (api.token, api.running.internal_secret, user_token):
            assert secret not in text_of_log, f"a secret is in {path.name}"
