"""The records of messages in flight together go to the intake in one call per KB and
submission, each message gets its own answers, and a refused batch fails only the message
that caused it (`workers.records.coalescing`). Pure logic over a recording intake; under a
second."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any, cast

import pytest

from core.errors import PermanentError
from schemas.domain import Record
from services.intake_service import Ingested, SyncRun
from services.policy_service import Submission
from workers.records.coalescing import CoalescedIntake


class Intake:
    """Answers each record with its content, records each call, refuses content "bad", and
    can be held busy until released (so that later messages queue behind a call)."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, list[str]]] = []
        self.release = asyncio.Event()
        self.release.set()
        self.busy = asyncio.Event()

    async def accept_records(
        self,
        tenant_id: str,
        kb_id: str,
        records: Sequence[Record],
        by: Submission,
        *,
        batch: bool = True,
        sync: SyncRun | None = None,
    ) -> list[Ingested]:
        self.calls.append((kb_id, [record.content for record in records]))
        self.busy.set()
        await self.release.wait()
        if any(record.content == "bad" for record in records):
            raise PermanentError("a record the intake refuses")
        return [cast(Ingested, f"{kb_id}:{record.content}") for record in records]


def record(content: str, external_id: str | None = None) -> Record:
    return Record(content=content, external_id=external_id)


async def _together(
    intake: Intake, coalesced: CoalescedIntake, *messages: tuple[str, Record]
) -> list[Any]:
    """Each message's answer (or error), the first sent while the intake is busy with a
    message before them, so that they queue together."""
    intake.release.clear()
    intake.busy.clear()
    by = Submission.connector()
    first = asyncio.create_task(coalesced.accept_records("t", "kb0", [record("opening")], by))
    await intake.busy.wait()
    tasks = [
        asyncio.create_task(coalesced.accept_records("t", kb, [one], by)) for kb, one in messages
    ]
    await asyncio.sleep(0)
    intake.release.set()
    await first
    return await asyncio.gather(*tasks, return_exceptions=True)


async def test_records_in_flight_together_share_one_call_and_each_gets_its_own_answer() -> None:
    intake = Intake()
    coalesced = CoalescedIntake(intake)
    answers = await _together(
        intake,
        coalesced,
        ("kb1", record("a", "1")),
        ("kb1", record("b", "2")),
        ("kb1", record("c")),
    )
    assert answers == [["kb1:a"], ["kb1:b"], ["kb1:c"]]
    assert intake.calls == [("kb0", ["opening"]), ("kb1", ["a", "b", "c"])]


async def test_records_of_other_kbs_or_of_one_version_line_go_in_calls_of_their_own() -> None:
    intake = Intake()
    coalesced = CoalescedIntake(intake)
    answers = await _together(
        intake,
        coalesced,
        ("kb1", record("a", "1")),
        ("kb2", record("b", "2")),
        ("kb2", record("c", "3")),
        ("kb2", record("c2", "3")),  # a newer version of "3": it must see the first
        ("kb2", record("same")),
        ("kb2", record("same")),  # the same content without an id: unchanged, not a copy
    )
    assert answers == [["kb1:a"], ["kb2:b"], ["kb2:c"], ["kb2:c2"], ["kb2:same"], ["kb2:same"]]
    assert intake.calls[1:] == [
        ("kb1", ["a"]),
        ("kb2", ["b", "c"]),
        ("kb2", ["c2", "same"]),
        ("kb2", ["same"]),
    ]


async def test_a_refused_batch_fails_only_the_message_that_caused_it() -> None:
    intake = Intake()
    coalesced = CoalescedIntake(intake)
    answers = await _together(
        intake,
        coalesced,
        ("kb1", record("a", "1")),
        ("kb1", record("bad", "2")),
        ("kb1", record("c", "3")),
    )
    assert answers[0] == ["kb1:a"]
    assert answers[2] == ["kb1:c"]
    assert isinstance(answers[1], PermanentError)
    # The shared call was refused; then each message went alone.
    assert intake.calls[1] == ("kb1", ["a", "bad", "c"])
    assert sorted(intake.calls[2:]) == [("kb1", ["a"]), ("kb1", ["bad"]), ("kb1", ["c"])]


async def test_a_lone_message_goes_at_once() -> None:
    intake = Intake()
    coalesced = CoalescedIntake(intake)
    by = Submission.connector()
    answer: list[Any] = await coalesced.accept_records("t", "kb1", [record("a", "1")], by)
    assert answer == ["kb1:a"]
    with pytest.raises(PermanentError):
        await coalesced.accept_records("t", "kb1", [record("bad", "1")], by)
    assert intake.calls == [("kb1", ["a"]), ("kb1", ["bad"])]
