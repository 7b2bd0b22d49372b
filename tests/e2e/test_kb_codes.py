"""KB codes: a short name unique in the tenant that every KB route accepts in place
of the id; KBs also list the pages and files they are filled from."""

from __future__ import annotations

import pytest

from tests.conftest import unique
from tests.e2e.client import Api

pytestmark = pytest.mark.e2e


async def test_a_kb_is_reached_by_its_code_everywhere(api: Api) -> None:
    code = unique("help").replace("_", "-")[:32]
    created = await api.http.post(
        "/api/v1/knowledge-bases",
        json={
            "name": "Help centre",
            "code": code,
            "urls": ["https://help.example.com/"],
            "files": ["https://help.example.com/manual.pdf"],
        },
        headers=api.auth,
    )
    assert created.status_code == 201, created.text
    kb = created.json()
    assert (kb["code"], kb["urls"], kb["files"]) == (
        code,
        ["https://help.example.com/"],
        ["https://help.example.com/manual.pdf"],
    )
    assert (await api.kb(code))["id"] == kb["id"]
    # Documents and search by code.
    document = await api.text(code, {"title": "Hours", "content": f"The {code} desk opens at 9."})
    final = await api.wait_final(code, document["id"])
    assert final["parse_status"] == "indexed"
    assert final["kb_id"] == kb["id"]
    found = await api.http.post(
        "/api/v1/knowledge/search",
        json={"query": f"When does the {code} desk open?", "kb_ids": [code]},
        headers=api.auth,
    )
    assert [r["source"] for r in found.json()["results"]] == [document["id"]]

    # Taken, malformed, unknown.
    taken = await api.http.post(
        "/api/v1/knowledge-bases", json={"name": "Other", "code": code}, headers=api.auth
    )
    assert taken.status_code == 409
    assert code in taken.text
    for bad in ("Upper", "under_score", "x" * 33, "-lead"):
        malformed = await api.http.post(
            "/api/v1/knowledge-bases", json={"name": "Bad", "code": bad}, headers=api.auth
        )
        assert malformed.status_code == 422, bad
    missing = await api.http.get("/api/v1/knowledge-bases/no-such-code", headers=api.auth)
    assert missing.status_code == 404

    # A new code frees the old one; a hard delete frees the code.
    renamed = await api.http.patch(
        f"/api/v1/knowledge-bases/{code}", json={"code": f"{code[:28]}-new"}, headers=api.auth
    )
    assert renamed.status_code == 200, renamed.text
    reused = await api.http.post(
        "/api/v1/knowledge-bases", json={"name": "Reuse", "code": code}, headers=api.auth
    )
    assert reused.status_code == 201, reused.text
    deleted = await api.http.delete(
        f"/api/v1/knowledge-bases/{code}", params={"hard": "true"}, headers=api.auth
    )
    assert deleted.status_code == 204
    again = await api.http.post(
        "/api/v1/knowledge-bases", json={"name": "Again", "code": code}, headers=api.auth
    )
    assert again.status_code == 201, again.text
