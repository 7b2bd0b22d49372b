"""Extract stage: original bytes in (carried in the event when small, else read from GridFS),
text out, in parts of a few pages.

Each part is handed on as soon as it is extracted, so a long PDF is being chunked and embedded
while its later pages are still read: in its event when small (`extract_inline_max_bytes`),
else stored in GridFS and named by its event. A retry starts from the first part again; the
chunk stage skips parts it already has. The file is read in a parser process of its own
(`sandbox`), so no file can take this worker down.
"""

from __future__ import annotations

from core.errors import ExtractionFailed, NotFound
from schemas.domain import TITLE_MAX_CHARS, Document, ExtractedDocument, TextSegment
from schemas.events import DocumentExtracted, DocumentUploaded, Publish
from workers.extract.sandbox import ParserSandbox
from workers.ports import StageResult, TextStore


class ExtractHandler:
    """Reads the original, extracts its text part by part, stores and announces each part."""

    def __init__(
        self,
        texts: TextStore,
        publish: Publish,
        part_chars: int,
        parsers: ParserSandbox,
        inline_max_bytes: int = 0,
    ) -> None:
        self._texts = texts
        self._publish = publish
        self._part_chars = part_chars
        self._parsers = parsers
        self._inline_max_bytes = inline_max_bytes

    async def __call__(self, event: DocumentUploaded, document: Document | None) -> StageResult:
        """Handles one `DocumentUploaded` of a document now `extracting` (`document`: as read
        by this message, or None where the event carries what is needed of it)."""
        try:
            data = (
                event.original
                if event.original is not None
                else await self._texts.read(event.storage_key)
            )
        except NotFound:
            raise ExtractionFailed(
                "the uploaded file is no longer stored (the database lost it); upload it again"
            ) from None
        part: list[TextSegment] = []
        size = 0
        index = 0
        if document is None:
            title, filename_only = str(event.title), event.title_is_filename
        else:
            title, filename_only = document.title, document.title == document.filename
        async with self._parsers.open(data, event.filename) as extraction:
            del data
            found = extraction.title
            # The title was only the file name: the file's own title (PDF metadata, first
            # heading, e-mail subject) is better for citations. The chunk stage stores it as
            # it takes the document in (`DocumentExtracted.retitled`), in the same write.
            retitled = filename_only and found not in ("", title)
            if retitled:
                title = found[:TITLE_MAX_CHARS]
            async for segment in extraction.segments():
                part.append(segment)
                size += len(segment.text)
                if size >= self._part_chars:
                    await self._emit(event, index, part, title, retitled, last=False)
                    index += 1
                    part, size = [], 0
        await self._emit(event, index, part, title, retitled, last=True)
        return StageResult(finished_document=True)

    async def _emit(
        self,
        event: DocumentUploaded,
        index: int,
        segments: list[TextSegment],
        title: str,
        retitled: bool,
        *,
        last: bool,
    ) -> None:
        part = ExtractedDocument(title="", segments=segments)
        # A small part travels in the event; a large one is stored, and the event names it.
        carried = len(part.model_dump_json().encode()) <= self._inline_max_bytes
        key = None if carried else await self._texts.put_extracted(event.document_id, part)
        await self._publish(
            [
                DocumentExtracted(
                    tenant_id=event.tenant_id,
                    kb_id=event.kb_id,
                    document_id=event.document_id,
                    generation=event.generation,
                    part_index=index,
                    last=last,
                    extracted_key=key,
                    text=part if carried else None,
                    char_count=part.char_count,
                    title=title,
                    retitled=retitled,
                )
            ]
        )
