"""Following documents through the pipeline: their statuses polled from the API, shown as
progress bars per stage while they move, then as a summary table."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from rich.console import Group, RenderableType
from rich.live import Live
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskID, TextColumn
from rich.table import Table
from rich.text import Text

from ragline_cli.answers import chunks_done, is_final, passed
from ragline_cli.connection import PAGE_SIZE
from ragline_cli.errors import ExitCode, Interrupted, from_library
from ragline_cli.output import plain, stdout, table
from ragline_client import (
    APIConnectionError,
    InternalServerError,
    NotFoundError,
    Ragline,
    ServiceUnavailableError,
)
from ragline_client.models import DocumentOut

# Up to this many documents in progress are read one by one; more, from the KB's listing.
ONE_BY_ONE = 5
# How long the API may not answer while documents are followed before giving up.
UNANSWERED_LIMIT_S = 60.0


class Outcome(StrEnum):
    """What happened to a file or document in this run."""

    WAITING = "waiting"  # not sent yet
    NEW = "new"
    NEW_VERSION = "new version"
    UNCHANGED = "unchanged"  # the KB holds these bytes already: nothing sent
    REINDEXED = "reindexed"
    REJECTED = "rejected"  # the API refused the upload
    GONE = "gone"  # deleted while followed


@dataclass
class Item:
    """A file or document the run follows, with the document once there is one."""

    label: str
    outcome: Outcome
    document: DocumentOut | None = None
    error: str | None = None
    path: str | None = None

    @property
    def failed(self) -> bool:
        """Refused, gone, or failed in the pipeline."""
        if self.outcome in (Outcome.REJECTED, Outcome.GONE):
            return True
        return self.document is not None and self.document.parse_status == "failed"

    @property
    def final(self) -> bool:
        """Nothing more will happen to it."""
        if self.outcome in (Outcome.REJECTED, Outcome.GONE):
            return True
        return self.document is not None and is_final(self.document)

    @property
    def status(self) -> str:
        """The document's status, or what stands for it."""
        if self.document is None or self.outcome is Outcome.GONE:
            return "-" if self.outcome is not Outcome.WAITING else "waiting"
        return self.document.parse_status

    @property
    def reason(self) -> str | None:
        """Why it failed or was refused, or that it stalled."""
        if self.error:
            return self.error
        if self.document is not None and self.document.parse_status == "failed":
            return self.document.parse_error or "failed"
        if self.document is not None and self.document.stalled and not is_final(self.document):
            return "stalled: not moving"
        return None

    def as_json(self) -> dict[str, Any]:
        """The item for `--json`."""
        document = self.document
        return {
            "file": self.label,
            "path": self.path,
            "outcome": self.outcome.value,
            "document_id": document.id if document else None,
            "status": None if document is None else document.parse_status,
            "chunks": None if document is None else document.chunk_count,
            "error": self.reason if self.failed else None,
        }


@dataclass
class Follower:
    """Keeps the items' documents up to date from the API."""

    client: Ragline
    kb_id: str
    items: list[Item]
    unanswered_since: float | None = None
    note: str = ""

    @property
    def pending(self) -> list[Item]:
        """Items whose document is still in the pipeline."""
        return [i for i in self.items if i.document is not None and not i.final]

    @property
    def done(self) -> bool:
        """Every item is final (or not sent yet: the caller knows about those)."""
        return not self.pending

    def poll(self) -> None:
        """Reads the pending documents' statuses; a silent API is tolerated for a while."""
        try:
            self._refresh()
        except (APIConnectionError, InternalServerError, ServiceUnavailableError) as exc:
            now = time.monotonic()
            self.unanswered_since = self.unanswered_since or now
            if now - self.unanswered_since > UNANSWERED_LIMIT_S:
                raise
            self.note = f"the API is not answering ({from_library(exc).message}); trying again"
            return
        self.unanswered_since = None
        self.note = ""

    def _refresh(self) -> None:
        # Several files may share a document (identical bytes), so ids map to lists.
        pending: dict[str, list[Item]] = {}
        for item in self.pending:
            if item.document is not None:
                pending.setdefault(item.document.id, []).append(item)
        if len(pending) > ONE_BY_ONE:
            for document in self.client.list_documents(self.kb_id, page_size=PAGE_SIZE):
                for item in pending.pop(document.id, []):
                    item.document = document
                if not pending:
                    return
        for document_id, items in pending.items():
            try:
                document = self.client.get_document(self.kb_id, document_id)
            except NotFoundError:
                for item in items:
                    item.outcome = Outcome.GONE
                    item.error = "deleted while it was being processed"
                continue
            for item in items:
                item.document = document


