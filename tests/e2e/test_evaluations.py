"""Per-KB evaluations: an admin's cases run through every retrieval mode, figures kept."""

from __future__ import annotations

import asyncio
import math
from typing import Any

import pytest

from infra.mongo.client import connect
from infra.mongo.token_repository import TokenRepository
from schemas.domain import Role
from tests.conftest import RunningPipeline, unique
from tests.e2e.client import Api
from tests.e2e.test_mcp import answer, mcp_session
from tests.factories import KAYAK_QUESTIONS_IN_OTHER_WORDS, KAYAK_SHOP

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def stack(running_pipeline: RunningPipeline) -> RunningPipeline:
    """The session's stack with the packaged model: an evaluation's figures are the model's."""
    return running_pipeline


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
        "dbsf",
        "zscore",
        "gated",
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
    # Every configuration tried (each mode, each hybrid fusion) scores it so.
    assert {r["config"]["retrieval_mode"] for r in found["tried"]} == {"dense", "sparse", "hybrid"}
    for result in found["tried"]:
        assert result["scores"] == {"recall_at_k": 1, "recall_at_10": 1, "mrr": 1, "ndcg_at_10": 1}
        assert result["misses"] == []
    absent = await _evaluate(
        api, kb_id, {"cases": [{"query": "opening hours", "expected": ["open on Sundays"]}]}
    )
    assert len(absent["tried"]) == len(found["tried"])
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


# --- applying an evaluation's configuration ----------------------------------------------

CASES: list[dict[str, Any]] = [
    {"query": "How long do I have to return a kayak?", "expected": ["within thirty days"]},
    {"query": "Which days do orders ship?", "expected": ["every Tuesday and Friday"]},
]
SERVICE_DEFAULT = {
    "retrieval_mode": "hybrid",
    "fusion": "convex",
    "dense_weight": None,
    "rrf_k": 60,
}
DENSE = {"retrieval_mode": "dense", "fusion": None, "dense_weight": None, "rrf_k": None}
SPARSE = {"retrieval_mode": "sparse", "fusion": None, "dense_weight": None, "rrf_k": None}
RRF_20 = {"retrieval_mode": "hybrid", "fusion": "rrf", "dense_weight": None, "rrf_k": 20}


async def _apply(
    api: Api,
    kb_id: str,
    evaluation_id: str,
    body: dict[str, Any],
    expect: int = 200,
    auth: dict[str, str] | None = None,
) -> Any:
    response = await api.http.post(
        f"/api/v1/knowledge-bases/{kb_id}/evaluations/{evaluation_id}/apply",
        json=body,
        headers=auth or api.auth,
    )
    assert response.status_code == expect, response.text
    return response.json()


async def _attached_bot(api: Api, kb_ids: list[str]) -> dict[str, Any]:
    knowledge = {"enabled": True, "kb_ids": kb_ids, "score_threshold": 0.0, "top_k": 3}
    response = await api.http.post(
        "/api/v1/bots", json={"name": "Tuned", "knowledge": knowledge}, headers=api.auth
    )
    assert response.status_code == 201, response.text
    return dict(response.json())


async def _bot(api: Api, bot_id: str, auth: dict[str, str] | None = None) -> dict[str, Any]:
    response = await api.http.get(f"/api/v1/bots/{bot_id}", headers=auth or api.auth)
    assert response.status_code == 200, response.text
    return dict(response.json())


def _scores_of(evaluation: dict[str, Any], config: dict[str, Any]) -> dict[str, Any]:
    return dict(next(r["scores"] for r in evaluation["tried"] if r["config"] == config))


def _rationales(hits: list[dict[str, Any]]) -> set[str]:
    """How each hit was found: `semantic` (dense), `keyword` (sparse) or `hybrid`."""
    return {hit["retrieval_rationale"].split()[0].rstrip(":") for hit in hits}


def _ranked(hits: list[dict[str, Any]], source: str = "document_id") -> list[tuple[str, float]]:
    return [(hit[source], hit["score"]) for hit in hits]


async def _outsider(api: Api) -> dict[str, str]:
    """An admin of another tenant."""
    client = connect(api.running.settings().mongo)
    tokens = TokenRepository(client[api.running.database], "", "default")
    _, secret = await tokens.issue(unique("elsewhere"), Role.ADMIN, "outsider")
    await client.close()
    return {"Authorization": f"Bearer {secret}"}


