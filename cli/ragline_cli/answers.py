"""What the CLI reads from the API's answers, the client library's models
(`ragline_client.models`): labels for people, where a document is in the pipeline, and the
answers as JSON for `--json`."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import BaseModel, TypeAdapter

from ragline_client.models import DocumentOut, KnowledgeBaseOut, RetrievalConfig

# A document's statuses in pipeline order; `indexed` and `failed` are final.
PIPELINE = ("queued", "extracting", "chunking", "embedding", "indexing", "indexed")
FINAL_STATUSES = frozenset({"indexed", "failed"})

_MOMENT = TypeAdapter(datetime)


def as_json(answer: BaseModel) -> dict[str, Any]:
    """The answer as the API sent it: the fields it sent (not the model's defaults for those it
    left out), a newer API's extra fields too."""
    return answer.model_dump(mode="json", by_alias=True, exclude_unset=True)


def moment(value: datetime | None) -> str | None:
    """A time as the API writes it (`2025-05-01T09:30:00.120000Z`)."""
    return None if value is None else str(_MOMENT.dump_python(value, mode="json"))


def kb_label(kb: KnowledgeBaseOut) -> str:
    """How to name a knowledge base to a person: its code if it has one, else its id."""
    return kb.code or kb.id


def is_final(document: DocumentOut) -> bool:
    """Indexed or failed: the pipeline is done with it."""
    return document.parse_status in FINAL_STATUSES


def passed(document: DocumentOut, status: str) -> bool:
    """Whether the document has gone past this pipeline status."""
    if document.parse_status not in PIPELINE or status not in PIPELINE:
        return False
    return PIPELINE.index(document.parse_status) > PIPELINE.index(status)


def chunks_done(document: DocumentOut) -> int:
    """Chunks embedded so far (all of them once indexed)."""
    if document.parse_status == "indexed" and document.chunk_count is not None:
        return document.chunk_count
    if document.chunk_count is None:
        return document.chunks_embedded
    return min(document.chunks_embedded, document.chunk_count)


def config_label(config: RetrievalConfig) -> str:
    """`hybrid convex 0.5`, `hybrid convex per query`, `hybrid rrf k=60`, `hybrid dbsf 0.5`,
    `dense` (a bot's dense settings keep a fusion they do not use)."""
    if config.retrieval_mode != "hybrid":
        return config.retrieval_mode
    if config.fusion == "rrf" and config.rrf_k is not None:
        return f"{config.retrieval_mode} rrf k={config.rrf_k.root}"
    if config.fusion in ("convex", "dbsf", "zscore", "gated"):
        weight = "per query" if config.dense_weight is None else f"{config.dense_weight.root:g}"
        return f"{config.retrieval_mode} {config.fusion} {weight}"
    return config.retrieval_mode


def config_settings(config: RetrievalConfig) -> str:
    """A configuration as a bot's knowledge settings: `retrieval_mode=hybrid, fusion=rrf,
    rrf_k=60`."""
    settings = f"retrieval_mode={config.retrieval_mode}"
    if config.fusion:
        settings += f", fusion={config.fusion}"
        if config.fusion == "rrf" and config.rrf_k is not None:
            settings += f", rrf_k={config.rrf_k.root}"
        elif config.fusion != "rrf" and config.dense_weight is not None:
            settings += f", dense_weight={config.dense_weight.root:g}"
    return settings