STAGES = (
    ("extracting", "Extracted"),
    ("chunking", "Chunked"),
    ("embedding", "Embedded"),
)


class ProgressView:
    """Bars per stage: documents past each stage of those not failed, chunks embedded of the
    chunks known, and counts of failures."""

    def __init__(self, follower: Follower, uploads: int, unchanged: int = 0) -> None:
        self.follower = follower
        self.uploads = uploads
        self.uploaded = 0
        self.progress = Progress(
            TextColumn("{task.description:<10}"),
            BarColumn(bar_width=40),
            MofNCompleteColumn(),
            TextColumn("{task.fields[note]}"),
            auto_refresh=False,
        )
        self._upload_task: TaskID | None = None
        if uploads:
            note = f"({unchanged} unchanged, not sent)" if unchanged else ""
            self._upload_task = self.progress.add_task("Uploaded", total=uploads, note=note)
        self._stage_tasks = [
            (status, self.progress.add_task(title, total=None, note="")) for status, title in STAGES
        ]
        self._chunk_task = self.progress.add_task("  chunks", total=None, note="")
        self._indexed_task = self.progress.add_task("Indexed", total=None, note="")
        self.update()

    def update(self) -> None:
        """Recomputes every bar from the items."""
        items = self.follower.items
        going = [item for item in items if not item.failed]
        documents = [item.document for item in going if item.document is not None]
        if self._upload_task is not None:
            self.progress.update(self._upload_task, completed=self.uploaded)
        for status, task in self._stage_tasks:
            done = sum(1 for document in documents if passed(document, status))
            self.progress.update(task, completed=done, total=len(going))
        known = [d for d in documents if d.chunk_count is not None]
        chunk_total = sum(d.chunk_count or 0 for d in known)
        embedded = sum(chunks_done(d) for d in known)
        waiting = len(going) - len(known)
        self.progress.update(
            self._chunk_task,
            completed=embedded,
            total=chunk_total if known else None,
            note=f"({waiting} documents not yet chunked)" if known and waiting else "",
        )
        indexed = sum(1 for d in documents if d.parse_status == "indexed")
        self.progress.update(self._indexed_task, completed=indexed, total=len(going))

    def __rich__(self) -> RenderableType:
        lines: list[RenderableType] = [self.progress]
        failed = sum(1 for item in self.follower.items if item.failed)
        if failed:
            lines.append(Text(f"{'Failed':<10} {failed}", style="red"))
        pending = self.follower.pending
        stalled = sum(1 for item in pending if item.document and item.document.stalled)
        if stalled:
            lines.append(Text(f"{'Stalled':<10} {stalled} (not moving)", style="yellow"))
        if self.follower.note:
            lines.append(Text(self.follower.note, style="yellow"))
        return Group(*lines)


def counts(items: list[Item]) -> dict[str, int]:
    """How many items ended each way."""
    return {
        "indexed": sum(1 for i in items if i.status == "indexed"),
        "failed": sum(1 for i in items if i.failed),
        "in_progress": sum(1 for i in items if not i.final),
        "unchanged": sum(1 for i in items if i.outcome is Outcome.UNCHANGED),
    }