async def test_a_configuration_applied_to_a_bot_is_what_the_bot_searches_with(api: Api) -> None:
    kb_id, _ = await _kb(api)
    evaluation = await _evaluate(api, kb_id, {"cases": CASES, "k": 2})
    bot = await _attached_bot(api, [kb_id])
    query = CASES[0]["query"]
    first = await api.ask_bot(bot["id"], query)
    assert _rationales(first["hits"]) == {"hybrid"}
    assert (await api.ask_bot_cached(bot["id"], query))["hits"] == first["hits"]

    # Dense, named: the bot's knowledge says so, its revision moved, its next answer is not
    # the one cached for its old settings and is a dense search's.
    body = {"target": "bot", "bot_id": bot["id"], "config": {"retrieval_mode": "dense"}}
    applied = await _apply(api, kb_id, evaluation["id"], body)
    assert applied == {
        "evaluation_id": evaluation["id"],
        "kb_id": kb_id,
        "target": "bot",
        "bot_id": bot["id"],
        "config": DENSE,
        "scores": _scores_of(evaluation, DENSE),
        "before": SERVICE_DEFAULT,
        "after": {**SERVICE_DEFAULT, "retrieval_mode": "dense"},
    }
    stored = await _bot(api, bot["id"])
    assert stored["knowledge"]["retrieval_mode"] == "dense"
    assert stored["revision"] == bot["revision"] + 1
    dense = await api.ask_bot(bot["id"], query)
    assert dense["metrics"]["cache"]["result"] is False
    assert dense["hits"]
    assert _rationales(dense["hits"]) == {"semantic"}

    # An RRF configuration: the bot fuses as the tenant form's search with those settings.
    body = {"target": "bot", "bot_id": bot["id"], "config": RRF_20}
    rrf = await _apply(api, kb_id, evaluation["id"], body)
    assert (rrf["before"], rrf["after"]) == (
        {**SERVICE_DEFAULT, "retrieval_mode": "dense"},
        {**SERVICE_DEFAULT, "fusion": "rrf", "rrf_k": 20},
    )
    knowledge = (await _bot(api, bot["id"]))["knowledge"]
    assert (knowledge["retrieval_mode"], knowledge["fusion"], knowledge["rrf_k"]) == (
        "hybrid",
        "rrf",
        20,
    )
    fused = await api.ask_bot(bot["id"], query)
    assert _rationales(fused["hits"]) == {"hybrid"}
    form = {"tenant_id": "default", "kb_ids": [kb_id], "query": query, "top_k": 3}
    like_rrf = await api.internal_search({**form, "fusion": "rrf", "rrf_k": 20})
    like_convex = await api.internal_search(form)
    assert _ranked(fused["hits"]) == _ranked(like_rrf)
    assert _ranked(fused["hits"]) != _ranked(like_convex)

    # Nothing named: the evaluation's best, which two cases cannot show to be a significant
    # gain over the bot's settings: refused, saying so, and the bot is left as it was.
    body = {"target": "bot", "bot_id": bot["id"]}
    refused = await _apply(api, kb_id, evaluation["id"], body, expect=409)
    best = evaluation["best"]
    assert refused["detail"].startswith(f"config: the evaluation's best, {_label(best)}, "), refused
    assert "nothing was applied" in refused["detail"]
    assert (await _bot(api, bot["id"]))["knowledge"]["fusion"] == "rrf"


async def test_the_best_is_applied_by_itself_only_when_it_is_a_significant_gain(
    api: Api,
) -> None:
    kb_id, ids = await _kb(api)
    asked = KAYAK_QUESTIONS_IN_OTHER_WORDS
    cases = [{"query": query, "expected": [ids[page]]} for query, page in asked]
    # Its searches made keyword searches (an evaluation's sparse configuration applied by
    # name): the best is a significant gain over that.
    first = await _evaluate(api, kb_id, {"cases": cases})
    await _apply(api, kb_id, first["id"], {"target": "kb", "config": SPARSE})
    evaluation = await _evaluate(api, kb_id, {"cases": cases})
    assert evaluation["current"] == SPARSE
    sparse = next(r for r in evaluation["tried"] if r["config"] == SPARSE)
    assert sparse["per_case"] == [0.0] * len(cases)
    gain = evaluation["gain"]
    assert gain["over"] == SPARSE
    assert (gain["wins"], gain["losses"], gain["ties"]) == (len(cases), 0, 0)
    assert gain["significant"]
    assert gain["p_value"] < 0.05
    assert gain["difference"] == pytest.approx(evaluation["best_scores"]["ndcg_at_10"], abs=1e-3)
    assert evaluation["offered"] is True

    applied = await _apply(api, kb_id, evaluation["id"], {"target": "kb"})
    assert (applied["before"], applied["config"]) == (SPARSE, evaluation["best"])
    assert (await api.kb(kb_id))["default_retrieval"] == applied["after"]

    # Asked again, the best is the knowledge base's configuration now: nothing is applied.
    refused = await _apply(api, kb_id, evaluation["id"], {"target": "kb"}, expect=409)
    assert "is already the knowledge base's configuration" in refused["detail"]
    assert "nothing was applied" in refused["detail"]
    assert (await api.kb(kb_id))["default_retrieval"] == applied["after"]


