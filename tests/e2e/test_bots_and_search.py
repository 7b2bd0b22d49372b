"""Bots and the agents' search contract: access guard, fallback, threshold, caches, hybrid."""

from __future__ import annotations

import re
from typing import Any

import pytest

from tests.conftest import RunningPipeline
from tests.e2e.client import Api

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def stack(running_pipeline: RunningPipeline) -> RunningPipeline:
    """The session's stack with the packaged model: score thresholds are the model's cosines,
    and what dense retrieval misses beside sparse is the model's."""
    return running_pipeline


RETURNS = (
    "# Returns\n\nYou can return a kayak within thirty days of delivery. "
    "Refunds are paid to the original card within five working days."
)
SHIPPING = "# Shipping\n\nOrders ship from Rotterdam every Tuesday and Friday by courier."


async def _bot(api: Api, **knowledge: Any) -> dict[str, Any]:
    response = await api.http.post(
        "/api/v1/bots", json={"name": "Support bot", "knowledge": knowledge}, headers=api.auth
    )
    assert response.status_code == 201, response.text
    return dict(response.json())


async def _patch(api: Api, bot_id: str, **knowledge: Any) -> dict[str, Any]:
    response = await api.http.patch(
        f"/api/v1/bots/{bot_id}", json={"knowledge": knowledge}, headers=api.auth
    )
    assert response.status_code == 200, response.text
    return dict(response.json())


async def _kb_with(api: Api, *texts: tuple[str, str]) -> tuple[dict[str, Any], list[str]]:
    kb = await api.create_kb()
    ids = []
    for name, text in texts:
        uploaded = await api.upload(kb["id"], name, text.encode())
        ids.append((await api.wait_final(kb["id"], uploaded["id"]))["id"])
    return kb, ids


async def test_bots_are_created_with_seed_defaults_and_validated(api: Api) -> None:
    kb = await api.create_kb()
    bot = await _bot(api, kb_ids=[kb["id"], kb["id"]])
    knowledge = bot["knowledge"]
    assert bot["id"].startswith("bot_")
    assert knowledge["kb_ids"] == [kb["id"]]
    assert (knowledge["enabled"], knowledge["top_k"], knowledge["score_threshold"]) == (
        False,
        4,
        0.55,
    )
    assert (knowledge["strict"], knowledge["retrieval_mode"], knowledge["rrf_k"]) == (
        True,
        "hybrid",
        60,
    )
    assert knowledge["fallback_message"]
    assert knowledge["trigger_instructions"] == ""
    for field, value in (
        ("top_k", 11),
        ("top_k", 0),
        ("score_threshold", 1.5),
        ("retrieval_mode", "magic"),
    ):
        response = await api.http.post(
            "/api/v1/bots", json={"name": "x", "knowledge": {field: value}}, headers=api.auth
        )
        assert response.status_code == 422, (field, value)
        assert f"knowledge.{field}" in response.json()["detail"]
    unknown = await api.http.post(
        "/api/v1/bots", json={"name": "x", "knowledge": {"kb_ids": ["kb_nope"]}}, headers=api.auth
    )
    assert unknown.status_code == 422
    assert "kb_nope" in unknown.json()["detail"]
    # Only the fields given change; a bad value changes nothing.
    patched = await _patch(api, bot["id"], top_k=7, enabled=True)
    assert patched["knowledge"]["top_k"] == 7
    assert patched["knowledge"]["score_threshold"] == 0.55
    assert patched["revision"] == bot["revision"] + 1
    bad = await api.http.patch(
        f"/api/v1/bots/{bot['id']}", json={"knowledge": {"top_k": 99}}, headers=api.auth
    )
    assert bad.status_code == 422
    assert (await api.http.get(f"/api/v1/bots/{bot['id']}", headers=api.auth)).json()["knowledge"][
        "top_k"
    ] == 7
    # Convex fusion's weight is chosen per query until one is set; null chooses per query again.
    assert (knowledge["fusion"], knowledge["dense_weight"]) == ("convex", None)
    assert (await _patch(api, bot["id"], dense_weight=0.7))["knowledge"]["dense_weight"] == 0.7
    assert (await _patch(api, bot["id"], dense_weight=None))["knowledge"]["dense_weight"] is None
    listed = (await api.http.get("/api/v1/bots", headers=api.auth)).json()["items"]
    assert bot["id"] in {b["id"] for b in listed}
    assert (await api.http.delete(f"/api/v1/bots/{bot['id']}", headers=api.auth)).status_code == 204
    assert (await api.http.get(f"/api/v1/bots/{bot['id']}", headers=api.auth)).status_code == 404
    gone = await api.http.post(
        "/api/v1/internal/knowledge/search",
        json={"bot_id": bot["id"], "session_id": "s", "query": "anything"},
        headers={"X-Internal-Secret": api.running.internal_secret},
    )
    assert gone.status_code == 404


