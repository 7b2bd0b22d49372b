"""The payload of a chunk in the vector store: written by the index stage, read by search, result
shaping and the chunks endpoint. A new field is added here and nowhere else."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from core.copies import copy_signature
from schemas.domain import CONTEXT_SEPARATOR


class ChunkPayload(BaseModel):
    """Everything stored with a chunk's vectors: what filters select on and what cites it."""

    model_config = ConfigDict(frozen=True)

    # What every search and delete filters on (indexed in the store).
    tenant_id: str
    kb_id: str
    document_id: str
    source_key: str = ""
    version: int = 0
    chunk_index: int
    # Hidden until its document's last batch is in (`VectorStore.publish_document`).
    active: bool = False
    # The principals that may read it (`core.governance`): set when its document is published
    # and whenever the document's visibility changes.
    readers: list[str] = Field(default_factory=list)
    chunk_id: str = ""
    # The exact source text that is cited.
    chunk_text: str
    # The prefix the chunk was embedded with.
    context: str = ""
    # What the text is made of (`core.copies`): search tells copies apart by it without reading
    # texts. Computed from the text when not given (a payload written before it existed).
    copy_signature: str = Field(
        default_factory=lambda data: copy_signature(str(data.get("chunk_text", "")))
    )
    # The terms the chunk holds (`core.sparse.packed_terms` of its embedding text): search
    # tells an exact keyword match by them without reading the sparse vector. Empty in a
    # payload written before it existed (search then reads them from the text).
    terms: str = ""
    # Where the text is, for citations.
    source_name: str = ""
    document_title: str = ""
    page: int | None = None
    heading_path: list[str] = Field(default_factory=list)
    start: int | None = None
    end: int | None = None
    url: str | None = None
    # When this chunk was written (ISO 8601, UTC): how fresh an answer is.
    indexed_at: str | None = None

    @property
    def title(self) -> str:
        """The document's title for a citation (its file name if it has none)."""
        return self.document_title or self.source_name

    @property
    def embedding_text(self) -> str:
        """The exact string the chunk was embedded (dense and sparse) as: context, then text."""
        if not self.context:
            return self.chunk_text
        return f"{self.context}{CONTEXT_SEPARATOR}{self.chunk_text}"

    @property
    def version_line(self) -> tuple[str, str]:
        """The source this chunk is a version of: one version of it is shown at a time."""
        return self.kb_id, self.source_key or self.document_id

    def to_store(self) -> dict[str, Any]:
        """The payload as the vector store keeps it."""
        return self.model_dump()

    @classmethod
    def from_store(cls, raw: dict[str, Any] | None) -> ChunkPayload:
        """A payload read back from the vector store."""
        return cls.model_validate(raw or {})