def _label(config: dict[str, Any]) -> str:
    if config["retrieval_mode"] != "hybrid":
        return str(config["retrieval_mode"])
    if config["fusion"] == "rrf":
        return f"hybrid, RRF k={config['rrf_k']}"
    names = {"convex": "convex", "dbsf": "DBSF", "zscore": "z-score", "gated": "gated"}
    weight = "per query" if config["dense_weight"] is None else config["dense_weight"]
    return f"hybrid, {names[config['fusion']]} {weight}"


async def test_a_configuration_applied_to_a_kb_is_what_peoples_searches_of_it_use(
    api: Api,
) -> None:
    kb_id, _ = await _kb(api)
    plain = await api.create_kb("Not tuned")
    note = await api.text(plain["id"], {"title": "Note", "content": "Kayaks are returned here."})
    await api.wait_final(plain["id"], note["id"])
    evaluation = await _evaluate(api, kb_id, {"cases": CASES})
    assert (await api.kb(kb_id))["default_retrieval"] is None
    query = "return a kayak"

    async def people(kb_ids: list[str], **extra: Any) -> list[dict[str, Any]]:
        body = {"query": query, "kb_ids": kb_ids, "score_threshold": 0.0, **extra}
        response = await api.http.post("/api/v1/knowledge/search", json=body, headers=api.auth)
        assert response.status_code == 200, response.text
        return list(response.json()["results"])

    assert _rationales(await people([kb_id])) == {"hybrid"}

    body = {"target": "kb", "config": {"retrieval_mode": "sparse"}}
    applied = await _apply(api, kb_id, evaluation["id"], body)
    assert applied == {
        "evaluation_id": evaluation["id"],
        "kb_id": kb_id,
        "target": "kb",
        "bot_id": None,
        "config": SPARSE,
        "scores": _scores_of(evaluation, SPARSE),
        "before": None,
        "after": SPARSE,
    }
    assert (await api.kb(kb_id))["default_retrieval"] == SPARSE
    # A person's search of the KB that names no mode is now a keyword search; one that names
    # a mode gets it; with a KB of another default (none) beside it, the service's default.
    sparse = await people([kb_id])
    assert sparse
    assert _rationales(sparse) == {"keyword"}
    assert _rationales(await people([kb_id], retrieval_mode="dense")) == {"semantic"}
    assert _rationales(await people([kb_id, plain["id"]])) == {"hybrid"}

    # An MCP user's search of the KB too (its passages carry no rationale: the same ranking).
    user = unique("tuned")
    issued = await api.http.post(
        "/api/v1/tokens",
        json={"name": user, "role": "user", "user_id": user},
        headers=api.auth,
    )
    token = issued.json()["token"]
    as_user = {"Authorization": f"Bearer {token}"}
    reference = await api.http.post(
        "/api/v1/knowledge/search",
        json={"query": query, "kb_ids": [kb_id], "retrieval_mode": "sparse"},
        headers=as_user,
    )
    async with mcp_session(api, token) as session:
        arguments = {"query": query, "kb_ids": [kb_id]}
        found = answer(await session.call_tool("knowledge_search", arguments))
    assert _ranked(found["results"], "source") == _ranked(reference.json()["results"], "source")

    # A hybrid default's fusion is used as well; a named hybrid mode keeps the KB's fusion.
    rrf = await _apply(api, kb_id, evaluation["id"], {"target": "kb", "config": RRF_20})
    assert (rrf["before"], rrf["after"]) == (SPARSE, RRF_20)
    form = {"tenant_id": "default", "kb_ids": [kb_id], "query": query, "score_threshold": 0.0}
    like_rrf = await api.internal_search({**form, "fusion": "rrf", "rrf_k": 20, "top_k": 5})
    assert _ranked(await people([kb_id]), "source") == _ranked(like_rrf)
    named = await people([kb_id], retrieval_mode="hybrid")
    assert _ranked(named, "source") == _ranked(like_rrf)


