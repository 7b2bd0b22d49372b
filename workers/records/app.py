"""Records worker: wiring only (the logic is in handler.py and `services.intake`)."""

from __future__ import annotations

from contextlib import AsyncExitStack

from faststream import FastStream

from infra.settings import Settings
from schemas.events import RecordPublished
from services.intake import Intake
from workers.records.handler import RecordHandler
from workers.wiring import PipelineResources, kafka_publisher, stage_app


def create_app(settings: Settings) -> FastStream:
    """The records worker process."""

    async def make_handler(resources: PipelineResources, _: AsyncExitStack) -> RecordHandler:
        intake = Intake(
            resources.documents,
            resources.kbs,
            resources.lifecycle,
            resources.blobs,
            kafka_publisher(resources.broker),
        )
        return RecordHandler(intake)

    return stage_app(settings, "records", RecordPublished, make_handler)
