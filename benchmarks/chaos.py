"""Chaos soak: the soak's mixed load while a seeded schedule kills and freezes the stack's parts.

The load is the soak's (`benchmarks/soak.py`: notes, Markdown, PDFs, a DOCX, connector records
and an encrypted PDF that must fail; deletes; a bot's and a person's searches, each answer
checked against what was deleted), with three kinds more: new versions of indexed Markdown
files (the same file name, new text: once the new one is seen indexed, the old one must be
neither found nor stored), an agent's questions over MCP (a person's token), and hostile files
(a PDF cut short, random bytes named `.txt`) that must end `failed` with a reason.

The faults (`plan`): every `--gap-s` (45-90 s) one part, drawn from the stage workers, the
relay, the records worker, the API, the broker, MongoDB and Redis, is killed (SIGKILL; the
supervisor `make run` uses starts it again) or frozen (SIGSTOP) for `--hold-s` (10-30 s) and
resumed. The parts are drawn in rounds, each a seeded shuffle of all of them: every part is
struck once before any is struck twice. `--overlaps` of them (5) are pairs: while the first
part is frozen a second one is killed or frozen. With `--long-hold-s`, MongoDB's first fault is
a freeze held that long (the tiny run's other freezes are shorter than the request bound).
The schedule is a function of `--seed` alone, printed before the load starts: a run with the
same seed injects the same faults at the same moments. After each fault ends (the part
resumed, or started again and answering) a canary note is uploaded; the time from the fault's
end to the canary indexed is the fault's recovery time, bounded by `--recovery-limit-s`.

At the end (the load stopped, every part back, up to `--grace-s` for the pipeline to finish),
what a user must be able to rely on, each a figure of the last line:

- `lost_documents`: accepted uploads neither indexed nor failed (one gone from the KB's list
  while a new version of its file is listed indexed was replaced, not lost: that version's
  upload was accepted though answered with an error); `stuck_documents`: those still in a
  stage; `failed_unexpectedly`: documents that should have been indexed but failed;
  `indexed_but_should_fail`: hostile files (and the encrypted PDF) that ended indexed;
  `failed_without_reason`: failures whose document says no reason; `delete_not_finished`:
  deletes never answered 204 though sent again as a user would, or whose document is still
  listed at the end; `live_documents_not_found`: searches for a live document's code that
  did not find it (indexed but not searchable);
- `indexed_twice`: a file or record with more than one document holding searchable points, or
  a document whose points in the store are not its chunk count;
- `deleted_documents_returned`, `replaced_versions_returned`: searches (a bot's, a person's,
  MCP's) that named a document deleted, or replaced by a version seen indexed, before they
  were sent; deleted and replaced documents still holding points;
- `kb_counts_match`: the KB's document and chunk counts equal to its documents';
- `search_availability`: the share of searches sent while the API process was neither down
  nor frozen that were answered correctly within the request bound plus 2.5 s: a 2xx with a
  well-formed answer (over MCP, a result that is not `isError`) naming no deleted or replaced
  document and, asked for a live document's code, finding it. `search_availability_any_answer`
  counts any HTTP answer within the bound (a refusal with `Retry-After` included). The p95 of
  correct answers during faults and outside them;
- `server_errors`: answers 5xx, every one but a 503 with `Retry-After` to a request that was
  under way while a part it needs was down or frozen (the API process or MongoDB) or had not
  recovered yet (its canary not indexed, and `DEPENDENCY_SETTLE_S` at least); nothing else a
  request needs (the broker: uploads wait in
  the outbox; Redis: search answers without its cache; a worker) may cause one;
- `events`: what the run promises to exercise, each seen at least `--min-events` times
  (versions replaced, deletes, hostile uploads ended failed, correct MCP searches, connector
  records indexed); `events_missing` names any that fell short;
- `faults_injected` (a count per kind), `parts_struck`, `longest_freeze_s`, `overlaps` (faults
  begun while another was on) and `recovery_s` (per kind: each fault's recovery time).

A run that lost, doubled or leaked data, answered a 5xx it should not have, or left an event
kind short exits non-zero. The last line is one JSON object; the
results file (`--results-dir`) gets a timeline plot of the faults and the errors.

    .venv/bin/python -m benchmarks.chaos [--minutes 30] [--seed 11] [--grace-s 600]
    .venv/bin/python -m benchmarks.chaos --tiny      # 48 s, a fault every 4-5 s (`make test`)

The tiny run's stack embeds with the hashed embedder (it checks the mechanics, not the model).
"""

from __future__ import annotations

