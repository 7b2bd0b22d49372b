"""Per-KB evaluations: an admin's cases run through every retrieval mode, figures kept."""

from __future__ import annotations

import math
from typing import Any

import pytest

from tests.e2e.client import Api
from tests.factories import KAYAK_SHOP

pytestmark = pytest.mark.e2e

DOCUMENTS = KAYAK_SHOP


async def _kb(api: Api) -> tuple[str, dict[str, str]]:
    kb = await api.create_kb("Evaluated")
    ids = {}
    for name, text in DOCUMENTS.items():
        uploaded = await api.upload(kb["id"], name, text.encode())
        ids[name] = (await api.wait_final(kb["id"], uploaded["id"]))["id"]
    return kb["id"], ids


async def _evaluate(api: Api, kb_id: str, body: dict[str, Any], expect: int = 201) -> Any:
    response = await api.http.post(
        f"/api/v1/knowledge-bases/{kb_id}/evaluations", json=body, headers=api.auth, timeout=120
    )
    assert response.status_code == expect, response.text
    return response.json()


async def _ranking(api: Api, kb_id: str, query: str, config: dict[str, Any]) -> list[Any]:
    body = {
        "tenant_id": "default",
        "kb_ids": [kb_id],
        "query": query,
        "top_k": 10,
        "score_threshold": 0.0,
        **{key: value for key, value in config.items() if value is not None},
    }
    return await api.internal_search(body)


def _by_hand(hits: list[Any], expected: list[str], ids: set[str], k: int) -> tuple[float, ...]:
    """recall@k, recall@10, reciprocal rank, nDCG@10 of one ranking, as the README defines."""
    covered = []
    for hit in hits[:10]:
        documents = {hit["document_id"], *(copy["document_id"] for copy in hit["also_in"])}
        text = " ".join(hit["chunk_text"].lower().split())
        covered.append(
            {
                item
                for item in expected
                if (item in documents if item in ids else " ".join(item.lower().split()) in text)
            }
        )
    first = next((rank for rank, items in enumerate(covered, 1) if items), None)
    seen: set[str] = set()
    dcg = 0.0
    for rank, items in enumerate(covered, 1):
        if items - seen:
            dcg += 1 / math.log2(rank + 1)
        seen |= items
    in_k = set().union(*covered[:k]) if covered else set()
    ideal = sum(1 / math.log2(rank + 1) for rank in range(1, min(len(expected), 10) + 1))
    return (len(in_k) / len(expected), len(seen) / len(expected), 1 / first if first else 0.0,
            dcg / ideal)  # fmt: skip


async def test_an_evaluation_gives_the_figures_a_hand_computation_gives(api: Api) -> None:
    kb_id, ids = await _kb(api)
    cases: list[dict[str, Any]] = [
        {"query": "How long do I have to return a kayak?", "expected": [ids["returns.md"]]},
        {"query": "Which days do orders ship?", "expected": ["ship from ROTTERDAM  every"]},
        {
            "query": "Is there a warranty on paddles?",
            "expected": [ids["warranty.md"], "a sentence that is in no document"],
        },
        {"query": "kayak", "expected": [ids["care.md"], ids["returns.md"]]},
    ]
    evaluation = await _evaluate(api, kb_id, {"cases": cases, "k": 2})
    assert evaluation["id"].startswith("eval_")
    assert (evaluation["kb_id"], evaluation["k"], evaluation["case_count"]) == (kb_id, 2, 4)
    tried = evaluation["tried"]
    modes = {result["config"]["retrieval_mode"] for result in tried}
    assert modes == {"dense", "sparse", "hybrid"}
    assert {r["config"]["fusion"] for r in tried if r["config"]["retrieval_mode"] == "hybrid"} == {
        "convex",
        "rrf",
    }
    for result in tried:
        figures = [
            _by_hand(
                await _ranking(api, kb_id, case["query"], result["config"]),
                case["expected"],
                set(ids.values()),
                k=2,
            )
            for case in cases
        ]
        mean = [round(sum(column) / len(cases), 4) for column in zip(*figures, strict=True)]
        scores = result["scores"]
        assert [
            scores["recall_at_k"],
            scores["recall_at_10"],
            scores["mrr"],
            scores["ndcg_at_10"],
        ] == pytest.approx(mean, abs=1e-4), result["config"]
    # The unreachable snippet is a miss in every mode, shown with what came back instead.
    for mode, result in evaluation["modes"].items():
        assert result["config"]["retrieval_mode"] == mode
        missed = {miss["query"]: miss for miss in result["misses"]}
        miss = missed["Is there a warranty on paddles?"]
        assert "a sentence that is in no document" in miss["missing"]
        assert miss["returned"]
        assert {"document_id", "document_title", "score", "text"} <= set(miss["returned"][0])
    assert evaluation["best"]["retrieval_mode"] in {"dense", "hybrid"}
    best = next(r for r in tried if r["config"] == evaluation["best"])
    assert best["scores"] == evaluation["best_scores"]
    # Kept: the same body comes back by id and in the list.
    again = await api.http.get(
        f"/api/v1/knowledge-bases/{kb_id}/evaluations/{evaluation['id']}", headers=api.auth
    )
    assert again.status_code == 200
    assert again.json() == evaluation
    listed = await api.http.get(f"/api/v1/knowledge-bases/{kb_id}/evaluations", headers=api.auth)
    assert [item["id"] for item in listed.json()] == [evaluation["id"]]


async def test_an_obvious_case_scores_one_and_an_absent_answer_zero(api: Api) -> None:
    kb_id, ids = await _kb(api)
    found = await _evaluate(
        api,
        kb_id,
        {
            "cases": [
                {"query": "return a kayak within thirty days", "expected": [ids["returns.md"]]}
            ]
        },
    )
    for result in found["tried"]:
        assert result["scores"] == {"recall_at_k": 1, "recall_at_10": 1, "mrr": 1, "ndcg_at_10": 1}
        assert result["misses"] == []
    absent = await _evaluate(
        api, kb_id, {"cases": [{"query": "opening hours", "expected": ["open on Sundays"]}]}
    )
    for result in absent["tried"]:
        assert result["scores"] == {"recall_at_k": 0, "recall_at_10": 0, "mrr": 0, "ndcg_at_10": 0}


async def test_bad_evaluations_are_refused_with_a_reason(api: Api) -> None:
    kb = await api.create_kb("Empty")
    case = {"query": "anything", "expected": ["x"]}
    for body, field in (
        ({"cases": []}, "cases"),
        ({"cases": [{"query": "  ", "expected": ["x"]}]}, "cases.0.query"),
        ({"cases": [{"query": "q", "expected": []}]}, "cases.0.expected"),
        ({"cases": [case] * 101}, "cases"),
        ({"cases": [case], "k": 11}, "k"),
    ):
        refused = await _evaluate(api, kb["id"], body, expect=422)
        assert refused["detail"].startswith(field), refused
    missing = await _evaluate(api, "kb_does_not_exist", {"cases": [case]}, expect=404)
    assert "kb_does_not_exist" in missing["detail"]
    unknown = await api.http.get(
        f"/api/v1/knowledge-bases/{kb['id']}/evaluations/eval_0000", headers=api.auth
    )
    assert unknown.status_code == 404
    await api.http.delete(f"/api/v1/knowledge-bases/{kb['id']}", headers=api.auth)
    disabled = await _evaluate(api, kb["id"], {"cases": [case]}, expect=409)
    assert "disabled" in disabled["detail"]