def summary_table(items: list[Item]) -> Table:
    """One row per item: name, outcome, status, chunks, reason."""
    rows = []
    for item in items:
        status_style = {"indexed": "green", "failed": "red"}.get(item.status, "yellow")
        if item.outcome is Outcome.REJECTED:
            status_style = "red"
        chunks = None if item.document is None else item.document.chunk_count
        rows.append(
            (
                plain(item.label),
                plain(item.outcome.value),
                Text(item.status, style=status_style),
                plain(chunks),
                plain(item.reason),
            )
        )
    return table(None, ("File", "Outcome", "Status", "Chunks", "Reason"), rows)


def summary_line(items: list[Item]) -> Text:
    """`5 files: 4 indexed (2 unchanged), 1 failed`."""
    tally = counts(items)
    parts = [f"{tally['indexed']} indexed"]
    if tally["unchanged"]:
        parts[0] += f" ({tally['unchanged']} unchanged)"
    if tally["failed"]:
        parts.append(f"{tally['failed']} failed")
    if tally["in_progress"]:
        parts.append(f"{tally['in_progress']} still in progress")
    noun = "file" if len(items) == 1 else "files"
    style = "red" if tally["failed"] else ("yellow" if tally["in_progress"] else "green")
    return Text(f"{len(items)} {noun}: " + ", ".join(parts), style=style)


def exit_code(items: list[Item], timed_out: bool) -> ExitCode:
    """FAILED if anything failed, TIMED_OUT if the wait ended with documents in progress."""
    if any(item.failed for item in items):
        return ExitCode.FAILED
    if timed_out and any(not item.final for item in items):
        return ExitCode.TIMED_OUT
    return ExitCode.OK


def drive(
    view: ProgressView,
    sends: Sequence[Callable[[], None]],
    *,
    wait: bool,
    timeout_s: float | None,
    live: bool,
    poll_s: float = 0.5,
) -> bool:
    """Runs the sends (uploads or re-index requests), polling statuses in between, then, with
    `wait`, polls until every document is final or `timeout_s` has passed (True then).

    With `live`, the bars are shown as they move (on a terminal; elsewhere once at the end).
    """
    deadline = None if timeout_s is None else time.monotonic() + timeout_s
    console = stdout()
    display = Live(view, console=console, refresh_per_second=8) if live else nullcontext()
    try:
        return _run(view, sends, wait, deadline, poll_s, display)
    finally:
        if live and not console.is_terminal:
            # A terminal's live display ends with a newline; its one print elsewhere does not.
            console.line()


def _run(
    view: ProgressView,
    sends: Sequence[Callable[[], None]],
    wait: bool,
    deadline: float | None,
    poll_s: float,
    display: AbstractContextManager[object],
) -> bool:
    follower = view.follower
    last_poll = time.monotonic()
    with display:
        for send in sends:
            send()
            view.uploaded += 1
            if time.monotonic() - last_poll >= poll_s:
                follower.poll()
                last_poll = time.monotonic()
            view.update()
        follower.poll()
        view.update()
        while wait and not follower.done:
            if deadline is not None and time.monotonic() >= deadline:
                return True
            time.sleep(poll_s if len(follower.pending) <= ONE_BY_ONE else 2 * poll_s)
            follower.poll()
            view.update()
    return False


def follow(
    view: ProgressView,
    sends: Sequence[Callable[[], None]],
    *,
    wait: bool,
    timeout_s: float | None,
    json_out: bool,
    report: Callable[[], None],
) -> ExitCode:
    """`drive`, then `report`; on Ctrl-C the report of what is known so far, then exit 130."""
    try:
        timed_out = drive(view, sends, wait=wait, timeout_s=timeout_s, live=not json_out)
    except KeyboardInterrupt:
        report()
        raise Interrupted(
            "interrupted: the API goes on processing what it accepted "
            "(`ragline docs list` shows where it is)"
        ) from None
    report()
    return exit_code(view.follower.items, timed_out)
