"""Pure result shaping of the search service."""

from __future__ import annotations

from api.services.shaping import (
    Passage,
    estimate_tokens,
    merge_adjacent,
    newest_versions,
    within_budget,
)
from infra.vectorstore.base import ScoredChunk


def _chunk(document: str, source: str, version: int, kb: str = "kb1") -> ScoredChunk:
    return ScoredChunk(
        point_id=f"{document}-{version}",
        score=0.5,
        payload={"document_id": document, "kb_id": kb, "source_key": source, "version": version},
    )


def test_one_answer_holds_one_version_of_a_source() -> None:
    hits = [
        _chunk("old", "file:a.pdf", 1),
        _chunk("new", "file:a.pdf", 2),
        _chunk("old", "file:a.pdf", 1),
        _chunk("other", "file:b.pdf", 1),
        _chunk("same-name-other-kb", "file:a.pdf", 1, kb="kb2"),
    ]
    kept = [h.payload["document_id"] for h in newest_versions(hits)]
    assert kept == ["new", "other", "same-name-other-kb"]


def _passage(document: str, index: int, text: str, start: int, rank: int) -> Passage:
    return Passage(
        payload={"document_id": document},
        text=text,
        score=1.0 / (rank + 1),
        first_index=index,
        last_index=index,
        start=start,
        end=start + len(text),
        rationale=f"rank {rank}",
        rank=rank,
    )


def test_neighbouring_chunks_merge_without_their_overlap() -> None:
    document = "The first sentence. The second sentence. The third sentence. The fourth one."
    chunks = [
        _passage("d", 0, document[0:40], 0, rank=2),
        _passage("d", 1, document[30:70], 30, rank=0),
        _passage("d", 3, document[60:], 60, rank=1),
        _passage("e", 1, "Another document.", 0, rank=3),
    ]
    merged = merge_adjacent(chunks)
    assert [(p.payload["document_id"], p.first_index, p.last_index) for p in merged] == [
        ("d", 0, 1),
        ("d", 3, 3),
        ("e", 1, 1),
    ]
    assert merged[0].text == document[0:70]
    assert merged[0].rank == 0
    assert merged[0].score == 1.0
    assert merged[0].rationale == "rank 0"


def test_a_token_budget_keeps_the_best_passages_that_fit() -> None:
    passages = [_passage("d", i, "x" * 400, i * 400, rank=i) for i in range(4)]
    assert estimate_tokens("x" * 400) == 100
    assert [p.first_index for p in within_budget(passages, 250)] == [0, 1]
    assert within_budget(passages, None) == passages
    cut = within_budget(passages, 40)
    assert len(cut) == 1
    assert len(cut[0].text) == 160
