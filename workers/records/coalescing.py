"""Records of messages worked at the same moment go to the intake together.

The records worker reads its messages in batches (up to `stages.records.concurrency`, 64) and
works them at once (`workers.hosting.run_by_key`). Each message still takes its own record
through the stage runner (its retries, its failure, its dead letter), but the records waiting
at the same moment share one `accept_records` call per KB and submission: one lookup of their
version lines, one transaction for their documents, one KB revision, where each record alone
cost all of these (about 13 MongoDB commands a record, `benchmarks/bulk.py`).

A batch the intake refuses is taken apart: each message's records go alone, so a record that
cannot be taken fails only its own message. Two records of one version line (the same
external id, or the same content without one) never share a call: the second must see the
first (it is unchanged, or a newer version of it). Records are keyed by external id, so two
publishes of one id are in one partition and never in flight together; the split is for
records without one.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from core.coalescing import Coalescer
from schemas.domain import Record
from services.intake_service import Ingested, SyncRun
from services.policy_service import Submission
from workers.records.handler import RecordIntake

# Records one intake call takes at most.
MAX_BATCH = 256


@dataclass(frozen=True)
class _Request:
    """One message's records, and where and how they go."""

    tenant_id: str
    kb_id: str
    records: tuple[Record, ...]
    by: Submission
    batch: bool
    sync: SyncRun | None

    def joins(self, other: _Request) -> bool:
        """Whether the two may go in one intake call (same KB, submission and run)."""
        return (
            self.tenant_id == other.tenant_id
            and self.kb_id == other.kb_id
            and self.by == other.by
            and self.batch == other.batch
            and self.sync == other.sync
        )

    def lines(self) -> set[str]:
        """The version lines its records join: an external id, else the content."""
        return {
            f"id:{record.external_id}" if record.external_id else f"sha:{record.fingerprint()}"
            for record in self.records
        }


class CoalescedIntake:
    """The intake's `accept_records`, shared by the messages that call it at the same moment."""

    def __init__(self, intake: RecordIntake, max_batch: int = MAX_BATCH) -> None:
        self._intake = intake
        self._calls: Coalescer[_Request, list[Ingested]] = Coalescer(
            self._accept_together, max_batch=max_batch, isolate=(Exception,)
        )

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
        """What `IntakeService.accept_records` answers, from a call shared with the records
        of other messages waiting at the same moment."""
        request = _Request(tenant_id, kb_id, tuple(records), by, batch, sync)
        (ingested,) = await self._calls.submit([request])
        return ingested

    async def _accept_together(self, requests: list[_Request]) -> list[list[Ingested]]:
        """One intake call per group of requests that may go together, in order."""
        answers: list[list[Ingested]] = []
        for group in _groups(requests):
            records = [record for request in group for record in request.records]
            first = group[0]
            ingested = await self._intake.accept_records(
                first.tenant_id, first.kb_id, records, first.by, batch=first.batch, sync=first.sync
            )
            start = 0
            for request in group:
                answers.append(ingested[start : start + len(request.records)])
                start += len(request.records)
        return answers


def _groups(requests: list[_Request]) -> list[list[_Request]]:
    """Consecutive requests that may share a call: a request that goes elsewhere, or joins a
    version line the group already holds, begins the next group."""
    groups: list[list[_Request]] = []
    lines: set[str] = set()
    for request in requests:
        own = request.lines()
        if groups and request.joins(groups[-1][0]) and not own & lines:
            groups[-1].append(request)
            lines |= own
            continue
        groups.append([request])
        lines = own
    return groups
