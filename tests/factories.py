"""Builders of domain records for tests."""

from __future__ import annotations

from typing import Any

from schemas.domain import Document, ParseStatus, file_source_key, new_document_id, utcnow


def make_document(tenant_id: str = "acme", kb_id: str = "kb_1", **overrides: Any) -> Document:
    """A queued document of `a.txt`, with any field overridden."""
    now = utcnow()
    values: dict[str, Any] = {
        "id": new_document_id(),
        "tenant_id": tenant_id,
        "kb_id": kb_id,
        "filename": "a.txt",
        "title": "a.txt",
        "content_type": "text/plain",
        "size_bytes": 3,
        "sha256": "0" * 64,
        "storage_key": "gridfs:originals/000000000000000000000000",
        "source_key": file_source_key("a.txt"),
        "parse_status": ParseStatus.QUEUED,
        "created_at": now,
        "updated_at": now,
    }
    values.update(overrides)
    return Document.model_validate(values)
