"""The evaluation's figures against hand computation (pure logic)."""

from __future__ import annotations

import math

import pytest

from schemas.search import AlsoIn, SearchHit
from services.evaluation_service import Expectation, mean_scores, score_case


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
