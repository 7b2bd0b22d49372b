"""Pure result shaping of the search service."""

from __future__ import annotations

from api.services.shaping import newest_versions
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
