"""The search playground's route, `POST /api/v1/bots/{bot_id}/search`: an admin runs one of
their bots' searches and gets what the agent runtime's contract gives for it, with citations;
another tenant's bot is a missing one."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from infra.mongo.client import connect
from infra.mongo.token_repository import TokenRepository
from schemas.domain import Role
from schemas.search import SearchHit, SearchMetrics
from tests.conftest import unique
from tests.e2e.client import Api
from tests.factories import KAYAK_SHOP

pytestmark = pytest.mark.e2e

TEXTS = {name: KAYAK_SHOP[name] for name in ("returns.md", "shipping.md", "warranty.md")}
QUERIES = ("How long do refunds take?", "when do orders ship", "warranty on a paddle")


async def _bot_over_a_kb(api: Api, **knowledge: Any) -> dict[str, Any]:
    kb = await api.create_kb("Kayaks")
    for name, text in TEXTS.items():
        uploaded = await api.upload(kb["id"], name, text.encode())
        assert (await api.wait_final(kb["id"], uploaded["id"]))["parse_status"] == "indexed"
    response = await api.http.post(
        "/api/v1/bots",
        json={"name": "Support", "knowledge": {"enabled": True, "kb_ids": [kb["id"]], **knowledge}},
        headers=api.auth,
    )
    assert response.status_code == 201, response.text
    return dict(response.json())


async def _playground(
    api: Api, bot_id: str, body: Any, headers: dict[str, str] | None = None
) -> httpx.Response:
    return await api.http.post(
        f"/api/v1/bots/{bot_id}/search", json=body, headers=api.auth if headers is None else headers
    )


async def test_the_playground_answers_what_the_bot_contract_answers(api: Api) -> None:
    bot = await _bot_over_a_kb(api, score_threshold=0.2)
    for number, query in enumerate(QUERIES):
        # Whichever runs first fills the answer cache; either way the answers agree.
        if number % 2:
            contract = await api.ask_bot(bot["id"], query)
            played = await _playground(api, bot["id"], {"query": query})
        else:
            played = await _playground(api, bot["id"], {"query": query})
            contract = await api.ask_bot(bot["id"], query)
        assert played.status_code == 200, played.text
        answer = played.json()
        assert answer["hits"], query
        assert [_without_citation(hit) for hit in answer["hits"]] == contract["hits"]
        assert answer["fallback_message"] == contract["fallback_message"]
        for hit in answer["hits"]:
            assert hit["citation"] == SearchHit.model_validate(hit).cited_as
            assert hit["citation"].startswith(hit["document_title"])
            assert hit["retrieval_rationale"]
            assert 0 < hit["score"] <= 1
        metrics = answer["metrics"]
        assert metrics["total_ms"] > 0
        assert set(metrics) == set(SearchMetrics.model_fields)
        assert metrics["ranking_ms"] > 0 or metrics["cache"]["result"]
        assert set(metrics["cache"]) == {"access", "embedding", "result"}

    # The contract's overrides: fewer hits, a threshold nothing passes (the bot is strict, so
    # the answer carries its fallback message).
    one = (await _playground(api, bot["id"], {"query": QUERIES[0], "top_k": 1})).json()
    contract = await api.ask_bot(bot["id"], QUERIES[0], top_k=1)
    assert [_without_citation(hit) for hit in one["hits"]] == contract["hits"]
    assert len(one["hits"]) == 1
    nothing = await _playground(
        api, bot["id"], {"query": "zebra xylophone quantum", "score_threshold": 1.0}
    )
    assert nothing.status_code == 200, nothing.text
    assert nothing.json()["hits"] == []
    assert nothing.json()["fallback_message"] == bot["knowledge"]["fallback_message"]


async def test_the_playground_follows_the_bots_knowledge_settings(api: Api) -> None:
    bot = await _bot_over_a_kb(api, score_threshold=0.2, top_k=2, retrieval_mode="dense")
    contract = await api.ask_bot(bot["id"], QUERIES[1])
    answer = (await _playground(api, bot["id"], {"query": QUERIES[1]})).json()
    assert [_without_citation(hit) for hit in answer["hits"]] == contract["hits"]
    assert 0 < len(answer["hits"]) <= 2
    assert all(h["retrieval_rationale"].startswith("semantic match") for h in answer["hits"])
    # With knowledge turned off, the bot finds nothing, here as through the contract.
    response = await api.http.patch(
        f"/api/v1/bots/{bot['id']}", json={"knowledge": {"enabled": False}}, headers=api.auth
    )
    assert response.status_code == 200, response.text
    off = (await _playground(api, bot["id"], {"query": QUERIES[1]})).json()
    assert off["hits"] == [] == (await api.ask_bot(bot["id"], QUERIES[1]))["hits"]


async def test_another_tenants_bot_is_not_found(api: Api) -> None:
    bot = await _bot_over_a_kb(api, score_threshold=0.2)
    outsider = {"Authorization": f"Bearer {await _admin_of(api, unique('elsewhere'))}"}
    for body in ({"query": QUERIES[0]}, None, {"query": ""}):
        foreign = await _playground(api, bot["id"], body, outsider)
        absent = await _playground(api, "bot_0000000000000000", body, outsider)
        assert foreign.status_code == absent.status_code == 404, (body, foreign.text)
        assert foreign.json()["detail"] == f"bot {bot['id']!r} not found"
        assert absent.json()["detail"] == "bot 'bot_0000000000000000' not found"
    # Its owner still gets an answer: the outsider's calls changed nothing.
    assert (await _playground(api, bot["id"], {"query": QUERIES[0]})).status_code == 200


async def test_refusals_say_why(api: Api) -> None:
    bot = await _bot_over_a_kb(api)
    blank = await _playground(api, bot["id"], {"query": "   "})
    assert blank.status_code == 422
    assert "query" in blank.json()["detail"]
    too_many = await _playground(api, bot["id"], {"query": "refunds", "top_k": 11})
    assert too_many.status_code == 422
    assert "top_k" in too_many.json()["detail"]
    unknown = await _playground(api, bot["id"], {"query": "refunds", "session_id": "x"})
    assert unknown.status_code == 422
    assert "session_id" in unknown.json()["detail"]
    assert (await _playground(api, bot["id"], {"query": "q"}, {})).status_code == 401
    person = await api.http.post(
        "/api/v1/tokens",
        json={"name": "a person", "role": "user", "user_id": unique("user")},
        headers=api.auth,
    )
    assert person.status_code == 201, person.text
    as_user = {"Authorization": f"Bearer {person.json()['token']}"}
    refused = await _playground(api, bot["id"], {"query": "refunds"}, as_user)
    assert refused.status_code == 403
    assert refused.json()["detail"] == "this endpoint needs an admin token"


def _without_citation(hit: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in hit.items() if key != "citation"}


async def _admin_of(api: Api, tenant: str) -> str:
    client = connect(api.running.settings().mongo)
    tokens = TokenRepository(client[api.running.database], "", "default")
    _, secret = await tokens.issue(tenant, Role.ADMIN, "outsider")
    await client.close()
    return secret
