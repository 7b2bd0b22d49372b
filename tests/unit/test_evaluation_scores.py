"""The evaluation's figures against hand computation (pure logic)."""

from __future__ import annotations

import math
from datetime import UTC, datetime

import pytest

from core.errors import Conflict
from core.retrieval import FusionMethod, RetrievalMode
from schemas.domain import RetrievalConfig
from schemas.evaluation import ConfigResult, Evaluation, Scores
from schemas.search import AlsoIn, SearchHit
from services.evaluation_service import (
    DEFAULT,
    Expectation,
    best_over,
    gain,
    is_offered,
    mean_scores,
    score_case,
)


def _hit(document_id: str, text: str, also_in: tuple[str, ...] = ()) -> SearchHit:
    return SearchHit(
        score=0.5,
        chunk_text=text,
        document_id=document_id,
        document_title=document_id,
        source_name=f"{document_id}.pdf",
        kb_id="kb",
        chunk_index=0,
        retrieval_rationale="",
        also_in=[
            AlsoIn(document_id=d, document_title=d, source_name=d, kb_id="kb", chunk_index=0)
            for d in also_in
        ],
    )


def test_hits_cover_expected_documents_copies_and_snippets() -> None:
    expectation = Expectation(
        items=("doc_a", "doc_b", "Refunds are paid  within FIVE days"),
        documents=frozenset({"doc_a", "doc_b"}),
    )
    assert expectation.covered_by(_hit("doc_a", "x")) == {"doc_a"}
    assert expectation.covered_by(_hit("doc_c", "x", also_in=("doc_b",))) == {"doc_b"}
    text = "Policy.\nRefunds are paid within five\ndays of the return."
    assert expectation.covered_by(_hit("doc_c", text)) == {"Refunds are paid  within FIVE days"}
    # A snippet that happens to look like an id of no document is still text to find.
    loose = Expectation(items=("doc_zzz",), documents=frozenset())
    assert loose.covered_by(_hit("doc_zzz", "nothing here")) == set()


def test_one_expected_item_found_third() -> None:
    scores = score_case([set(), set(), {"a"}, set()], ["a"], k=4)
    assert scores.recall_at_k == 1.0
    assert scores.reciprocal_rank == pytest.approx(1 / 3)
    assert scores.ndcg_at_10 == pytest.approx(1 / math.log2(4))
    assert scores.missing == []
    outside_k = score_case([set(), set(), {"a"}], ["a"], k=2)
    assert (outside_k.recall_at_k, outside_k.recall_at_10) == (0.0, 1.0)
    assert outside_k.missing == ["a"]


def test_two_expected_items_one_repeated_one_missing() -> None:
    # Ranks: 1 covers a, 2 covers a again (no gain), 5 covers b; c is never found.
    covered = [{"a"}, {"a"}, set(), set(), {"b"}]
    scores = score_case(covered, ["a", "b", "c"], k=4)
    assert scores.recall_at_k == pytest.approx(1 / 3)
    assert scores.recall_at_10 == pytest.approx(2 / 3)
    assert scores.reciprocal_rank == 1.0
    ideal = 1 + 1 / math.log2(3) + 1 / math.log2(4)
    assert scores.ndcg_at_10 == pytest.approx((1 + 1 / math.log2(6)) / ideal)
    assert scores.missing == ["b", "c"]


def test_nothing_found_and_the_mean_over_cases() -> None:
    nothing = score_case([set()] * 10, ["a"], k=4)
    assert (nothing.recall_at_k, nothing.reciprocal_rank, nothing.ndcg_at_10) == (0, 0, 0)
    first = score_case([{"a"}], ["a"], k=4)
    mean = mean_scores([nothing, first])
    assert (mean.recall_at_k, mean.mrr, mean.ndcg_at_10) == (0.5, 0.5, 0.5)
    # Hits beyond rank 10 do not count.
    late = score_case([set()] * 10 + [{"a"}], ["a"], k=4)
    assert late.recall_at_10 == 0.0


def _result(config: RetrievalConfig, per_case: list[float]) -> ConfigResult:
    mean = sum(per_case) / len(per_case) if per_case else 0.0
    scores = Scores(recall_at_k=mean, recall_at_10=mean, mrr=mean, ndcg_at_10=mean)
    return ConfigResult(config=config, scores=scores, per_case=per_case)


DENSE = RetrievalConfig(retrieval_mode=RetrievalMode.DENSE)
SPARSE = RetrievalConfig(retrieval_mode=RetrievalMode.SPARSE)


def _evaluation(best: ConfigResult, *others: ConfigResult) -> Evaluation:
    return Evaluation(
        id="eval_1",
        tenant_id="t",
        kb_id="kb",
        created_at=datetime.now(UTC),
        k=4,
        case_count=len(best.per_case),
        modes={},
        tried=[best, *others],
        best=best.config,
        best_scores=best.scores,
    )


def test_the_best_is_applied_by_itself_only_when_a_paired_test_calls_it_a_gain() -> None:
    # Better on all eight cases: p = 2 / 2**8 under sign flips.
    clear = _evaluation(
        _result(DENSE, [1.0] * 8), _result(SPARSE, [0.0] * 8), _result(DEFAULT, [0.9] * 8)
    )
    found = gain(clear.tried[0], clear.tried[1])
    assert found is not None
    assert (found.wins, found.losses, found.ties, found.difference) == (8, 0, 0, 1.0)
    assert found.significant
    assert is_offered(found)
    assert best_over(clear, SPARSE, "the knowledge base").config == DENSE
    # Better on one case in two: no finding, and the refusal says why.
    close = _evaluation(_result(DENSE, [1.0, 0.5]), _result(SPARSE, [0.5, 0.5]))
    assert not is_offered(gain(close.tried[0], close.tried[1]))
    with pytest.raises(Conflict, match=r"is not a significant gain over the knowledge base's "
                       r"current sparse on this KB's 2 cases \(nDCG@10 \+0\.2500, 1 better, "
                       r"0 worse, p = "):  # fmt: skip
        best_over(close, SPARSE, "the knowledge base")
    # The best already in use; a current configuration the evaluation did not measure; an
    # evaluation kept before per-case figures were.
    with pytest.raises(Conflict, match="is already the knowledge base's configuration"):
        best_over(clear, DENSE, "the knowledge base")
    with pytest.raises(Conflict, match=r"did not measure bot 'b1''s current configuration"):
        best_over(
            clear,
            RetrievalConfig(retrieval_mode=RetrievalMode.HYBRID, fusion=FusionMethod.RRF, rrf_k=7),
            "bot 'b1'",
        )
    old = _evaluation(_result(DENSE, []), _result(SPARSE, []))
    with pytest.raises(Conflict, match="keeps no per-case figures"):
        best_over(old, SPARSE, "the knowledge base")
