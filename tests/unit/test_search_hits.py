"""A search hit has one model, `SearchHit`; its REST, MCP, playground and event shapes are each
made from it by their `of`, with the JSON each transport has always sent."""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel

from schemas.domain import chunk_id
from schemas.events import RetrievedChunk
from schemas.search import AgentHit, AlsoIn, KnowledgeResult, PlaygroundHit, SearchHit

COPY = AlsoIn(
    document_id="doc_copy",
    document_title="Copy",
    source_name="copy.pdf",
    kb_id="kb_b",
    page=2,
    chunk_index=7,
)
HIT = SearchHit(
    score=0.8125,
    chunk_text="Torque the bolts to 40 Nm.",
    document_id="doc_1",
    document_title="Service handbook",
    source_name="handbook.pdf",
    kb_id="kb_a",
    chunk_index=3,
    page=12,
    heading_path=["Maintenance", "Wheels"],
    url="https://example.com/handbook",
    retrieval_rationale="dense #1; sparse #2",
    also_in=[COPY],
    indexed_at="2026-01-02T03:04:05+00:00",
)
CITATION = "Service handbook, p. 12, Maintenance > Wheels, https://example.com/handbook"
COPY_JSON = COPY.model_dump(mode="json")


def _json(model: BaseModel) -> dict[str, Any]:
    return model.model_dump(mode="json")


def _sent(value: dict[str, Any]) -> str:
    """JSON text as pydantic writes it: no spaces."""
    return json.dumps(value, separators=(",", ":"))


def test_the_hit_cites_its_document_page_headings_and_url() -> None:
    assert HIT.cited_as == CITATION


def test_a_persons_search_shows_the_hit_as_a_knowledge_result() -> None:
    assert _json(KnowledgeResult.of(HIT)) == {
        "content": HIT.chunk_text,
        "source": HIT.document_id,
        "score": HIT.score,
        "document_title": HIT.document_title,
        "chunk_index": HIT.chunk_index,
        "retrieval_rationale": HIT.retrieval_rationale,
        "kb_id": HIT.kb_id,
        "page": HIT.page,
        "heading_path": HIT.heading_path,
        "url": HIT.url,
        "citation": CITATION,
        "also_in": [COPY_JSON],
    }


def test_an_agent_reads_the_hit_as_an_agent_hit() -> None:
    assert _json(AgentHit.of(HIT)) == {
        "text": HIT.chunk_text,
        "score": HIT.score,
        "title": HIT.document_title,
        "source": HIT.document_id,
        "kb_id": HIT.kb_id,
        "page": HIT.page,
        "heading_path": HIT.heading_path,
        "url": HIT.url,
        "indexed_at": HIT.indexed_at,
        "citation": CITATION,
        "also_in": [COPY_JSON],
    }


def test_each_shape_sends_the_same_json_field_for_field_and_in_the_same_order() -> None:
    copy = {
        "document_id": "doc_copy",
        "document_title": "Copy",
        "source_name": "copy.pdf",
        "kb_id": "kb_b",
        "page": 2,
        "chunk_index": 7,
    }
    knowledge_result = {
        "content": "Torque the bolts to 40 Nm.",
        "source": "doc_1",
        "score": 0.8125,
        "document_title": "Service handbook",
        "chunk_index": 3,
        "retrieval_rationale": "dense #1; sparse #2",
        "kb_id": "kb_a",
        "page": 12,
        "heading_path": ["Maintenance", "Wheels"],
        "url": "https://example.com/handbook",
        "citation": "Service handbook, p. 12, Maintenance > Wheels, https://example.com/handbook",
        "also_in": [copy],
    }
    agent_hit = {
        "text": "Torque the bolts to 40 Nm.",
        "score": 0.8125,
        "title": "Service handbook",
        "source": "doc_1",
        "kb_id": "kb_a",
        "page": 12,
        "heading_path": ["Maintenance", "Wheels"],
        "url": "https://example.com/handbook",
        "indexed_at": "2026-01-02T03:04:05+00:00",
        "citation": "Service handbook, p. 12, Maintenance > Wheels, https://example.com/handbook",
        "also_in": [copy],
    }

    # As sent: the text itself, so that the fields' order counts too.
    assert KnowledgeResult.of(HIT).model_dump_json() == _sent(knowledge_result)
    assert AgentHit.of(HIT).model_dump_json() == _sent(agent_hit)


def test_the_playground_shows_the_bots_hit_and_its_citation() -> None:
    assert _json(PlaygroundHit.of(HIT)) == {**_json(HIT), "citation": CITATION}


def test_the_retrieval_event_names_the_hits_first_chunk() -> None:
    assert _json(RetrievedChunk.of(HIT)) == {
        "chunk_id": chunk_id(HIT.document_id, HIT.chunk_index),
        "document_id": HIT.document_id,
        "kb_id": HIT.kb_id,
        "score": HIT.score,
    }


def test_each_shape_is_made_from_a_search_hit_and_nothing_else() -> None:
    shapes: tuple[Any, ...] = (KnowledgeResult, AgentHit, PlaygroundHit, RetrievedChunk)
    for shape in shapes:
        assert shape.of.__annotations__ == {"hit": "SearchHit", "return": shape.__name__}
    # A hit without the optional parts still makes every shape.
    bare = SearchHit(
        score=0.5,
        chunk_text="text",
        document_id="doc_2",
        document_title="",
        source_name="notes.txt",
        kb_id="kb_a",
        chunk_index=0,
        retrieval_rationale="sparse #1",
    )
    assert KnowledgeResult.of(bare).citation == "notes.txt"
    assert AgentHit.of(bare).also_in == []
    assert PlaygroundHit.of(bare).citation == "notes.txt"
    assert RetrievedChunk.of(bare).chunk_id == chunk_id("doc_2", 0)
