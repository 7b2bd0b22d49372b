"""Records worker: wiring only (the logic is in handler.py and `services.intake_service`)."""

from __future__ import annotations

from ragline.system import System
from schemas.events import RecordPublished
from schemas.topics import RECORDS_INGEST
from workers.hosting import StageProcess
from workers.records.coalescing import CoalescedIntake
from workers.records.handler import RecordHandler, Requeue
from workers.runtime import Stage


async def build_stage(system: System) -> Stage[RecordPublished]:
    """The records stage: each record goes through the same intake as the API's, with the
    records of the messages in flight together (`workers.records.coalescing`)."""
    return Stage(
        "records",
        RecordPublished,
        RecordHandler(
            CoalescedIntake(system.intake_service),
            system.retiring_sync_service,
            requeue(system),
        ),
        system.settings.stages.records,
    )


def requeue(system: System) -> Requeue:
    """Puts a records message back at the end of its topic."""

    async def send(event: RecordPublished) -> None:
        await system.send(RECORDS_INGEST, event.key, event.model_dump_json().encode())

    return send


RECORDS = StageProcess("records", build_stage)
