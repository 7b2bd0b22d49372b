"""What the stage handlers need from storage, as protocols (implemented in `infra`)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from infra.mongo.lifecycle import Finished, KbRevisions, Removed, Superseded
from schemas.domain import ChunkingProgress, Document, ExtractedDocument, ParseStatus
from schemas.events import Event


class DocumentStatus(Protocol):
    """A document's pipeline status (`infra.mongo.document_repository.DocumentRepository`)."""

    async def find(self, document_id: str) -> Document | None:
        """A document by id."""
        ...

    async def advance(
        self,
        document_id: str,
        generation: int,
        status: ParseStatus,
        *,
        first: bool = True,
        stores: Mapping[str, str] | None = None,
    ) -> Document | None:
        """Enters a batch stage, or checks the document is still current (`first`: the
        message is likely the one that enters it); the move stores `stores` too."""
        ...

    async def enter(
        self,
        document_id: str,
        generation: int,
        status: ParseStatus,
        *,
        stores: Mapping[str, str] | None = None,
    ) -> bool:
        """Moves the document into a stage's status (storing `stores` too), reading nothing
        back: True if this message moved it (the run is current and starts the stage now)."""
        ...

    async def touch(self, document_id: str, generation: int) -> None:
        """Notes that a stage is still working on the document."""
        ...

    async def save_chunking_progress(
        self, document_id: str, generation: int, done_part: int, progress: ChunkingProgress
    ) -> bool:
        """Records that part `done_part` is chunked (only if it was the next one)."""
        ...

    async def record_chunking(
        self,
        document_id: str,
        generation: int,
        *,
        chunk_count: int,
        text_char_count: int,
        batch_count: int,
    ) -> bool:
        """Stores the chunking outcome (after the last part)."""
        ...

    async def record_batch_embedded(
        self, document_id: str, generation: int, batch_index: int, size: int
    ) -> bool:
        """Marks a batch of `size` chunks embedded."""
        ...

    async def record_batch_indexed(
        self,
        document_id: str,
        generation: int,
        batch_index: int,
        size: int,
        *,
        batch_count: int | None = None,
    ) -> tuple[int, int | None] | None:
        """Marks a batch indexed; returns (indexed batches, batch count once known). A
        `batch_count` of 1 (the run makes one batch) spares the second read."""
        ...

    async def count_retry(self, document_id: str, generation: int, status: ParseStatus) -> None:
        """Counts a retry of a stage."""
        ...

    async def mark_failed(self, document_id: str, generation: int, reason: str) -> bool:
        """Marks the document failed."""
        ...


class TextStore(Protocol):
    """Originals and extracted text (`infra.mongo.blob_store.BlobStore`)."""

    async def read(self, key: str) -> bytes:
        """Bytes stored under a key."""
        ...

    async def put_extracted(self, document_id: str, extracted: ExtractedDocument) -> str:
        """Stores extracted text; returns its key."""
        ...

    async def get_extracted(self, key: str) -> ExtractedDocument:
        """Extracted text by key."""
        ...

    async def delete(self, key: str) -> None:
        """Deletes what is stored under a key."""
        ...

    async def delete_extracted(self, document_id: str) -> None:
        """Deletes every stored extraction of a document."""
        ...


class Lifecycle(Protocol):
    """Cross-document changes (`infra.mongo.lifecycle.DocumentLifecycle`)."""

    async def live_version(self, kb_id: str, source_key: str) -> int:
        """The version of a source that search shows now."""
        ...

    async def finish(self, document_id: str, generation: int) -> Finished | Superseded | None:
        """Marks an indexed version live and retires older ones."""
        ...

    async def finish_as_read(self, document: Document) -> Finished | None:
        """`finish`, reading nothing, if the document is stored as read and no newer version
        is live; None (nothing done) if not."""
        ...

    async def remove(self, document_id: str) -> Removed | None:
        """Deletes a document's record (and so takes it out of its KB's counts)."""
        ...

    async def withdraw(self, document_id: str, generation: int) -> KbRevisions | None:
        """Takes a failing run's chunks out of its KB's count."""
        ...

    async def touch(self, kb_id: str) -> KbRevisions:
        """Raises the KB's revision: what search shows of it changed."""
        ...


class Freshness(Protocol):
    """Told of new KB revisions, so cached answers go out of date (`services.freshness_service`)."""

    async def kbs_changed(self, revisions: KbRevisions) -> None:
        """These KBs now have these revisions."""
        ...


@dataclass
class StageResult:
    """What a handler did with one message."""

    publish: Sequence[Event] = field(default_factory=list)
    # Runs once `publish` is out: record progress only after its events are safe in Kafka.
    after_publish: Callable[[], Awaitable[None]] | None = None
    # The document needed no work here: gone, superseded, or already past this stage.
    skipped: bool = False
    # The stage finished its part of a whole document with this message.
    finished_document: bool = False