async def test_applying_is_refused_with_a_reason(api: Api) -> None:
    kb_id, _ = await _kb(api)
    other = await api.create_kb("Other")
    evaluation = await _evaluate(api, kb_id, {"cases": CASES[:1]})
    attached = await _attached_bot(api, [kb_id])
    elsewhere = await _attached_bot(api, [other["id"]])
    outsider = await _outsider(api)
    theirs = await api.http.post("/api/v1/bots", json={"name": "Theirs"}, headers=outsider)
    assert theirs.status_code == 201, theirs.text
    to_kb = {"target": "kb"}
    eid = evaluation["id"]

    # Not found: the evaluation under another KB, in another tenant, or none by that id; a
    # bot of another tenant.
    for kb, evaluation_id, body, auth in (
        (other["id"], eid, to_kb, None),
        (kb_id, eid, to_kb, outsider),
        (kb_id, "eval_0000", to_kb, None),
        (kb_id, eid, {"target": "bot", "bot_id": theirs.json()["id"]}, None),
    ):
        refused = await _apply(api, kb, evaluation_id, body, expect=404, auth=auth)
        assert "not found" in refused["detail"], refused
    # A bot without the KB: a conflict that says so.
    body = {"target": "bot", "bot_id": elsewhere["id"]}
    conflict = await _apply(api, kb_id, eid, body, expect=409)
    assert conflict["detail"].startswith(
        f"bot '{elsewhere['id']}' does not have knowledge base '{kb_id}' attached"
    )
    # A configuration the evaluation did not measure, a sparse one for a bot, a malformed body.
    unmeasured = {"retrieval_mode": "hybrid", "fusion": "convex", "dense_weight": 0.9}
    for body, start in (
        ({"target": "kb", "config": unmeasured}, f"config: evaluation '{eid}' did not measure"),
        (
            {"target": "bot", "bot_id": attached["id"], "config": {"retrieval_mode": "sparse"}},
            "config: bots do not search sparse",
        ),
        ({"target": "bot"}, "bot.bot_id"),
        ({"target": "everything"}, "body"),
        ({"target": "kb", "config": {"retrieval_mode": "dense", "k": 3}}, "kb.config.k"),
    ):
        refused = await _apply(api, kb_id, eid, body, expect=422)
        assert refused["detail"].startswith(start), refused
    assert (
        "hybrid, convex 0.9"
        in (await _apply(api, kb_id, eid, {"target": "kb", "config": unmeasured}, expect=422))[
            "detail"
        ]
    )
    # Nothing changed.
    assert (await api.kb(kb_id))["default_retrieval"] is None
    for bot in (attached, elsewhere):
        assert (await _bot(api, bot["id"]))["revision"] == bot["revision"]
    assert (await _bot(api, theirs.json()["id"], outsider))["revision"] == 0


async def test_an_applied_configuration_is_in_the_audit_log(api: Api) -> None:
    kb_id, _ = await _kb(api)
    evaluation = await _evaluate(api, kb_id, {"cases": CASES[:1]})
    bot = await _attached_bot(api, [kb_id])
    body = {"target": "bot", "bot_id": bot["id"], "config": {"retrieval_mode": "dense"}}
    applied = await _apply(api, kb_id, evaluation["id"], body)
    await _apply(api, kb_id, evaluation["id"], {**body, "config": SPARSE}, expect=422)

    # An entry is written once its answer has gone: the last may take a moment.
    path = f"/api/v1/knowledge-bases/{kb_id}/evaluations/{evaluation['id']}/apply"
    async with asyncio.timeout(10):
        while True:
            page = await api.http.get("/api/v1/audit", params={"limit": 20}, headers=api.auth)
            entries = [e for e in page.json()["items"] if e["path"] == path]
            if len(entries) == 2:
                break
            await asyncio.sleep(0.1)
    refused, done = entries
    assert (done["method"], done["status"], done["outcome"], done["role"]) == (
        "POST",
        200,
        "ok",
        "admin",
    )
    assert done["details"] == applied
    assert done["details"]["before"]["retrieval_mode"] == "hybrid"
    assert done["details"]["after"]["retrieval_mode"] == "dense"
    assert (refused["status"], refused["outcome"]) == (422, "refused")
    assert refused["details"] == {
        "evaluation_id": evaluation["id"],
        "kb_id": kb_id,
        "target": "bot",
        "bot_id": bot["id"],
        "config": {"retrieval_mode": "sparse"},
    }