async def test_a_bot_search_answers_with_citations_and_timings(api: Api) -> None:
    kb, (returns, _) = await _kb_with(api, ("returns.md", RETURNS), ("shipping.md", SHIPPING))
    bot = await _bot(api, enabled=True, kb_ids=[kb["id"]], score_threshold=0.3)
    answer = await api.ask_bot(bot["id"], "How long do I have to return my kayak?")
    top = answer["hits"][0]
    assert top["document_id"] == returns
    assert top["document_title"] == "Returns"
    assert top["source_name"] == "returns.md"
    assert top["heading_path"] == ["Returns"]
    assert top["kb_id"] == kb["id"]
    assert "thirty days" in top["chunk_text"]
    assert top["retrieval_rationale"].startswith("hybrid: semantic cosine")
    assert 0 < top["score"] <= 1
    metrics = answer["metrics"]
    assert metrics["embedding_ms"] > 0
    assert metrics["vector_search_ms"] > 0
    assert metrics["total_ms"] >= metrics["embedding_ms"]
    assert metrics["cache"]["result"] is False
    assert answer["fallback_message"] is None
    again = await api.ask_bot_cached(bot["id"], "How long do I have to return my kayak?")
    assert again["hits"] == answer["hits"]
    assert again["metrics"]["cache"] == {"access": True, "embedding": False, "result": True}


async def test_strict_bots_get_the_fallback_message(api: Api) -> None:
    kb, _ = await _kb_with(api, ("returns.md", RETURNS))
    bot = await _bot(
        api, enabled=True, kb_ids=[kb["id"]], fallback_message="Let me connect you to a person."
    )
    off_topic = "What is the boiling point of liquid nitrogen?"
    strict = await api.ask_bot(bot["id"], off_topic)
    assert strict["hits"] == []
    assert strict["fallback_message"] == "Let me connect you to a person."
    relaxed = await api.ask_bot(bot["id"], off_topic, strict=False)
    assert relaxed["hits"] == []
    assert relaxed["fallback_message"] is None


async def test_the_score_threshold_is_a_cosine_in_both_modes(api: Api) -> None:
    kb, (returns, _) = await _kb_with(api, ("returns.md", RETURNS), ("shipping.md", SHIPPING))
    dense = await _bot(api, enabled=True, kb_ids=[kb["id"]], retrieval_mode="dense")
    hybrid = await _bot(api, enabled=True, kb_ids=[kb["id"]], retrieval_mode="hybrid")
    question = "Can I send back a kayak I bought?"
    for bot in (dense, hybrid):
        everything = await api.ask_bot(bot["id"], question, score_threshold=0.0)
        assert len(everything["hits"]) == 2
        assert everything["hits"][0]["document_id"] == returns
        nothing = await api.ask_bot(bot["id"], question, score_threshold=0.99)
        assert nothing["hits"] == []
    dense_hits = (await api.ask_bot(dense["id"], question, score_threshold=0.0))["hits"]
    cosines = [hit["score"] for hit in dense_hits]
    # A threshold between the two cosines keeps exactly the better one, in either mode.
    between = (cosines[0] + cosines[1]) / 2
    for bot in (dense, hybrid):
        kept = (await api.ask_bot(bot["id"], question, score_threshold=between))["hits"]
        assert [hit["document_id"] for hit in kept] == [returns]


async def test_an_exact_rare_term_is_found_by_hybrid_and_missed_by_dense(api: Api) -> None:
    codes = [f"E-{4400 + n}" for n in range(20)]
    texts = [
        (f"code-{code}.md", f"# Fault {code}\n\nFault {code} on the router: {meaning}.")
        for code, meaning in zip(
            codes,
            ["the fan stopped", "the disk is full", "the battery is low", "the cable is loose",
             "the license expired", "overheating", "firmware mismatch", "antenna fault",
             "memory error", "power surge", "port blocked", "certificate expired", "clock drift",
             "no uplink", "DNS failure", "DHCP exhausted", "VPN down", "sensor fault",
             "watchdog reset", "update failed"],
            strict=True,
        )
    ]  # fmt: skip
    kb, ids = await _kb_with(api, *texts)
    target = ids[codes.index("E-4417")]
    dense = await _bot(api, enabled=True, kb_ids=[kb["id"]], retrieval_mode="dense", top_k=3)
    hybrid = await _bot(api, enabled=True, kb_ids=[kb["id"]], retrieval_mode="hybrid", top_k=3)
    found = await api.ask_bot(hybrid["id"], "E-4417")
    assert found["hits"][0]["document_id"] == target
    assert "exact keyword match" in found["hits"][0]["retrieval_rationale"]
    # Its cosine, which the dense ranking did not bring, is read for the rationale it shows.
    cosine = re.search(r"semantic cosine (-?[0-9.]+)", found["hits"][0]["retrieval_rationale"])
    assert cosine is not None
    assert float(cosine[1]) > 0
    missed = await api.ask_bot(dense["id"], "E-4417")
    assert target not in {hit["document_id"] for hit in missed["hits"]}