import argparse
import asyncio
import math
import os
import random
import shutil
import signal
import statistics
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from benchmarks.ingest import SECRET, TOKEN
from benchmarks.results import add_results_option, report
from benchmarks.soak import (
    ENDED,
    FIXTURES,
    REPLACED,
    REQUEST_TIMEOUT_S,
    Corpus,
    Doc,
    Soak,
    check_store,
    percentile,
    rounded,
    sigterm_as_interrupt,
    stage_metrics,
)
from benchmarks.stack import RECORD_STAGES, announce, bench_stack, run_settings
from devstack.launcher import SERVERS, ManagedProcess, Supervisor, port_open, running_process

# The parts a fault strikes, and their processes' names.
PARTS = {
    "relay": "relay-1",
    "records worker": "records-1",
    "extract worker": "extract-1",
    "chunk worker": "chunk-1",
    "embed worker": "embed-1",
    "API": "api",
    "broker": "kafka",
    "MongoDB": "mongodb",
    "Redis": "redis",
}
KILL, FREEZE = "kill", "freeze"
# The API's request bound (the default) and what a loaded machine may add to an answer.
BOUND_S, SLACK_S = 5.0, 2.5
# A part killed must be started again and answering within this.
BACK_LIMIT_S = 180.0
# What every request needs: a 503 with `Retry-After` is a fair answer while one of them is
# down or frozen, and until it has recovered: its canary indexed, or (at least) this long after
# it is back (the database driver's next heartbeat finds it again: `heartbeatFrequencyMS`,
# 10 s by default).
DEPENDENCIES = ("API", "MongoDB")
DEPENDENCY_SETTLE_S = 10.0
# Of the uploads: new versions of indexed Markdown files, hostile files; of the searches, MCP.
VERSION_SHARE, HOSTILE_SHARE, MCP_SHARE = 0.1, 0.04, 0.2
MCP_HEADERS = {
    "Accept": "application/json, text/event-stream",
    "MCP-Protocol-Version": "2025-06-18",
}
# A stalled document is started again after a minute rather than the default ten: a fault
# can lose a stage's message, and the run should see it recovered within its grace period.
STACK_SETTINGS = {"RAGLINE_INGEST__STALL_AFTER_S": "60"}
# `--tiny`: every part struck once (rounds of all nine, a fault every 4-5 s), MongoDB's freeze
# held past the request bound, recovery and the grace period bounded at two minutes, and each
# event kind seen at least once.
TINY: dict[str, Any] = {
    "minutes": 0.8,
    "upload_rate": 1.0,
    "search_rate": 2.0,
    "delete_rate": 0.5,
    "grace_s": 120.0,
    "recovery_limit_s": 120.0,
    "gap_s": (4.0, 5.0),
    "hold_s": (2.0, 4.0),
    "long_hold_s": BOUND_S + 2.0,
    "overlaps": 1,
    "min_indexed": 0,
    "min_events": 1,
}


@dataclass(frozen=True)
class Fault:
    """One fault of the schedule: when (seconds after the load starts), which part, and how."""

    at_s: float
    part: str
    action: str
    hold_s: float = 0.0

    def describe(self) -> str:
        """`kill API`, `freeze MongoDB for 12.3 s`."""
        held = f" for {self.hold_s:.1f} s" if self.action == FREEZE else ""
        return f"{self.action} {self.part}{held}"

    @property
    def kind(self) -> str:
        """The kind of fault, as `faults_injected` and `recovery_s` count them."""
        return f"{self.action} {self.part}"


class Rounds:
    """The parts to strike, in rounds: each a seeded shuffle of all of them, so that every
    part is struck once before any is struck twice."""

    def __init__(self, rng: random.Random) -> None:
        self._rng = rng
        self._left: list[str] = []

    def draw(self, besides: str | None = None) -> str:
        """The next part of the round (other than `besides`, which keeps its turn)."""
        if not [part for part in self._left if part != besides]:
            self._left += self._rng.sample(list(PARTS), len(PARTS))
        part = next(part for part in self._left if part != besides)
        self._left.remove(part)
        return part


