"""What the framework integrations make of a search result, whatever the framework: its id and
its metadata. No framework is imported here."""

from __future__ import annotations

from typing import Any

from ragline_client.models import KnowledgeResult


def passage_id(hit: KnowledgeResult) -> str:
    """A passage's stable id: `"{document_id}:{chunk_index}"`."""
    return f"{hit.source}:{hit.chunk_index}"


def hit_metadata(hit: KnowledgeResult) -> dict[str, Any]:
    """A result's metadata: `document_id`, `kb_id`, `title`, `citation` (ready to show under
    an answer), `heading_path` (a list, empty when the passage has no headings), `page` and
    `url` (None when the document has none), `chunk_index`, `score` (0 to 1) and
    `retrieval_rationale` (why it was found)."""
    return {
        "document_id": hit.source,
        "kb_id": hit.kb_id,
        "title": hit.document_title,
        "citation": hit.citation,
        "heading_path": list(hit.heading_path or []),
        "page": hit.page,
        "url": hit.url,
        "chunk_index": hit.chunk_index,
        "score": hit.score,
        "retrieval_rationale": hit.retrieval_rationale,
    }
