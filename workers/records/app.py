"""Records worker: wiring only (the logic is in handler.py and `services.intake`)."""

from __future__ import annotations

from faststream import FastStream

from infra.settings import Settings
from ragline.system import System
from schemas.events import RecordPublished
from workers.records.handler import RecordHandler
from workers.runtime import Stage
from workers.wiring import stage_app


async def build_stage(system: System) -> Stage[RecordPublished]:
    """The records stage: each record goes through the same intake as the API's."""
    return Stage(
        "records", RecordPublished, RecordHandler(system.intake), system.settings.stages.records
    )


def create_app(settings: Settings) -> FastStream:
    """The records worker process."""
    return stage_app(settings, "records", build_stage)
