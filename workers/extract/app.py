"""Extract worker: wiring only (the logic is in handler.py)."""

from __future__ import annotations

from faststream import FastStream

from infra.settings import Settings
from ragline.system import System
from schemas.domain import ParseStatus
from schemas.events import DocumentUploaded
from workers.extract.extractors import OcrPolicy
from workers.extract.handler import ExtractHandler
from workers.runtime import Stage, document_stage
from workers.wiring import stage_app


async def build_stage(system: System) -> Stage[DocumentUploaded]:
    """The extract stage over the process's objects."""
    settings = system.settings
    handler = ExtractHandler(
        system.documents,
        system.blobs,
        system.publish,
        settings.ingest.extract_part_chars,
        OcrPolicy(settings.ingest.ocr_enabled, settings.ingest.ocr_max_pages),
    )
    return document_stage(
        "extract",
        DocumentUploaded,
        ParseStatus.EXTRACTING,
        handler,
        system.documents,
        settings.stages.extract,
    )


def create_app(settings: Settings) -> FastStream:
    """The extract worker process."""
    return stage_app(settings, "extract", build_stage)
