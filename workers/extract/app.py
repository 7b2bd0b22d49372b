"""Extract worker: wiring only (the logic is in handler.py)."""

from __future__ import annotations

from ragline.system import System
from schemas.domain import ParseStatus
from schemas.events import DocumentUploaded
from workers.extract.extractors import ExtractionLimits, OcrPolicy
from workers.extract.handler import ExtractHandler
from workers.extract.sandbox import ParserSandbox
from workers.hosting import StageProcess
from workers.runtime import Stage, carried_stage


async def build_stage(system: System) -> Stage[DocumentUploaded]:
    """The extract stage over the process's objects."""
    ingest = system.settings.ingest
    parsers = ParserSandbox(
        ingest.parser_memory_mb * 1024 * 1024,
        OcrPolicy(ingest.ocr_enabled, ingest.ocr_max_pages),
        ExtractionLimits(
            max_chars=ingest.max_document_chars,
            max_attachments=ingest.max_attachments,
            max_unpacked_bytes=ingest.max_unpacked_mb * 1024 * 1024,
        ),
    )
    await parsers.start()
    system.on_close(parsers.close)
    handler = ExtractHandler(
        system.blobs,
        system.publish,
        ingest.extract_part_chars,
        parsers,
        ingest.extract_inline_max_bytes,
    )
    return carried_stage(
        "extract",
        DocumentUploaded,
        ParseStatus.EXTRACTING,
        handler,
        system.document_repo,
        system.settings.stages.extract,
    )


EXTRACT = StageProcess("extract", build_stage)
