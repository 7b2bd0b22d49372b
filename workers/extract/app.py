"""Extract worker: wiring only (the logic is in handler.py)."""

from __future__ import annotations

from contextlib import AsyncExitStack

from faststream import FastStream

from infra.settings import Settings
from schemas.events import DocumentUploaded
from workers.extract.extractors import OcrPolicy
from workers.extract.handler import ExtractHandler
from workers.wiring import PipelineResources, kafka_publisher, stage_app


def create_app(settings: Settings) -> FastStream:
    """The extract worker process."""

    async def make_handler(resources: PipelineResources, _: AsyncExitStack) -> ExtractHandler:
        return ExtractHandler(
            resources.documents,
            resources.blobs,
            kafka_publisher(resources.broker),
            settings.ingest.extract_part_chars,
            OcrPolicy(settings.ingest.ocr_enabled, settings.ingest.ocr_max_pages),
        )

    return stage_app(settings, "extract", DocumentUploaded, make_handler)