def plan(
    seed: int,
    seconds: float,
    gap_s: tuple[float, float],
    hold_s: tuple[float, float],
    overlaps: int,
    long_hold_s: float | None = None,
) -> list[Fault]:
    """The faults of a run of `seconds`, from `seed` alone: one every `gap_s` (drawn between
    its bounds) on the next part of the round, killed or frozen for `hold_s`; `overlaps` of
    them, spread over the run, are pairs, a freeze and, before it ends, a fault of another
    part. With `long_hold_s`, MongoDB's first fault is a freeze held that long."""
    rng = random.Random(seed)
    slots: list[float] = []
    at = rng.uniform(*gap_s)
    while at < seconds:
        slots.append(at)
        at += rng.uniform(*gap_s)
    pairs = min(overlaps, len(slots))
    paired = {round((i + 0.5) * len(slots) / pairs) for i in range(pairs)} if pairs else set()
    rounds = Rounds(rng)
    faults: list[Fault] = []

    def fault(at: float, part: str, action: str | None = None) -> Fault:
        action = action or rng.choice((KILL, FREEZE))
        hold = rng.uniform(*hold_s) if action == FREEZE else 0.0
        if (
            long_hold_s is not None
            and part == "MongoDB"
            and all(f.part != "MongoDB" for f in faults)
        ):
            action, hold = FREEZE, long_hold_s
        made = Fault(at, part, action, hold)
        faults.append(made)
        return made

    for n, at in enumerate(slots):
        part = rounds.draw()
        if n in paired:
            first = fault(at, part, FREEZE)
            fault(at + rng.uniform(0.2, 0.6) * first.hold_s, rounds.draw(besides=part))
        else:
            fault(at, part)
    return sorted(faults, key=lambda fault: fault.at_s)


@dataclass(frozen=True)
class ServerError:
    """A 5xx answer: to what, when the request was under way, and whether it said when to
    retry."""

    kind: str
    sent: float
    answered: float
    status: int
    retry_after: bool
    body: str


@dataclass
class Struck:
    """A fault as it happened: when it began and ended (monotonic), and its recovery."""

    fault: Fault
    began: float
    ended: float | None = None
    recovery_s: float | None = None
    note: str = ""


def overlapping(struck: list[Struck]) -> int:
    """How many faults began while another was still on."""
    return sum(
        any(
            other is not this
            and other.began <= this.began < (math.inf if other.ended is None else other.ended)
            for other in struck
        )
        for this in struck
    )