async def test_answers_change_with_every_upload_delete_edit_and_disable(api: Api) -> None:
    kb, _ = await _kb_with(api, ("returns.md", RETURNS), ("shipping.md", SHIPPING))
    bot = await _bot(api, enabled=True, kb_ids=[kb["id"]], score_threshold=0.2)
    question = "Which warehouse ships the orders?"
    first = await api.ask_bot(bot["id"], question)
    assert (await api.ask_bot_cached(bot["id"], question))["hits"] == first["hits"]

    # Upload: the new document shows in the very next answer.
    uploaded = await api.upload(
        kb["id"], "warehouse.md", b"# Warehouse\n\nThe Hamburg warehouse ships all orders now."
    )
    warehouse = (await api.wait_final(kb["id"], uploaded["id"]))["id"]
    after_upload = await api.ask_bot(bot["id"], question)
    assert after_upload["metrics"]["cache"]["result"] is False
    assert warehouse in {hit["document_id"] for hit in after_upload["hits"]}

    # Delete: gone from the next answer.
    await api.delete(kb["id"], warehouse)
    after_delete = await api.ask_bot(bot["id"], question)
    assert warehouse not in {hit["document_id"] for hit in after_delete["hits"]}
    assert after_delete["hits"] == first["hits"]

    # Edit of the bot: the next answer follows it.
    await _patch(api, bot["id"], top_k=1)
    after_edit = await api.ask_bot(bot["id"], question)
    assert len(after_edit["hits"]) == 1
    assert after_edit["metrics"]["cache"]["access"] is False

    # Disable the KB: nothing from it, at once.
    disabled = await api.http.delete(f"/api/v1/knowledge-bases/{kb['id']}", headers=api.auth)
    assert disabled.status_code == 200
    after_disable = await api.ask_bot(bot["id"], question)
    assert after_disable["hits"] == []
    assert after_disable["fallback_message"]
    enabled = await api.http.patch(
        f"/api/v1/knowledge-bases/{kb['id']}", json={"status": "active"}, headers=api.auth
    )
    assert enabled.status_code == 200
    assert (await api.ask_bot(bot["id"], question))["hits"]


async def test_requested_kbs_narrow_but_never_widen_a_bots_access(api: Api) -> None:
    kb_a, (doc_a,) = await _kb_with(api, ("a.md", "# A\n\nThe lantern code is amber."))
    kb_b, _ = await _kb_with(api, ("b.md", "# B\n\nThe lantern code is blue."))
    bot = await _bot(api, enabled=True, kb_ids=[kb_a["id"]], score_threshold=0.0)
    question = "What is the lantern code?"
    assert {h["document_id"] for h in (await api.ask_bot(bot["id"], question))["hits"]} == {doc_a}
    only_b = await api.ask_bot(bot["id"], question, kb_ids=[kb_b["id"]])
    assert only_b["hits"] == []
    both = await api.ask_bot(bot["id"], question, kb_ids=[kb_b["id"], kb_a["id"]])
    assert {h["document_id"] for h in both["hits"]} == {doc_a}
    off = await _patch(api, bot["id"], enabled=False)
    assert off["knowledge"]["enabled"] is False
    assert (await api.ask_bot(bot["id"], question))["hits"] == []


async def test_adjacent_chunks_merge_and_a_token_budget_trims(api: Api) -> None:
    body = " ".join(
        f"Pallet {n} of the night shift is checked against manifest line {n}." for n in range(80)
    )
    kb, _ = await _kb_with(api, ("shift.md", "# Night shift\n\n" + body))
    bot = await _bot(api, enabled=True, kb_ids=[kb["id"]], score_threshold=0.0, top_k=5)
    merged = await api.ask_bot(bot["id"], "night shift pallets checked against the manifest")
    assert len(merged["hits"]) < 5
    first = merged["hits"][0]
    assert "merged" in first["retrieval_rationale"]
    # Merged without repeating the chunks' overlap: a stretch of the document as written.
    assert first["chunk_text"] in "# Night shift\n\n" + body
    assert len(first["chunk_text"]) > 1200
    budget = await api.ask_bot(
        bot["id"], "night shift pallets checked against the manifest", max_context_tokens=50
    )
    assert len(budget["hits"]) == 1
    assert len(budget["hits"][0]["chunk_text"]) <= 200
