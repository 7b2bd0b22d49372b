"""What the framework retrievers' tests share: the metadata every retrieved passage carries."""

from __future__ import annotations

# Every key of a retrieved passage's metadata, with the types its values take.
METADATA_TYPES: dict[str, tuple[type, ...]] = {
    "document_id": (str,),
    "kb_id": (str,),
    "title": (str,),
    "citation": (str,),
    "heading_path": (list,),
    "page": (int, type(None)),
    "url": (str, type(None)),
    "chunk_index": (int,),
    "score": (float,),
    "retrieval_rationale": (str,),
}