class Chaos(Soak):
    """The soak's load, three more kinds of it, and the faults."""

    deaths_are_errors = False

    def __init__(self, *args: Any, faults: list[Fault], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.faults = faults
        self.struck: list[Struck] = []
        # Every search: when it was sent, its kind, whether it was answered correctly within
        # the bound, and its milliseconds.
        self.asked: list[tuple[float, str, bool, float]] = []
        # Every search: when it was sent, and whether any HTTP answer came within the bound.
        self.answered: list[tuple[float, bool]] = []
        self.server_errors: list[ServerError] = []
        self.replaces: dict[str, str] = {}  # new version's id -> the old one's
        # A new version was due but no indexed Markdown file was there to replace: the next
        # upload that finds one makes it.
        self.version_owed = False
        # The file whose new version was sent and not yet answered 202 (it is sent again), and
        # whether that upload is on its way now.
        self.versioning: Doc | None = None
        self.version_in_flight = False
        self.hostiles = 0
        self.load_end = float("inf")

    # -- the load -------------------------------------------------------------------------

    def heard(self, kind: str, response: httpx.Response | None, ms: float) -> None:
        """Every 5xx is kept (`server_errors` judges it); of a search, whether any HTTP answer
        came within the bound (`search_availability_any_answer`)."""
        answered = time.monotonic()
        sent = answered - ms / 1000
        if response is not None and response.status_code >= 500:
            self.server_errors.append(
                ServerError(
                    kind, sent, answered, response.status_code,
                    "retry-after" in response.headers, response.text[:300],
                )
            )  # fmt: skip
        if kind.startswith("search"):
            self.answered.append((sent, response is not None and self.in_time(ms)))

    def searched(self, kind: str, sent: float, ms: float, correct: bool) -> None:
        """A search's verdict is kept for availability: answered correctly within the bound."""
        self.asked.append((sent, kind, correct and self.in_time(ms), ms))

    @staticmethod
    def in_time(ms: float) -> bool:
        """Within the request bound and what a loaded machine may add."""
        return ms <= (BOUND_S + SLACK_S) * 1000

    async def upload(self, n: int) -> None:
        """New versions and hostile files among the soak's uploads: the 9th and 13th uploads
        are hostile files (one of each kind), and a new version is made as soon as one is due
        and can be."""
        draw = self.rng.random()
        if n >= 8 and (draw < VERSION_SHARE or self.version_owed):
            self.version_owed = not await self.new_version()
            if not self.version_owed:
                return
        if n in (8, 12) or (n > 8 and draw > 1 - HOSTILE_SHARE):
            await self.hostile()
            return
        await super().upload(n)

    async def new_version(self) -> bool:
        """Uploads new text under the name of an indexed Markdown file; False if none is, if
        the upload was not accepted (the API down), or if another is on its way: the version is
        still owed."""
        candidates = [
            self.docs[i]
            for i in self.indexed_order
            if self.docs[i].kind == "markdown" and self.docs[i].filename
        ]
        if self.version_in_flight or (self.versioning is None and not candidates):
            return False
        old = self.versioning or self.rng.choice(candidates)
        # The old version is given up as a live document before its new version is sent:
        # uploads run side by side, and one answered late, or not at all, may still have been
        # accepted. So a file gets new versions from one upload only, sent again until it is
        # answered (the last one sent is the newest), and its old version is no longer a target
        # for live probes or deletes (it leaves search the moment a new one is indexed, before
        # a poll sees it).
        if old.id in self.indexed_order:
            self.indexed_order.remove(old.id)
        self.versioning, self.version_in_flight = old, True
        code = self.new_code()
        assert old.filename is not None
        try:
            response, ms = await self.request(
                "upload", "POST", f"/api/v1/knowledge-bases/{self.kb}/documents", (202,),
                files={"file": (old.filename, self.corpus.markdown(code))}, headers=self.admin,
            )  # fmt: skip
        finally:
            self.version_in_flight = False
        self.minute().upload_ms.append(ms)
        if response is not None:
            self.versioning = None
            new = Doc(response.json()["id"], "new_version", code, filename=old.filename)
            self.docs[new.id] = new
            self.replaces[new.id] = old.id
            self.minute().documents += 1
        return response is not None

    async def hostile(self) -> None:
        """A file that must end failed with a reason: random bytes named `.txt`, or a PDF cut
        short, in turn."""
        code = self.new_code()
        self.hostiles += 1
        if self.hostiles % 2 == 0:
            pdf = (FIXTURES / "service-handbook.pdf").read_bytes()
            # Each cut PDF its own bytes: one like an earlier upload is answered as unchanged.
            name, data = f"cut-{code}.pdf", pdf[: len(pdf) * 2 // 5] + f"\n%{code}\n".encode()
        else:
            name, data = f"noise-{code}.txt", self.rng.randbytes(4096)
        response, ms = await self.request(
            "upload", "POST", f"/api/v1/knowledge-bases/{self.kb}/documents", (202,),
            files={"file": (name, data)}, headers=self.admin,
        )  # fmt: skip
        self.minute().upload_ms.append(ms)
        if response is not None:
            doc = Doc(response.json()["id"], "hostile", None, expect_failure=True, filename=name)
            self.docs[doc.id] = doc
            self.minute().documents += 1

    async def search(self, tick: int) -> None:
        """An agent's question over MCP among the soak's searches."""
        if self.rng.random() >= MCP_SHARE:
            await super().search(tick)
            return
        live = [d for d in self.indexed_order if self.docs[d].code]
        target = self.docs[self.rng.choice(live)] if live else None
        questions = self.corpus.questions
        query = str(target.code) if target else questions[tick % len(questions)]
        sent = time.monotonic()
        body = {
            "jsonrpc": "2.0",
            "id": tick,
            "method": "tools/call",
            "params": {"name": "knowledge_search", "arguments": {"query": query}},
        }
        response, ms = await self.request(
            "search_mcp", "POST", "/mcp", (200,), json=body, headers={**self.person, **MCP_HEADERS}
        )
        self.minute().search_ms.append(ms)
        if response is None:
            self.searched("search_mcp", sent, ms, correct=False)
            return
        try:
            result = response.json().get("result") or {}
            if result.get("isError") is not False:
                self.error("search_mcp:tool_error", response.text)
                self.searched("search_mcp", sent, ms, correct=False)
                return
            hits = result["structuredContent"]["results"]
            found = {hit["source"] for hit in hits}
            found |= {copy["document_id"] for hit in hits for copy in hit["also_in"]}
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            self.error("search_mcp:malformed_answer", f"{exc!r}: {response.text}")
            self.searched("search_mcp", sent, ms, correct=False)
            return
        correct = self.check_found("search_mcp", query, found, sent)
        if target is not None and not self.live_found(
            "search_mcp", query, target, found, hits, sent
        ):
            correct = False
        self.searched("search_mcp", sent, ms, correct)

    def settle(self, doc: Doc, state: dict[str, Any]) -> None:
        """The soak's, and a new version seen indexed replaces the old one."""
        was = doc.status
        super().settle(doc, state)
        if doc.status != "indexed" or was == "indexed" or doc.id not in self.replaces:
            return
        old = self.docs[self.replaces[doc.id]]
        if old.delete_sent is None and old.status == "indexed":
            old.status, old.replaced_by, old.replaced_at = REPLACED, doc.id, time.monotonic()
            if old.id in self.indexed_order:
                self.indexed_order.remove(old.id)

    # -- the faults -----------------------------------------------------------------------

    def process(self, part: str) -> ManagedProcess:
        """The process a part runs in now."""
        return running_process(self.services, self.pipeline, PARTS[part])

    async def strike_all(self, started: float) -> None:
        """Every fault of the schedule, each at its time (a pair's two run together)."""
        await asyncio.gather(*(self.strike(fault, started) for fault in self.faults))

    async def strike(self, fault: Fault, started: float) -> None:
        """One fault, at its time unless the load has stopped; then its canary."""
        await asyncio.sleep(max(0.0, started + fault.at_s - time.monotonic()))
        if time.monotonic() >= self.load_end:
            return
        process = self.process(fault.part)
        struck = Struck(fault, time.monotonic())
        self.struck.append(struck)
        print(f"{struck.began - started:7.1f} s  {fault.describe()}", flush=True)
        if fault.action == KILL:
            before = process.pid
            process.kill()
            struck.note = await self.back(process, before)
        else:
            pid = process.pid
            try:
                os.kill(pid, signal.SIGSTOP)
                try:
                    await asyncio.sleep(fault.hold_s)
                finally:
                    os.kill(pid, signal.SIGCONT)
            except ProcessLookupError:  # down for another reason: the supervisor's to start
                struck.note = " (the process was not running)"
        struck.ended = time.monotonic()
        struck.recovery_s = await self.canary(struck)
        print(
            f"{struck.ended - started:7.1f} s  {fault.describe()} over{struck.note}; canary "
            f"indexed {rounded(struck.recovery_s)} s later",
            flush=True,
        )

    async def back(self, process: ManagedProcess, before: int) -> str:
        """Until the supervisor has started the part again and it answers; a note if not."""
        deadline = time.monotonic() + BACK_LIMIT_S
        while time.monotonic() < deadline:
            if (
                process.alive()
                and process.pid != before
                and await asyncio.to_thread(self._answers, process)
            ):
                return ""
            await asyncio.sleep(0.2)
        return f" (not back within {BACK_LIMIT_S:.0f} s)"

    def _answers(self, process: ManagedProcess) -> bool:
        if process.name == "api":
            return self.pipeline.api_ready()
        if process.name in SERVERS:
            return port_open(self.services.port(process.name))
        return True

    async def canary(self, struck: Struck) -> float | None:
        """Uploads a note once the fault is over; seconds until it is indexed (None if not
        within `--recovery-limit-s`)."""
        assert struck.ended is not None
        code = self.new_code()
        body = {"title": f"Canary {code}", "content": f"Canary {code}: {struck.fault.describe()}."}
        deadline = struck.ended + self.args.recovery_limit_s
        response = None
        while response is None and time.monotonic() < deadline:
            # A 200: an earlier try was accepted though its answer was lost (the same note).
            response, _ = await self.request(
                "canary", "POST", f"/api/v1/knowledge-bases/{self.kb}/documents/text",
                (200, 202), json=body, headers=self.admin,
            )  # fmt: skip
            if response is None:
                await asyncio.sleep(1.0)
        if response is None:
            return None
        doc = Doc(response.json()["id"], "canary", code)
        self.docs[doc.id] = doc
        url = f"/api/v1/knowledge-bases/{self.kb}/documents/{doc.id}"
        while time.monotonic() < deadline:
            try:
                state = await self.http.get(url, headers=self.admin)
            except httpx.HTTPError:
                state = None
            if state is not None and state.status_code == 404:  # indexed, then deleted
                return time.monotonic() - struck.ended
            if state is not None and state.status_code == 200:
                status = state.json()["parse_status"]
                if status == "indexed":
                    return time.monotonic() - struck.ended
                if status == "failed":
                    return None
            await asyncio.sleep(0.5)
        return None

    async def run(self) -> None:
        """The soak's load and grace period, with the faults beside the load."""
        started = time.monotonic()
        self.load_end = started + self.args.minutes * 60
        faults = asyncio.create_task(self.strike_all(started))
        await super().run()
        await faults


def figures(chaos: Chaos, finals: dict[str, Any], store: dict[str, int]) -> dict[str, Any]:
    """The run's last line."""
    docs = list(chaos.docs.values())
    # Lost: accepted, then gone from the KB's list though never deleted. Stuck: still in a
    # stage after the grace period.
    lost = [d for d in docs if d.status == "vanished" and d.delete_sent is None]
    stuck = [d for d in docs if d.status not in (*ENDED, "vanished") and d.delete_sent is None]
    for doc in lost:
        chaos.error("document:lost", f"{doc.id} ({doc.kind})")
    for doc in stuck:
        chaos.error("document:stuck", f"{doc.id} ({doc.kind}) still {doc.status}")
    unexpected = [d for d in docs if d.status == "failed" and not d.expect_failure]
    api_down = [(s.began, s.ended or s.began) for s in chaos.struck if s.fault.part == "API"]
    faulty = [(s.began, s.ended or s.began) for s in chaos.struck]

    def within(at: float, windows: list[tuple[float, float]]) -> bool:
        return any(begin <= at <= end for begin, end in windows)

    up = [a for a in chaos.asked if not within(a[0], api_down)]
    up_any = [a for a in chaos.answered if not within(a[0], api_down)]
    during = [a[3] for a in chaos.asked if within(a[0], faulty) and a[2]]
    outside = [a[3] for a in chaos.asked if not within(a[0], faulty) and a[2]]
    unfair = unfair_server_errors(chaos.struck, chaos.server_errors)
    for error in unfair:
        chaos.error(
            f"server_error:{error.kind}:{error.status}",
            f"sent at {error.sent - chaos.started:.1f} s, answered at "
            f"{error.answered - chaos.started:.1f} s, "
            f"{'with' if error.retry_after else 'without'} Retry-After: {error.body}",
        )
    events = seen_events(chaos)
    events_missing = sorted(kind for kind, n in events.items() if n < chaos.args.min_events)
    freezes = [s.fault.hold_s for s in chaos.struck if s.fault.action == FREEZE]
    recovery: dict[str, list[float | None]] = {}
    for s in chaos.struck:
        recovery.setdefault(s.fault.kind, []).append(rounded(s.recovery_s))
    deleted_returned = sum(
        n for kind, n in chaos.errors.items() if kind.endswith("deleted_document_returned")
    )
    replaced_returned = sum(
        n for kind, n in chaos.errors.items() if kind.endswith("replaced_version_returned")
    )
    zero = chaos.started
    buckets = max(1, int((time.monotonic() - zero) // 10) + 1)
    return {
        "seed": chaos.args.seed,
        "minutes": chaos.args.minutes,
        "faults_injected": dict(Counter(s.fault.kind for s in chaos.struck)),
        "faults": len(chaos.struck),
        "parts_struck": sorted({s.fault.part for s in chaos.struck}),
        "longest_freeze_s": rounded(max(freezes, default=0.0)),
        "overlaps": overlapping(chaos.struck),
        "faults_not_back": [s.fault.describe() for s in chaos.struck if s.note],
        "documents": {
            "uploaded": len(docs),
            "indexed": sum(d.status == "indexed" for d in docs),
            "failed": sum(d.status == "failed" for d in docs),
            "replaced": sum(d.status == REPLACED for d in docs),
            "deleted": sum(d.deleted is not None for d in docs),
            "canaries": sum(d.kind == "canary" for d in docs),
            "accepted_but_unanswered": sum(d.kind == "unanswered upload" for d in docs),
        },
        "lost_documents": len(lost),
        "stuck_documents": len(stuck),
        "failed_unexpectedly": len(unexpected),
        "failure_reasons": dict(Counter(str(d.error)[:120] for d in unexpected)),
        **chaos.outcomes(),
        "live_documents_not_found_fates": chaos.unfound_fates(),
        "hostile_failure_reasons": dict(
            Counter(str(d.error)[:120] for d in docs if d.kind == "hostile")
        ),
        "indexed_twice": store["sources_searchable_twice"]
        + store["documents_with_wrong_point_count"],
        "deleted_documents_returned": deleted_returned,
        "replaced_versions_returned": replaced_returned,
        "deleted_documents_with_points": store["deleted_documents_with_points"],
        "replaced_versions_with_points": store["replaced_versions_with_points"],
        "points_of_no_uploaded_document": store["points_of_no_uploaded_document"],
        "kb_counts_match": finals["kb_counts"] == finals["expected"],
        "kb_counts": finals["kb_counts"],
        "kb_counts_expected": finals["expected"],
        "searches": len(chaos.asked),
        "search_availability": round(sum(a[2] for a in up) / len(up), 4) if up else None,
        "search_availability_any_answer": (
            round(sum(a[1] for a in up_any) / len(up_any), 4) if up_any else None
        ),
        "server_errors": len(unfair),
        "server_errors_fair": len(chaos.server_errors) - len(unfair),
        "events": events,
        "events_missing": events_missing,
        "search_p95_ms_during_faults": rounded(percentile(during, 95)),
        "search_p95_ms_outside_faults": rounded(percentile(outside, 95)),
        "recovery_s": recovery,
        "recovery_s_median": {
            kind: rounded(statistics.median(v for v in values if v is not None))
            if any(v is not None for v in values)
            else None
            for kind, values in recovery.items()
        },
        "errors_by_kind": dict(chaos.errors),
        # The first error of each kind, as it was seen: what to look into.
        "error_samples": dict(chaos.error_samples),
        "requests": dict(sum((m.requests for m in chaos.minutes), Counter())),
        "stages": finals.get("stages", {}),
        "timeline": {
            "faults": [
                [round(s.began - zero, 1), round((s.ended or s.began) - zero, 1), s.fault.kind]
                for s in chaos.struck
            ],
            "errors_per_10s": _per_bucket(chaos, zero, buckets),
        },
    }


def unfair_server_errors(struck: list[Struck], errors: list[ServerError]) -> list[ServerError]:
    """The 5xx answers a user should never see: all but a 503 with `Retry-After` to a request
    under way while a part every request needs was down or frozen, or had not yet recovered
    (its canary not indexed; `DEPENDENCY_SETTLE_S` at least)."""
    windows = [
        (s.began, (s.ended or math.inf) + max(DEPENDENCY_SETTLE_S, s.recovery_s or 0.0))
        for s in struck
        if s.fault.part in DEPENDENCIES
    ]
    return [
        error
        for error in errors
        if not (
            error.status == 503
            and error.retry_after
            and any(error.sent <= end and begin <= error.answered for begin, end in windows)
        )
    ]


def seen_events(chaos: Chaos) -> dict[str, int]:
    """How often each kind of event the run promises happened: versions replaced (the new
    one seen indexed), deletes answered, hostile files ended failed, MCP searches answered
    correctly, connector records indexed."""
    docs = chaos.docs.values()
    return {
        "versions_replaced": sum(d.status == REPLACED for d in docs),
        "deletes": sum(d.deleted is not None for d in docs),
        "hostile_uploads_failed": sum(d.kind == "hostile" and d.status == "failed" for d in docs),
        "mcp_searches_answered": sum(kind == "search_mcp" and ok for _, kind, ok, _ in chaos.asked),
        "connector_records_indexed": sum(
            d.kind == "batch" and d.status in ("indexed", REPLACED) for d in docs
        ),
    }


def _per_bucket(chaos: Chaos, zero: float, buckets: int) -> list[int]:
    """Searches not answered correctly within the bound, per 10 s."""
    counts = [0] * buckets
    for sent, _, answered, _ in chaos.asked:
        if not answered:
            counts[min(buckets - 1, int((sent - zero) // 10))] += 1
    return counts


# The figures that must be 0: what the run lost, doubled, leaked or got wrong.
DATA_PROBLEMS = (
    "lost_documents",
    "stuck_documents",
    "failed_unexpectedly",
    "indexed_but_should_fail",
    "failed_without_reason",
    "delete_not_finished",
    "live_documents_not_found",
    "indexed_twice",
    "deleted_documents_returned",
    "replaced_versions_returned",
    "deleted_documents_with_points",
    "replaced_versions_with_points",
    "points_of_no_uploaded_document",
    "server_errors",
)


# The error kind whose first sample names a document behind a data problem.
PROBLEM_SAMPLES = {"lost_documents": "document:lost", "stuck_documents": "document:stuck"}


def data_problems(result: dict[str, Any]) -> list[str]:
    """What the run lost, doubled, leaked or got wrong, and what it did not exercise; a lost
    or stuck document is named (the first of them)."""
    samples = result.get("error_samples", {})
    problems = [
        f"{key}: {result[key]}"
        + (
            f" (first: {samples[PROBLEM_SAMPLES[key]]})"
            if PROBLEM_SAMPLES.get(key) in samples
            else ""
        )
        for key in DATA_PROBLEMS
        if result[key]
    ]
    if not result["kb_counts_match"]:
        problems.append(
            f"KB counts {result['kb_counts']}, documents {result['kb_counts_expected']}"
        )
    if result["events_missing"]:
        problems.append(f"events seen too seldom: {result['events_missing']} {result['events']}")
    return problems


def run(
    args: argparse.Namespace, work: Path, faults: list[Fault], settings: dict[str, str]
) -> dict[str, Any]:
    """Starts the stack under a supervisor, drives the load and the faults, checks the end."""
    rng = random.Random(args.seed)
    corpus = Corpus(args.eval, rng)
    with bench_stack(work, TOKEN, SECRET, settings, RECORD_STAGES) as (services, pipeline):
        with Supervisor(services, pipeline, interval_s=0.2, max_restarts=10) as supervisor:

            async def drive() -> tuple[Chaos, dict[str, Any]]:
                limits = httpx.Limits(max_connections=64, max_keepalive_connections=16)
                async with httpx.AsyncClient(
                    base_url=pipeline.api_url, timeout=REQUEST_TIMEOUT_S, limits=limits
                ) as http:
                    chaos = Chaos(http, services, pipeline, corpus, rng, args, faults=faults)
                    await chaos.setup()
                    await chaos.run()
                    finals = await chaos.final_checks()
                finals["stages"] = await stage_metrics(pipeline)
                return chaos, finals

            chaos, finals = asyncio.run(drive())
            restarts = list(supervisor.restarts)
        pipeline.stop()  # the vector store has one owner: the API must be gone to open it
        store = asyncio.run(check_store(work / "run", chaos.docs))
    result = figures(chaos, finals, store)
    result["restarts"] = dict(Counter(name for name, _ in restarts))
    return result


# Where a run that found a problem leaves its processes' logs.
KEPT_LOGS = Path(".ragline") / "chaos-logs"


def keep_logs(work: Path) -> None:
    """Copies the run's logs (every process's and server's) where they outlive the run, and
    says where on stderr."""
    kept = KEPT_LOGS / time.strftime("%Y%m%d-%H%M%S")
    for logs in sorted(work.glob("*/logs")):
        shutil.copytree(logs, kept / logs.parent.name)
    print(f"chaos: the processes' logs are kept in {kept.resolve()}", file=sys.stderr)


def main() -> None:
    """Runs the chaos soak and prints its figures; the last line is JSON."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.chaos")
    parser.add_argument("--minutes", type=float, default=30.0)
    parser.add_argument("--upload-rate", type=float, default=0.5, help="uploads per second")
    parser.add_argument("--search-rate", type=float, default=1.0, help="searches per second")
    parser.add_argument("--delete-rate", type=float, default=0.3, help="deletes per second")
    parser.add_argument("--min-indexed", type=int, default=30)
    parser.add_argument("--grace-s", type=float, default=600.0)
    parser.add_argument("--gap-s", type=float, nargs=2, default=(45.0, 90.0))
    parser.add_argument("--hold-s", type=float, nargs=2, default=(10.0, 30.0))
    parser.add_argument("--overlaps", type=int, default=5)
    parser.add_argument(
        "--long-hold-s", type=float, default=None, help="hold MongoDB's first fault this long"
    )
    parser.add_argument(
        "--recovery-limit-s",
        type=float,
        default=600.0,
        help="a fault's canary must be indexed within this after the fault ends",
    )
    parser.add_argument(
        "--min-events", type=int, default=10, help="each event kind must be seen this often"
    )
    parser.add_argument("--seed", type=int, default=11)
    parser.add_argument("--eval", type=Path, default=Path("../shared/eval/manpages.json"))
    parser.add_argument("--tiny", action="store_true", help="48 s: what `make test` runs")
    add_results_option(parser)
    args = parser.parse_args()
    if args.tiny:
        vars(args).update(TINY)
    args.warmup_minutes, args.trace_memory = 0, 0
    faults = plan(
        args.seed,
        args.minutes * 60,
        tuple(args.gap_s),
        tuple(args.hold_s),
        args.overlaps,
        args.long_hold_s,
    )
    settings = run_settings(STACK_SETTINGS, tiny=args.tiny)
    announce(settings)
    print(f"chaos: {args.minutes:g} min, seed {args.seed}, {len(faults)} faults:")
    for fault in faults:
        print(f"  {fault.at_s:7.1f} s  {fault.describe()}")
    with sigterm_as_interrupt(), tempfile.TemporaryDirectory(prefix="ragline-chaos-") as tmp:
        result = run(args, Path(tmp), faults, settings)
        if data_problems(result):
            keep_logs(Path(tmp))
    report("chaos", result, args, data_problems(result))


if __name__ == "__main__":
    main()
