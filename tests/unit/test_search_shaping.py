"""Pure result shaping of the search service."""

from __future__ import annotations

from schemas.chunks import ChunkPayload
from services.search.shaping import (
    Piece,
    assemble,
    estimate_tokens,
    newest_versions,
    text_of,
    within_budget,
)


def _chunk(document: str, source: str, version: int, kb: str = "kb1") -> Piece:
    return Piece(
        point_id=f"{document}-{version}",
        payload=ChunkPayload(
            tenant_id="t1",
            kb_id=kb,
            document_id=document,
            source_key=source,
            version=version,
            chunk_index=0,
            chunk_text="",
        ),
        score=0.5,
        rank=0,
    )


def test_one_answer_holds_one_version_of_a_source() -> None:
    hits = [
        _chunk("old", "file:a.pdf", 1),
        _chunk("new", "file:a.pdf", 2),
        _chunk("old", "file:a.pdf", 1),
        _chunk("other", "file:b.pdf", 1),
        _chunk("same-name-other-kb", "file:a.pdf", 1, kb="kb2"),
    ]
    kept = [h.document_id for h in newest_versions(hits)]
    assert kept == ["new", "other", "same-name-other-kb"]


def _passage(document: str, index: int, text: str, start: int, rank: int) -> Piece:
    return Piece(
        point_id=f"{document}-{index}",
        payload=ChunkPayload(
            tenant_id="t1",
            kb_id="kb1",
            document_id=document,
            chunk_index=index,
            chunk_text=text,
            start=start,
            end=start + len(text),
        ),
        score=1.0 / (rank + 1),
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
    merged = assemble(sorted(chunks, key=lambda p: p.rank), 4, copy_threshold=0.5, max_chunks=3)
    assert [(p.document_id, p.first_index, p.last_index) for p in merged] == [
        ("d", 0, 1),
        ("d", 3, 3),
        ("e", 1, 1),
    ]
    assert text_of(merged[0]) == document[0:70]
    assert merged[0].rank == 0
    assert merged[0].score == 1.0


def test_a_token_budget_keeps_the_best_passages_that_fit() -> None:
    texts = [str(i) * 400 for i in range(4)]
    assert estimate_tokens("x" * 400) == 100
    assert within_budget(texts, 250) == texts[:2]
    assert within_budget(texts, None) == texts
    cut = within_budget(texts, 40)
    assert cut == ["0" * 160]


def test_merged_neighbours_are_capped_and_copies_refill_the_answer() -> None:
    words = [f"w{i}" for i in range(400)]
    text = " ".join(words)
    # Document d in chunks of 40 words overlapping by 10; its twin t cut the same way.
    chunks = [
        (doc, i, " ".join(words[i * 30 : i * 30 + 40])) for i in range(10) for doc in ("d", "t")
    ]
    ranked = [
        _passage(doc, index, body, text.index(body), rank)
        for rank, (doc, index, body) in enumerate(chunks)
    ]
    kept = assemble(ranked, limit=3, copy_threshold=0.5, max_chunks=3)
    # d's chunks 0-2 merge (the cap), t's copies fold into them, then 3-5 and 6-8.
    assert [(p.document_id, p.first_index, p.last_index) for p in kept] == [
        ("d", 0, 2),
        ("d", 3, 5),
        ("d", 6, 8),
    ]
    assert [(copy.document_id, copy.chunk_index) for copy in kept[0].also_in] == [("t", 0)]
    assert text_of(kept[0]) == " ".join(words[0:100])


def test_a_grown_passage_takes_in_a_copy_it_now_holds() -> None:
    words = [f"w{i}" for i in range(80)]
    text = " ".join(words)
    first, second = " ".join(words[:40]), " ".join(words[40:])
    # The twin was cut elsewhere: its chunk straddles d's two chunks, half of each.
    straddling = " ".join(words[20:60])
    ranked = [
        _passage("d", 0, first, 0, rank=0),
        _passage("t", 3, straddling, 0, rank=1),
        _passage("d", 1, second, text.index(second), rank=2),
    ]
    kept = assemble(ranked, limit=4, copy_threshold=0.5, max_chunks=3)
    assert [(p.document_id, p.first_index, p.last_index) for p in kept] == [("d", 0, 1)]
    assert [(copy.document_id, copy.chunk_index) for copy in kept[0].also_in] == [("t", 3)]


def test_a_short_last_chunk_inside_the_overlap_joins_its_neighbour() -> None:
    words = [f"w{i}" for i in range(50)]
    text = " ".join(words)
    # The last chunk is short and mostly the overlap with the one before: more of the same
    # stretch of the document, not a copy of it.
    before, tail = " ".join(words[:46]), " ".join(words[36:])
    ranked = [
        _passage("d", 5, tail, text.index(tail), rank=0),
        _passage("d", 4, before, 0, rank=1),
    ]
    kept = assemble(ranked, limit=4, copy_threshold=0.5, max_chunks=3)
    assert [(p.first_index, p.last_index) for p in kept] == [(4, 5)]
    assert text_of(kept[0]) == text
    assert kept[0].also_in == ()
