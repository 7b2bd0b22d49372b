"""Soak: mixed upload / delete / search load at fixed rates on a whole local stack.

Starts its own stack (the Kafka, MongoDB and Redis stand-ins, the API with the index stage, the
relay and one worker per stage the load goes through: records, extract, chunk, embed; every
setting at its default, which the load stays well under), creates a KB, a bot over it and a
person's token, and then drives, on an open-loop schedule (each request is sent at its time,
however long the earlier ones take):

- uploads, `--upload-rate` per second: text notes through `/documents/text` (45%), Markdown
  files (28%), the PDFs of `tests/fixtures` (12%), a DOCX (6%), batches of 4 connector records
  through `/documents/batch` (7%) and an encrypted PDF that must end `failed` (2%). Each is
  distinct: notes, Markdown, records and the DOCX carry a reference code of their own (such
  as `soak-3f2a-00042`), every file a name of its own, PDFs a trailing comment with the code;
- deletes, `--delete-rate` per second, each of the oldest indexed document still there (a
  tick is skipped while no more than `--min-indexed` are indexed, so searches keep targets);
- searches, `--search-rate` per second: 3 in 4 a bot's through the internal contract, 1 in 4
  a person's (`POST /api/v1/knowledge/search`, user token). 40% ask for a live document's
  reference code, which must be found; 20% for a deleted document's code; 40% a man-page
  question (`../shared/eval/manpages.json`, which also supplies the notes' text; where it is
  absent, the paraphrase set's questions, and its answer passages as the notes' text).

Every search answer is checked: no hit (nor a folded copy in `also_in`) may name a document
whose delete was answered before the search was sent. Every document is polled until it ends
`indexed` or `failed`.

    .venv/bin/python -m benchmarks.soak [--minutes 30] [--upload-rate 0.5] [--search-rate 1]
                                        [--delete-rate 0.4] [--warmup-minutes 2] [--grace-s 300]
                                        [--min-indexed 30] [--trace-memory FRAMES]
                                        [--store-process]
    .venv/bin/python -m benchmarks.soak --tiny    # 18 s of load, no warm-up, hashed embedder

Defaults: 0.5 uploads/s (about 0.6 documents and 1.7 chunks a second), 0.4 deletes/s, 1
search/s. The embedding model does about 30 chunks/s on a quiet 2-core machine and the
pipeline about 4 small documents a second (`benchmarks/crawl.py`), so this is a small share of
its capacity: headroom enough for a development machine that runs other stacks at the same
time (at 1 upload/s and 2 searches/s, with four other stacks' tests running, the pipeline fell
behind).

Warm-up: the same load, at the same rates, runs for `--warmup-minutes` before the measured
minutes, and its first uploads take every kind in turn: by its end every process has loaded
its model and parsers and been through every code path, and caches and allocators have
reached their working size. The start RSS is taken when the warm-up ends, the end RSS when the
load stops, both under load, so loading is not counted as growth.

With `--store-process` the embedded vector store is served by a process of its own
(`python -m ragline.store`, the API and its index stage reaching it over a Unix socket), so
that the store's engine and the API's own work show their memory apart.

Printed: the RSS, the private memory (RSS without the pages of mapped files, such as the vector
store's segments, which the kernel may drop) and the CPU of every process of the stack at start
and end; per minute, requests
and errors by kind, p50/p95 latency of uploads (to the 202) and searches, documents indexed and
their upload-to-indexed time; and at the end, after a grace period (`--grace-s`) for the
pipeline to finish: error counts, documents uploaded / indexed / failed / deleted, lost
documents (uploaded, not deleted, and neither indexed nor failed after the grace period), the
KB's counts against the documents, and, with the stack stopped, its vector store: a deleted
document must hold no point, an indexed one exactly its chunk count, and nothing else may be
there. Then, per process, what grew between the two moments by mapping (from
`/proc/PID/smaps`: private anonymous memory, the heap, each mapped file) and, with
`--trace-memory FRAMES`, the Python allocation sites that grew most: each Ragline process then
traces its allocations from the warm-up's start (`memory_trace_frames`) and writes a
tracemalloc snapshot at both moments, which are compared (tracing costs memory and CPU: such a
run's growth figures are for attribution, not the record). The last line printed is one JSON
object: among others
`errors` and `errors_by_kind`, `lost_documents`, `deleted_documents_returned`,
`deleted_documents_with_points`, `documents_with_wrong_point_count`,
`points_of_no_uploaded_document`, `sources_searchable_twice`, `documents`, `requests`,
`max_rss_growth_pct`,
`rss_growth_pct`, `private_growth_pct` (from the warm-up's end to the load's end: with
`--warmup-minutes 20 --minutes 60`, the last hour), `rss_level_growth_pct` and
`private_level_growth_pct` (the median of the measured minutes' last ten over that of their
first ten: a figure that swings within a bound reads level), `rss_mb_per_minute` and
`private_mb_per_minute` (every minute, by process), `api_allocators_per_minute` and
`api_allocators_level_growth_pct` (what the API's malloc holds by kind, in MB, and its Python
blocks, in thousands, from its `/metrics`: live growth told from fragmentation),
`allocators_level_growth_pct` (the same, by Ragline process: each worker and the store process
serve theirs on their metrics port),
`mapped_growth_mb`, `cpu_pct_of_a_core`,
`p95_ms_upload`, `p95_ms_search`, their per-minute lists, `search_p95_drift` (the search p95
of the last ten minutes over that of the first ten: how much searches slowed as the store
grew and churned; the halves of a shorter run), `upload_p95_drift` (the same of uploads),
`search_drift_by_step` (each step's p95 at both ends, from the answers' own timings, and what
the client waited beyond them: the store's steps against queueing behind the machine's other
work), `load_average_at_end`, and what the machine gave each measured minute
(`benchmarks.machine`): `probe_ms_per_minute` and `probe_cpu_ms_per_minute` (a fixed piece of
work timed in a process of its own), `probe_drift` (its last ten minutes over its first ten,
as the latencies' drifts: near 1.0, the machine gave the same at both ends),
`machine_busy_pct_per_minute`, `machine_steal_pct_per_minute` (what the host took) and
`cpu_pct_per_minute` (by process).
"""

from __future__ import annotations

import argparse
import asyncio
import io
import json
import math
import os
import random
import re
import signal
import statistics
import tempfile
import time
import tracemalloc
from collections import Counter
from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import docx
import httpx
from prometheus_client.parser import text_string_to_metric_families

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

from benchmarks import memory
from benchmarks.ingest import SECRET, TOKEN
from benchmarks.levels import LEVEL_MINUTES, level_growth
from benchmarks.machine import MachineTimes, Probe, cpu_pct_between
from benchmarks.results import add_results_option, report
from benchmarks.stack import RECORD_STAGES, announce, bench_stack, run_settings
from core.filters import chunks_where
from devstack.launcher import LocalServices, Pipeline
from infra.process.memory_trace import snapshot_dir
from infra.vectorstore.edge import EdgeVectorStore

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "tests" / "fixtures"
PDFS = (
    "crazyones.pdf",
    "service-handbook.pdf",
    "indirect-rotation.pdf",
    "pdflatex-outline.pdf",
    "Seige_of_Vicksburg_Sample_OCR.pdf",
    "GeoBase_NHNC1_Data_Model_UML_EN.pdf",
)
ENCRYPTED_PDF = "encrypted-file.pdf"
DOCX = "blk-paras-and-tables.docx"
UPLOAD_MIX = {
    "note": 0.45,
    "markdown": 0.28,
    "pdf": 0.12,
    "docx": 0.06,
    "batch": 0.07,
    "encrypted_pdf": 0.02,
}
BATCH_RECORDS = 4
# A delete not confirmed is sent again for this long (then it is `delete_not_finished`).
DELETE_RETRY_S = 180.0
PEOPLE_SHARE = 0.25
# Searches: a live document's code, a deleted document's code, else a man-page question.
LIVE_PROBE, DELETED_PROBE = 0.4, 0.2
EVAL_DIR = Path(__file__).parent / "eval"
# Every setting at its default.
STACK_SETTINGS: dict[str, str] = {}
# `--tiny`: minutes, uploads/s, searches/s, deletes/s, grace seconds, minimum indexed.
TINY = {
    "minutes": 0.3,
    "warmup_minutes": 0,
    "upload_rate": 1.0,
    "search_rate": 2.0,
    "delete_rate": 1.0,
    "grace_s": 90.0,
    "min_indexed": 0,
}
POLL_EVERY_S = 2.0
REQUEST_TIMEOUT_S = 30.0
FINAL = ("indexed", "failed")
# A document's state once it needs nothing more: final, or a version its successor replaced.
REPLACED = "replaced"
ENDED = (*FINAL, REPLACED)
# A document's statuses in order: the time from one to the next is spent waiting for and in it.
STAGES = ("queued", "extracting", "chunking", "embedding", "indexing", "indexed")
USER_ID = "u-soak"


@dataclass
class Doc:
    """One uploaded document and what became of it."""

    id: str
    kind: str
    code: str | None
    expect_failure: bool = False
    status: str = "queued"
    chunks: int = 0
    error: str | None = None
    delete_sent: float | None = None
    deleted: float | None = None
    filename: str | None = None
    # A new version of the same file, once uploaded; when it was seen indexed, this version
    # is `replaced` and must be neither found nor stored any more.
    replaced_by: str | None = None
    replaced_at: float | None = None


@dataclass
class Minute:
    """What completed within one minute of the run."""

    requests: Counter[str] = field(default_factory=Counter)
    errors: Counter[str] = field(default_factory=Counter)
    upload_ms: list[float] = field(default_factory=list)
    search_ms: list[float] = field(default_factory=list)
    # Each answered search's own timings (its `metrics`), with what the client waited beyond
    # them (`waited_ms`): the server's steps, against queueing and the machine's other work.
    search_steps: list[dict[str, float]] = field(default_factory=list)
    ingest_s: list[float] = field(default_factory=list)
    documents: int = 0
    skipped_deletes: int = 0


def percentile(values: list[float], q: float) -> float | None:
    """The q-th percentile (0..100) by the nearest-rank method; None without values."""
    if not values:
        return None
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q / 100 * len(ordered)) - 1)]


def rounded(value: float | None, digits: int = 1) -> float | None:
    """`round` that lets None through."""
    return None if value is None else round(value, digits)


class Corpus:
    """The text the load is made of: man-page passages for notes and Markdown, questions."""

    def __init__(self, path: Path, rng: random.Random) -> None:
        if path.is_file():
            data = json.loads(path.read_text())
            self.pages: list[tuple[str, str]] = sorted(data["corpus"].items())
            self.questions: list[str] = list(data["queries"].values())
        else:
            questions = json.loads((EVAL_DIR / "paraphrase.json").read_text())["questions"]
            self.pages = [
                (qid, " ".join(answer["text"] for answer in question["answers"]))
                for qid, question in sorted(questions.items())
            ]
            self.questions = [question["text"] for question in questions.values()]
            print(
                f"{path} not found (the man-page corpus): the notes are made of the paraphrase "
                f"set's {len(self.pages)} answer passages, and its questions are asked"
            )
        self._rng = rng
        self._pdfs = {name: (FIXTURES / name).read_bytes() for name in (*PDFS, ENCRYPTED_PDF)}

    def page(self) -> tuple[str, str]:
        """A man page: its name and text."""
        return self._rng.choice(self.pages)

    def note(self, code: str) -> tuple[str, str]:
        """A note's title and content."""
        name, text = self.page()
        return f"{name} note", f"{text}\n\nReference: {code}."

    def markdown(self, code: str) -> bytes:
        """A Markdown file of three man pages, one section each."""
        sections = [f"## {name}\n\n{text}" for name, text in (self.page() for _ in range(3))]
        body = "\n\n".join([f"# Notes {code}", *sections, f"Reference: {code}."])
        return (body + "\n").encode()

    def pdf(self, name: str, code: str) -> bytes:
        """A fixture PDF with a comment after its end (distinct bytes, the same text)."""
        return self._pdfs[name] + f"\n% {code}\n".encode()

    @staticmethod
    def docx(code: str) -> bytes:
        """The fixture DOCX with one more paragraph holding the code."""
        document = docx.Document(str(FIXTURES / DOCX))
        document.add_paragraph(f"Reference: {code}.")
        out = io.BytesIO()
        document.save(out)
        return out.getvalue()


def process_cpu_s(pid: int) -> float:
    """CPU seconds (user + system) a process has used, its waited-for children included."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    # utime, stime, cutime, cstime: fields 14-17 of stat(5), counted after the name.
    ticks = sum(int(value) for value in fields[11:15])
    return ticks / os.sysconf("SC_CLK_TCK")


class Soak:
    """Drives the load against one stack and keeps every figure."""

    # A process found dead is an error (where faults are injected on purpose, it is not).
    deaths_are_errors = True

    def __init__(
        self,
        http: httpx.AsyncClient,
        services: LocalServices,
        pipeline: Pipeline,
        corpus: Corpus,
        rng: random.Random,
        args: argparse.Namespace,
    ) -> None:
        self.http = http
        self.services = services
        self.pipeline = pipeline
        self.corpus = corpus
        self.rng = rng
        self.args = args
        self.tag = f"{rng.randrange(16**4):04x}"
        self.admin = {"Authorization": f"Bearer {TOKEN}"}
        self.internal = {"X-Internal-Secret": SECRET}
        self.person: dict[str, str] = {}
        self.kb = ""
        self.bot = ""
        self.docs: dict[str, Doc] = {}
        self.indexed_order: list[str] = []  # indexed, not yet deleted, oldest first
        self.deleted_order: list[str] = []
        # The KB's documents as the final poll listed them (`poll(everything=True)`).
        self.listed_at_end: set[str] = set()
        self.minutes: list[Minute] = []
        self.errors: Counter[str] = Counter()
        self.error_samples: dict[str, str] = {}
        self.started = time.monotonic()
        self.uploads = 0
        self.searches = 0
        self.question = 0
        self.live_probes = Counter[str]()
        # Live documents a search did not find: (document id, seconds into the run it was sent).
        self.unfound: list[tuple[str, float]] = []
        self.tasks: set[asyncio.Task[None]] = set()
        self.rss: dict[str, dict[str, float]] = {}
        self.anon: dict[str, dict[str, float]] = {}
        self.cpu: dict[str, dict[str, float]] = {}
        # The machine's CPU accounts with each snapshot, and the fixed probe's wall and CPU ms
        # every minute: whether the machine gave the same all along (`benchmarks.machine`).
        self.machine: dict[str, MachineTimes] = {}
        self.probes: dict[str, tuple[float, float]] = {}
        self.probe: Probe | None = None
        # Every Ragline process's allocators every minute, by process and minute, from its
        # /metrics: malloc's kinds and Python's live blocks (whether what grows is live or
        # fragmentation).
        self.allocators: dict[str, dict[str, dict[str, float]]] = {}
        # At `start` and `end`: every process's mappings, and its tracemalloc snapshot's path.
        self.mappings: dict[str, dict[str, memory.Mappings]] = {}
        self.traces: dict[str, dict[str, Path]] = {}
        self.dead: set[str] = set()
        # Seconds indexed documents spent in each status (waiting included), by status.
        self.stage_s: dict[str, list[float]] = {}

    # -- setup ----------------------------------------------------------------------------

    async def setup(self) -> None:
        """A KB, a bot over it, and a person's token."""
        kb = await self.http.post(
            "/api/v1/knowledge-bases", json={"name": "soak"}, headers=self.admin
        )
        kb.raise_for_status()
        self.kb = kb.json()["id"]
        knowledge = {"enabled": True, "kb_ids": [self.kb]}
        bot = await self.http.post(
            "/api/v1/bots", json={"name": "soak", "knowledge": knowledge}, headers=self.admin
        )
        bot.raise_for_status()
        self.bot = bot.json()["id"]
        token = await self.http.post(
            "/api/v1/tokens",
            json={"name": "soak person", "role": "user", "user_id": USER_ID},
            headers=self.admin,
        )
        token.raise_for_status()
        self.person = {"Authorization": f"Bearer {token.json()['token']}"}

    # -- bookkeeping ----------------------------------------------------------------------

    def minute(self) -> Minute:
        """The bucket of the current minute."""
        index = int((time.monotonic() - self.started) // 60)
        while len(self.minutes) <= index:
            self.minutes.append(Minute())
        return self.minutes[index]

    def error(self, kind: str, sample: str) -> None:
        """Counts an error of a kind and keeps its first message."""
        self.errors[kind] += 1
        self.minute().errors[kind] += 1
        self.error_samples.setdefault(kind, sample[:600])

    async def send(
        self, kind: str, method: str, url: str, **kwargs: Any
    ) -> tuple[httpx.Response | None, float]:
        """Sends one request and counts it; returns its answer, whatever its status (None and
        an error counted when there was none), and its ms."""
        started = time.perf_counter()
        try:
            response = await self.http.request(method, url, **kwargs)
        except httpx.HTTPError as exc:
            self.minute().requests[kind] += 1
            self.error(f"{kind}:{type(exc).__name__}", f"{exc!r}")
            elapsed = (time.perf_counter() - started) * 1000
            self.heard(kind, None, elapsed)
            return None, elapsed
        elapsed = (time.perf_counter() - started) * 1000
        self.minute().requests[kind] += 1
        self.heard(kind, response, elapsed)
        return response, elapsed

    async def request(
        self, kind: str, method: str, url: str, expect: tuple[int, ...], **kwargs: Any
    ) -> tuple[httpx.Response | None, float]:
        """Sends one request; counts it, and an error if it fails; returns it (None unless
        its status is one of `expect`) and its ms."""
        response, elapsed = await self.send(kind, method, url, **kwargs)
        if response is not None and response.status_code not in expect:
            self.error(f"{kind}:{response.status_code}", response.text)
            return None, elapsed
        return response, elapsed

    def heard(self, kind: str, response: httpx.Response | None, ms: float) -> None:
        """Each request's outcome, any answer or none, as it ends (for a subclass to keep)."""

    def searched(self, kind: str, sent: float, ms: float, correct: bool) -> None:
        """Each search's verdict as it ends (for a subclass to keep): `correct` when it was
        answered 2xx with a well-formed answer that named no deleted or replaced document and,
        asked for a live document's code, found it."""

    def spawn(self, work: Awaitable[None]) -> None:
        """Runs a request in the background (open loop: the schedule never waits for it)."""

        async def guarded() -> None:
            try:
                await work
            except Exception as exc:  # an answer not as the API documents it
                self.error(f"load:{type(exc).__name__}", repr(exc))

        task = asyncio.ensure_future(guarded())
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    def new_code(self) -> str:
        """A reference code no other document has."""
        self.uploads += 1
        return f"soak-{self.tag}-{self.uploads:05d}"

    # -- the load -------------------------------------------------------------------------

    async def upload(self, n: int) -> None:
        """One upload; the first ones take every kind in turn."""
        kinds = list(UPLOAD_MIX)
        kind = kinds[n] if n < len(kinds) else self.rng.choices(kinds, list(UPLOAD_MIX.values()))[0]
        code = self.new_code()
        base = f"/api/v1/knowledge-bases/{self.kb}/documents"
        made: list[tuple[str, str | None]] = []  # (document id, code)
        filename: str | None = None
        if kind == "note":
            title, content = self.corpus.note(code)
            body = {"title": title, "content": content}
            response, ms = await self.request(
                "upload", "POST", f"{base}/text", (202,), json=body, headers=self.admin
            )
            if response is not None:
                made.append((response.json()["id"], code))
        elif kind == "batch":
            records = []
            for i in range(BATCH_RECORDS):
                title, content = self.corpus.note(f"{code}-{i}")
                records.append({"external_id": f"{code}-{i}", "title": title, "content": content})
            response, ms = await self.request(
                "upload", "POST", f"{base}/batch", (202,), json={"records": records},
                headers=self.admin,
            )  # fmt: skip
            if response is not None:
                for i, result in enumerate(response.json()["results"]):
                    if result["outcome"] == "unchanged":
                        self.error("upload:duplicate", str(result))
                    made.append((result["document_id"], f"{code}-{i}"))
        else:
            filename, data, searchable = self.file(kind, code)
            response, ms = await self.request(
                "upload", "POST", base, (202,), files={"file": (filename, data)},
                headers=self.admin,
            )  # fmt: skip
            if response is not None:
                made.append((response.json()["id"], code if searchable else None))
        self.minute().upload_ms.append(ms)
        self.minute().documents += len(made)
        for document_id, doc_code in made:
            self.docs[document_id] = Doc(
                document_id,
                kind,
                doc_code,
                expect_failure=kind == "encrypted_pdf",
                filename=filename,
            )

    def file(self, kind: str, code: str) -> tuple[str, bytes, bool]:
        """A file upload's name, bytes, and whether its code is in its text."""
        if kind == "markdown":
            return f"notes-{code}.md", self.corpus.markdown(code), True
        if kind == "docx":
            return f"tables-{code}.docx", self.corpus.docx(code), True
        if kind == "encrypted_pdf":
            return f"locked-{code}.pdf", self.corpus.pdf(ENCRYPTED_PDF, code), False
        name = self.rng.choice(PDFS)
        return f"{Path(name).stem}-{code}.pdf", self.corpus.pdf(name, code), False

    async def delete(self, tick: int) -> None:
        """Deletes the oldest indexed document, unless too few are indexed. As a user would,
        a delete not answered 204 is sent again (after its `Retry-After`) until it is, or 404
        says it is gone, for `DELETE_RETRY_S` at most (then it is `delete_not_finished`)."""
        if len(self.indexed_order) <= self.args.min_indexed:
            self.minute().skipped_deletes += 1
            return
        doc = self.docs[self.indexed_order.pop(0)]
        doc.delete_sent = time.monotonic()
        url = f"/api/v1/knowledge-bases/{self.kb}/documents/{doc.id}"
        first = True
        while time.monotonic() - doc.delete_sent < DELETE_RETRY_S:
            response, _ = await self.send("delete", "DELETE", url, headers=self.admin)
            # A 404 is a delete an earlier try made (answered with an error, or not at all).
            done = (204,) if first else (204, 404)
            if response is not None and response.status_code in done:
                doc.deleted = time.monotonic()
                self.deleted_order.append(doc.id)
                return
            first = False
            wait = 1.0
            if response is not None:
                self.error(f"delete:{response.status_code}", response.text)
                wait = float(response.headers.get("retry-after", "1") or 1)
            await asyncio.sleep(wait)

    async def search(self, tick: int) -> None:
        """One search, a bot's or a person's, checked against what was deleted."""
        people = self.rng.random() < PEOPLE_SHARE
        draw = self.rng.random()
        target: Doc | None = None
        live = [d for d in self.indexed_order if self.docs[d].code]
        gone = self.deleted_order[-200:]
        if draw < LIVE_PROBE and live:
            target = self.docs[self.rng.choice(live)]
            query = str(target.code)
        elif draw < LIVE_PROBE + DELETED_PROBE and gone:
            query = str(self.docs[self.rng.choice(gone)].code)
        else:
            query = self.corpus.questions[self.question % len(self.corpus.questions)]
            self.question += 1
        self.searches += 1
        sent = time.monotonic()
        if people:
            kind = "search_people"
            response, ms = await self.request(
                kind, "POST", "/api/v1/knowledge/search", (200,),
                json={"query": query, "top_k": 5}, headers=self.person,
            )  # fmt: skip
        else:
            kind = "search_bot"
            body = {"bot_id": self.bot, "session_id": f"soak-{self.searches}", "query": query}
            response, ms = await self.request(
                kind, "POST", "/api/v1/internal/knowledge/search", (200,), json=body,
                headers=self.internal,
            )  # fmt: skip
        self.minute().search_ms.append(ms)
        if response is None:
            self.searched(kind, sent, ms, correct=False)
            return
        try:
            answer = response.json()
            steps = {k: float(v) for k, v in answer["metrics"].items() if k.endswith("_ms")}
            hits = answer["results" if people else "hits"]
            found = {hit["source" if people else "document_id"] for hit in hits}
            found |= {copy["document_id"] for hit in hits for copy in hit["also_in"]}
        except (ValueError, KeyError, TypeError) as exc:
            self.error(f"{kind}:malformed_answer", f"{exc!r}: {response.text}")
            self.searched(kind, sent, ms, correct=False)
            return
        steps["waited_ms"] = max(0.0, ms - steps.get("total_ms", 0.0))
        self.minute().search_steps.append(steps)
        correct = self.check_found(kind, query, found, sent)
        if target is not None and not self.live_found(kind, query, target, found, hits, sent):
            correct = False
        self.searched(kind, sent, ms, correct)

    def live_found(
        self,
        kind: str,
        query: str,
        target: Doc,
        found: set[str],
        hits: list[dict[str, Any]],
        sent: float,
    ) -> bool:
        """Whether a live document asked for by its code was found (an error if not); True
        when it is no longer live (its delete was sent meanwhile)."""
        if target.delete_sent is not None or target.status == REPLACED:
            return True
        self.live_probes["asked"] += 1
        if target.id in found:
            return True
        at = sent - self.started
        self.unfound.append((target.id, at))
        self.error(
            f"{kind}:live_document_not_found",
            f"{query!r} ({target.kind} {target.id}, {target.chunks} chunks, sent at {at:.1f} s) "
            f"-> {[hit.get('retrieval_rationale', '') for hit in hits][:3]} {sorted(found)}",
        )
        return False

    def unfound_fates(self) -> list[dict[str, Any]]:
        """Each live document a search did not find: when, and what became of it by the end
        (still live, replaced by another version, deleted, lost), to tell a search's miss from
        a document the run took for live."""
        return [
            {
                "document_id": document_id,
                "sent_s": round(at, 1),
                "status_at_end": self.docs[document_id].status,
                "replaced_by": self.docs[document_id].replaced_by,
                "delete_sent": self.docs[document_id].delete_sent is not None,
            }
            for document_id, at in self.unfound
        ]

    def check_found(self, kind: str, query: str, found: set[str], sent: float) -> bool:
        """Counts an error for each document found that was deleted before the search was
        sent, or replaced by a new version seen indexed before it; True if there was none."""
        clean = True
        for document_id in found:
            doc = self.docs.get(document_id)
            if doc is None:
                continue
            if doc.deleted is not None and doc.deleted < sent:
                self.error(f"{kind}:deleted_document_returned", f"{query!r} -> {document_id}")
                clean = False
            if doc.replaced_at is not None and doc.replaced_at < sent:
                self.error(f"{kind}:replaced_version_returned", f"{query!r} -> {document_id}")
                clean = False
        return clean

    async def poll(self, everything: bool = False) -> None:
        """Reads the KB's document list, newest first, until every document still in the
        pipeline was seen (one page of 200 while they are recent); with `everything`, to its
        end, taking in documents whose upload was accepted but never answered (timed out)."""
        waiting = {d.id for d in self.pending()}
        seen: set[str] = set()
        # The files listed indexed, by name, and which document each is now.
        indexed_files: dict[str, str] = {}
        cursor: str | None = None
        while waiting or everything:
            params: dict[str, Any] = {"limit": 200} | ({"cursor": cursor} if cursor else {})
            response, _ = await self.request(
                "status", "GET", f"/api/v1/knowledge-bases/{self.kb}/documents",
                (200,), params=params, headers=self.admin,
            )  # fmt: skip
            if response is None:
                return
            page = response.json()
            for state in page["items"]:
                if state["parse_status"] == "indexed":
                    indexed_files.setdefault(state["filename"], state["id"])
                doc = self.docs.get(state["id"])
                if doc is None and everything:
                    doc = Doc(state["id"], "unanswered upload", None)
                    doc.expect_failure = state["filename"].startswith("locked-")
                    self.docs[doc.id] = doc
                if doc is not None:
                    self.settle(doc, state)
                    waiting.discard(doc.id)
                    seen.add(doc.id)
            cursor = page.get("next_cursor")
            if not cursor:
                break
        if everything:
            self.listed_at_end = seen
            account_for_unlisted(self.docs.values(), seen, indexed_files, time.monotonic())

    def settle(self, doc: Doc, state: dict[str, Any]) -> None:
        """Takes a polled state in; a document that ended is counted."""
        status = state["parse_status"]
        if status not in FINAL or doc.status in FINAL:
            doc.status = status
            return
        doc.status = status
        doc.chunks = int(state["chunk_count"] or 0)
        doc.error = state["parse_error"]
        if status == "indexed":
            self.indexed_order.append(doc.id)
            times = {"queued": state["created_at"], **state["stage_started_at"]}
            at = [datetime.fromisoformat(times[stage]) for stage in STAGES if stage in times]
            self.minute().ingest_s.append((at[-1] - at[0]).total_seconds())
            if len(at) == len(STAGES):
                for stage, begun, ended in zip(STAGES, at, at[1:], strict=False):
                    self.stage_s.setdefault(stage, []).append((ended - begun).total_seconds())
            if doc.expect_failure:
                self.error("document:indexed_but_should_fail", f"{doc.id} ({doc.filename})")
            return
        if not doc.expect_failure:
            self.error(f"document:failed:{doc.kind}", f"{doc.id}: {doc.error}")
        if not (doc.error or "").strip():
            self.error("document:failed_without_reason", f"{doc.id} ({doc.filename})")

    def outcomes(self) -> dict[str, int]:
        """What must be 0 once the run is over, beside what was lost: deletes not confirmed
        or whose document is still listed, documents that should have failed but were
        indexed, failures without a reason, and live documents a search did not find."""
        docs = self.docs.values()
        return {
            "delete_not_finished": sum(
                d.delete_sent is not None and (d.deleted is None or d.id in self.listed_at_end)
                for d in docs
            ),
            "indexed_but_should_fail": sum(
                d.expect_failure and d.status == "indexed" for d in docs
            ),
            "failed_without_reason": sum(
                d.status == "failed" and not (d.error or "").strip() for d in docs
            ),
            "live_documents_not_found": sum(
                n for kind, n in self.errors.items() if kind.endswith("live_document_not_found")
            ),
        }

    def pending(self) -> list[Doc]:
        """Documents neither indexed nor failed yet (nor being deleted)."""
        return [d for d in self.docs.values() if d.status not in ENDED and d.delete_sent is None]

    # -- schedules ------------------------------------------------------------------------

    async def ticker(
        self, rate: float, until: float, fire: Callable[[int], Awaitable[None]]
    ) -> None:
        """Calls `fire(n)` at `rate` per second from now until `until`, never waiting for it."""
        if rate <= 0:
            return
        start = time.monotonic()
        n = 0
        while (at := start + n / rate) < until:
            await asyncio.sleep(max(0.0, at - time.monotonic()))
            self.spawn(fire(n))
            n += 1

    async def poller(self, stop: asyncio.Event) -> None:
        """Polls documents' status every `POLL_EVERY_S` until stopped."""
        while not stop.is_set():
            await self.poll()
            await asyncio.sleep(POLL_EVERY_S)

    def snapshot(self, label: str) -> None:
        """Records every process's RSS and CPU seconds under `label`."""
        procs = [*self.services.processes, *self.pipeline.processes]
        self.rss[label] = {p.name: memory.process_tree_rss_mb(p.pid) for p in procs}
        self.anon[label] = {p.name: memory.process_tree_rss_mb(p.pid, "RssAnon") for p in procs}
        self.cpu[label] = {p.name: process_cpu_s(p.pid) for p in procs}
        self.cpu[label]["soak (load generator)"] = process_cpu_s(os.getpid())
        self.cpu[label]["_wall"] = time.monotonic()
        self.machine[label] = MachineTimes.read()
        for proc in procs:
            if self.deaths_are_errors and not proc.alive() and proc.name not in self.dead:
                self.dead.add(proc.name)
                self.error(f"process:died:{proc.name}", proc.tail(10))

    async def attribute(self, label: str) -> None:
        """Records every process's mappings under `label` (after its RSS) and, with
        `--trace-memory`, has each Ragline process write a tracemalloc snapshot (the first
        time, start tracing: `infra.process.memory_trace`)."""
        procs = [*self.services.processes, *self.pipeline.processes]
        self.mappings[label] = {
            p.name: memory.tree_mappings([p.pid, *memory.descendants(p.pid)]) for p in procs
        }
        if self.args.trace_memory:
            pids = {p.name: p.pid for p in self.pipeline.processes}
            directory = snapshot_dir(self.pipeline.run_dir)
            self.traces[label] = await asyncio.to_thread(memory.request_snapshots, pids, directory)
            missing = sorted(set(pids) - set(self.traces[label]))
            print(
                f"       tracemalloc snapshots ({label}) written; none from {missing}"
                if missing
                else f"       tracemalloc snapshots ({label}) written",
                flush=True,
            )

    async def reporter(self, end: float) -> None:
        """Prints each minute as it ends, with every process's RSS; keeps the snapshots taken
        when the warm-up ends (`start`) and when the load stops (`end`)."""
        warmup = self.args.warmup_minutes
        print(
            f"{'min':>4} {'phase':<6} {'upl':>4} {'docs':>4} {'del':>4} {'skip':>4} {'srch':>4} "
            f"{'err':>4} {'upload p50/p95 ms':>17} {'search p50/p95 ms':>17} {'indexed':>7} "
            f"{'ingest p50/p95 s':>16} {'pending':>7} {'load':>5}",
            flush=True,
        )
        if warmup == 0:
            self.snapshot("start")
            await self.attribute("start")
        k = 0
        while True:
            k += 1
            at = min(self.started + 60 * k, end)
            await asyncio.sleep(max(0.0, at - time.monotonic()))
            label = f"minute {k}"
            self.snapshot(label)
            if self.probe is not None:
                self.probes[label] = await self.probe.measure()
            await self.sample_allocators(label)
            self.print_minute(k - 1, warmup)
            if k == warmup:
                self.rss["start"], self.cpu["start"] = self.rss[label], self.cpu[label]
                self.anon["start"] = self.anon[label]
                print("       warm-up over: the RSS above is the start", flush=True)
                await self.attribute("start")
            if at >= end:
                self.rss["end"], self.cpu["end"] = self.rss[label], self.cpu[label]
                self.anon["end"] = self.anon[label]
                await self.attribute("end")
                return

    async def sample_allocators(self, label: str) -> None:
        """Records, under `label`, what each Ragline process's malloc holds by kind (MB) and its
        Python blocks (thousands), from its /metrics (nothing from one that does not answer)."""
        for proc in self.pipeline.processes:
            try:
                answer = await self.http.get(self.pipeline.metrics_url(proc), timeout=10)
            except httpx.HTTPError:
                continue
            self.allocators.setdefault(proc.name, {})[label] = allocator_figures(answer.text)

    def print_minute(self, index: int, warmup: int) -> None:
        """One row of the per-minute table, and the RSS of every process."""
        while len(self.minutes) <= index:
            self.minutes.append(Minute())
        m = self.minutes[index]
        phase = "warmup" if index < warmup else "soak"
        print(
            f"{index + 1:>4} {phase:<6} {m.requests['upload']:>4} {m.documents:>4} "
            f"{m.requests['delete']:>4} {m.skipped_deletes:>4} "
            f"{m.requests['search_bot'] + m.requests['search_people']:>4} "
            f"{sum(m.errors.values()):>4} "
            f"{fmt_pair(m.upload_ms, 0):>17} {fmt_pair(m.search_ms, 0):>17} {len(m.ingest_s):>7} "
            f"{fmt_pair(m.ingest_s, 1):>16} {len(self.pending()):>7} {os.getloadavg()[0]:>5.1f}",
            flush=True,
        )
        if m.errors:
            print(f"       errors: {dict(m.errors)}", flush=True)
        label, previous = f"minute {index + 1}", f"minute {index}" if index else "start"
        rss = self.rss[label]
        print("       RSS MB: " + ", ".join(f"{k} {v:.0f}" for k, v in rss.items()), flush=True)
        if previous in self.cpu:
            wall = self.cpu[label]["_wall"] - self.cpu[previous]["_wall"]
            cpu = cpu_pct_between(self.cpu[previous], self.cpu[label], wall)
            machine = self.machine[label].since(self.machine[previous])
            probe = self.probes.get(label)
            print(
                "       machine: "
                + (f"probe {probe[0]:.1f}/{probe[1]:.1f} ms wall/CPU, " if probe else "")
                + f"busy {machine['busy_pct']:.0f}%, steal {machine['steal_pct']:.1f}%; "
                + "CPU % of a core: "
                + ", ".join(f"{k} {v:.0f}" for k, v in cpu.items()),
                flush=True,
            )
        for name, minutes in self.allocators.items():
            held = minutes.get(f"minute {index + 1}", {})
            figures = ", ".join(f"{k} {v:.1f}" for k, v in held.items())
            print(f"       {name}: {figures}", flush=True)

    async def run(self) -> None:
        """Warm-up and soak at the fixed rates, then the grace period."""
        args = self.args
        if args.trace_memory:
            await self.attribute("tracing started")
        self.probe = Probe()
        self.started = time.monotonic()
        warmup_end = self.started + args.warmup_minutes * 60
        end = warmup_end + args.minutes * 60
        stop_polling = asyncio.Event()
        poller = asyncio.create_task(self.poller(stop_polling))
        try:
            await asyncio.gather(
                self.ticker(args.upload_rate, end, self.upload),
                self.ticker(args.delete_rate, end, self.delete),
                self.ticker(args.search_rate, end, self.search),
                self.reporter(end),
            )
        finally:
            self.probe.close()
        in_flight = len(self.tasks)
        await asyncio.gather(*list(self.tasks))
        print(f"load stopped ({in_flight} requests were in flight); waiting for the pipeline")
        stop_polling.set()
        await poller
        stopped = time.monotonic()
        # The whole list each time: an upload whose answer timed out may still have been
        # accepted, and its document must end too.
        await self.poll(everything=True)
        while self.pending() and time.monotonic() - stopped < args.grace_s:
            await asyncio.sleep(POLL_EVERY_S)
            await self.poll(everything=True)
        drained = time.monotonic() - stopped
        print(f"pipeline drained in {drained:.1f} s; {len(self.pending())} documents pending")

    async def final_checks(self) -> dict[str, Any]:
        """After the load: deleted documents' codes once more, and the KB's counts."""
        checked = 0
        for document_id in self.deleted_order[-50:]:
            doc = self.docs[document_id]
            if doc.code is None:
                continue
            body = {"bot_id": self.bot, "session_id": "soak-final", "query": doc.code}
            response, _ = await self.request(
                "final_search", "POST", "/api/v1/internal/knowledge/search", (200,), json=body,
                headers=self.internal,
            )  # fmt: skip
            checked += 1
            if response is not None and any(
                hit["document_id"] == doc.id for hit in response.json()["hits"]
            ):
                self.error("final_search:deleted_document_returned", doc.id)
        kb = (await self.http.get(f"/api/v1/knowledge-bases/{self.kb}", headers=self.admin)).json()
        present = [d for d in self.docs.values() if d.deleted is None and d.status != REPLACED]
        expected = {
            "document_count": len(present),
            "chunk_count": sum(d.chunks for d in present if d.status == "indexed"),
        }
        counted = {key: kb[key] for key in expected}
        if counted != expected:
            self.error("kb:counts", f"the KB counts {counted}, the documents make {expected}")
        return {"deleted_codes_searched": checked, "kb_counts": counted, "expected": expected}


STAGE_METRIC = re.compile(
    r'ragline_stage_duration_seconds_(sum|count)\{stage="(\w+)"\} ([0-9.e+-]+)'
)


async def stage_metrics(pipeline: Pipeline) -> dict[str, dict[str, float]]:
    """Messages each stage handled and the seconds it spent on them, over every process."""
    urls = [f"{pipeline.api_url}/metrics"] + [
        f"http://127.0.0.1:{p.env['RAGLINE_METRICS_PORT']}/metrics"
        for p in pipeline.processes
        if p.name != "api"
    ]
    stages: dict[str, dict[str, float]] = {}
    async with httpx.AsyncClient(timeout=10) as http:
        for url in urls:
            text = (await http.get(url)).text
            for kind, stage, value in STAGE_METRIC.findall(text):
                figures = stages.setdefault(stage, {"count": 0.0, "sum": 0.0})
                figures[kind] += float(value)
    return {
        stage: {
            "messages": int(f["count"]),
            "busy_s": round(f["sum"], 1),
            "mean_ms": round(f["sum"] / f["count"] * 1000, 1) if f["count"] else 0.0,
        }
        for stage, f in sorted(stages.items())
    }


async def check_store(run_dir: Path, docs: dict[str, Doc]) -> dict[str, int]:
    """With the stack stopped, its vector store, read point by point: indexed documents whose
    points are not all searchable (active) or not their chunk count, failed ones holding any,
    deleted or replaced ones holding points, files or records with more than one document
    searchable, and points of no uploaded document."""
    store = EdgeVectorStore(run_dir / "vectors", 384)
    await store.ensure_collection()
    points: Counter[str] = Counter()
    active: Counter[str] = Counter()
    searchable: dict[tuple[str, str], set[str]] = {}
    try:
        async for batch in store.export_points(chunks_where("default")):
            for point in batch:
                payload = point.payload
                points[payload.document_id] += 1
                if payload.active:
                    active[payload.document_id] += 1
                    key = (payload.kb_id, payload.source_key)
                    searchable.setdefault(key, set()).add(payload.document_id)
    finally:
        await store.close()
    live = [d for d in docs.values() if d.deleted is None and d.status != REPLACED]
    return {
        # Indexed: every point searchable (active), as many as its chunks; failed: none.
        "documents_with_wrong_point_count": sum(
            (d.status == "indexed" and (active[d.id] != d.chunks or points[d.id] != d.chunks))
            or (d.status == "failed" and points[d.id] != 0)
            for d in live
        ),
        "deleted_documents_with_points": sum(
            points[d.id] > 0 for d in docs.values() if d.deleted is not None
        ),
        "replaced_versions_with_points": sum(
            points[d.id] > 0 for d in docs.values() if d.status == REPLACED
        ),
        "sources_searchable_twice": sum(len(ids) > 1 for ids in searchable.values()),
        "points_of_no_uploaded_document": sum(
            n for document_id, n in points.items() if document_id not in docs
        ),
        "points": sum(points.values()),
    }


def fmt_pair(values: list[float], digits: int) -> str:
    """`p50/p95` of the values, or `-`."""
    if not values:
        return "-"
    p50, p95 = percentile(values, 50), percentile(values, 95)
    return f"{p50:.{digits}f}/{p95:.{digits}f}"


@contextmanager
def sigterm_as_interrupt() -> Iterator[None]:
    """SIGTERM stops the run as Ctrl-C does, so every process is stopped on the way out."""
    previous = signal.signal(signal.SIGTERM, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _growth(start: dict[str, float], end: dict[str, float]) -> dict[str, float]:
    """Per process, how much the figure grew from start to end, in percent."""
    return {
        name: round((end[name] - start[name]) / start[name] * 100, 1)
        for name in start
        if start[name] > 0
    }


def print_attribution(soak: Soak) -> dict[str, dict[str, float]]:
    """Prints, per process, what grew from the warm-up's end to the load's end: mappings
    (smaps) and, with `--trace-memory`, Python allocation sites; returns the mappings' growth
    in MB (all resident, private anonymous, pages of files) by process."""
    start, end = soak.mappings.get("start", {}), soak.mappings.get("end", {})
    grown: dict[str, dict[str, float]] = {}
    print("\nmemory from the warm-up's end to the load's end, by mapping (smaps):")
    for name in start:
        if name not in end:
            continue
        before, after = memory.totals(start[name]), memory.totals(end[name])
        grown[name] = {key: round((after[key] - before[key]) / 1024, 1) for key in before}
        print(f"{name}:")
        print("\n".join(memory.format_mappings(start[name], end[name])))
    traces_start, traces_end = soak.traces.get("start", {}), soak.traces.get("end", {})
    for name in traces_start:
        if name not in traces_end:
            continue
        growers = memory.snapshot_growth(
            tracemalloc.Snapshot.load(str(traces_start[name])),
            tracemalloc.Snapshot.load(str(traces_end[name])),
        )
        print(f"{name}: Python allocations that grew most (tracemalloc)")
        malloc_start = memory.malloc_figures(traces_start[name])
        malloc_end = memory.malloc_figures(traces_end[name])
        if malloc_start and malloc_end:
            print(memory.format_malloc(malloc_start, malloc_end))
        print("\n".join(memory.format_growers(growers, (str(ROOT),))) or "  none")
    return grown


def summary(soak: Soak, finals: dict[str, Any], store: dict[str, int]) -> dict[str, Any]:
    """Prints the end-of-run figures; returns the headline figures."""
    args = soak.args
    warmup = args.warmup_minutes
    measured = soak.minutes[warmup : warmup + math.ceil(args.minutes)]
    start, end = soak.rss["start"], soak.rss["end"]
    growth = _growth(start, end)
    anon_start, anon_end = soak.anon["start"], soak.anon["end"]
    anon_growth = _growth(anon_start, anon_end)
    wall = soak.cpu["end"]["_wall"] - soak.cpu["start"]["_wall"]
    cpu = {
        name: round((soak.cpu["end"][name] - soak.cpu["start"][name]) / wall * 100, 1)
        for name in soak.cpu["start"]
        if name != "_wall"
    }
    docs = list(soak.docs.values())
    lost = [d for d in docs if d.status not in ENDED and d.delete_sent is None]
    for doc in lost:
        soak.error("document:lost", f"{doc.id} ({doc.kind}) still {doc.status}")
    undeleted = [
        d
        for d in docs
        if d.delete_sent is not None and (d.deleted is None or d.id in soak.listed_at_end)
    ]
    for doc in undeleted:
        soak.error("document:delete_not_finished", f"{doc.id} ({doc.kind}) still {doc.status}")
    documents = {
        "uploaded": len(docs),
        "indexed": sum(d.status == "indexed" for d in docs),
        "failed": sum(d.status == "failed" for d in docs),
        "failed_unexpectedly": sum(d.status == "failed" and not d.expect_failure for d in docs),
        "deleted": sum(d.deleted is not None for d in docs),
        "lost": len(lost),
        "delete_not_finished": len(undeleted),
        "accepted_but_unanswered": sum(d.kind == "unanswered upload" for d in docs),
    }
    if store["deleted_documents_with_points"]:
        soak.error("store:deleted_document_has_points", str(store))
    if store["documents_with_wrong_point_count"] or store["points_of_no_uploaded_document"]:
        soak.error("store:point_counts", str(store))
    totals: Counter[str] = Counter()
    for m in soak.minutes:
        totals.update(m.requests)
    upload_ms = [v for m in measured for v in m.upload_ms]
    search_ms = [v for m in measured for v in m.search_ms]
    print(
        "\nprocess           RSS start MB  RSS end MB  growth %  private start/end MB  growth %"
        "  CPU % of a core"
    )
    for name in start:
        private = f"{anon_start.get(name, 0.0):.1f}/{anon_end.get(name, 0.0):.1f}"
        print(
            f"{name:<17} {start[name]:>12.1f} {end[name]:>11.1f} {growth.get(name, 0.0):>9.1f} "
            f"{private:>21} {anon_growth.get(name, 0.0):>9.1f} {cpu.get(name, 0.0):>16.1f}"
        )
    print(
        f"{'soak (load gen.)':<17} {'':>12} {'':>11} {'':>9} {cpu['soak (load generator)']:>16.1f}"
    )
    allocator_levels = {
        name: level_growth(per_minute(minutes), warmup, len(measured))
        for name, minutes in soak.allocators.items()
    }
    levels = {
        "RSS": level_growth(per_minute(soak.rss), warmup, len(measured)),
        "private": level_growth(per_minute(soak.anon), warmup, len(measured)),
        **{f"{name} allocators": growths for name, growths in allocator_levels.items()},
    }
    for kind, growths in levels.items():
        if growths:
            print(
                f"{kind} level growth, median of the last {LEVEL_MINUTES} minutes over the "
                f"first {LEVEL_MINUTES}, %: {growths}"
            )
    mapped_growth = print_attribution(soak)
    print(f"\nrequests: {dict(totals)}")
    print(f"documents: {documents}; live reference codes searched: {soak.live_probes['asked']}")
    print(f"KB counts {finals['kb_counts']}, from the documents {finals['expected']}")
    print(f"vector store: {store}")
    stages = ", ".join(f"{k} {fmt_pair(v, 2)}" for k, v in soak.stage_s.items())
    print(f"seconds in each status, p50/p95, indexed documents: {stages}")
    print(f"stage work (messages, busy seconds, mean ms per message): {finals['stages']}")
    print(f"errors: {sum(soak.errors.values())} {dict(soak.errors)}")
    for kind, sample in soak.error_samples.items():
        print(f"  first {kind}: {sample}")
    print(
        f"soak minutes: upload p50/p95 {fmt_pair(upload_ms, 1)} ms, "
        f"search p50/p95 {fmt_pair(search_ms, 1)} ms"
    )
    worst = max(growth, key=lambda name: growth[name])
    machine = machine_figures(soak, warmup, len(measured))
    print(
        f"machine: fixed probe p50/p95 {fmt_pair(machine['probe_ms_per_minute'], 1)} ms a minute, "
        f"its drift {machine['probe_drift']}; steal p50/p95 "
        f"{fmt_pair(machine['machine_steal_pct_per_minute'], 2)} %"
    )
    return {
        "minutes": args.minutes,
        "warmup_minutes": args.warmup_minutes,
        "rates_per_s": {
            "upload": args.upload_rate,
            "delete": args.delete_rate,
            "search": args.search_rate,
            "people_search_share": PEOPLE_SHARE,
        },
        "errors": sum(soak.errors.values()),
        "errors_by_kind": dict(soak.errors),
        "lost_documents": len(lost),
        **soak.outcomes(),
        "live_documents_not_found_fates": soak.unfound_fates(),
        "deleted_documents_returned": sum(
            n for kind, n in soak.errors.items() if kind.endswith("deleted_document_returned")
        ),
        "deleted_documents_with_points": store["deleted_documents_with_points"],
        "documents_with_wrong_point_count": store["documents_with_wrong_point_count"],
        "points_of_no_uploaded_document": store["points_of_no_uploaded_document"],
        "sources_searchable_twice": store["sources_searchable_twice"],
        "documents": documents,
        "requests": dict(totals),
        "max_rss_growth_pct": growth[worst],
        "max_rss_growth_process": worst,
        "rss_growth_pct": growth,
        "rss_mb_start": start,
        "rss_mb_end": end,
        "private_growth_pct": anon_growth,
        "private_mb_start": anon_start,
        "private_mb_end": anon_end,
        "mapped_growth_mb": mapped_growth,
        "cpu_pct_of_a_core": cpu,
        "stage_work": finals["stages"],
        "p95_ms_upload": rounded(percentile(upload_ms, 95)),
        "p95_ms_search": rounded(percentile(search_ms, 95)),
        # Every minute's memory by process, the warm-up's included: whether it levels off.
        "rss_mb_per_minute": per_minute(soak.rss),
        "private_mb_per_minute": per_minute(soak.anon),
        "rss_level_growth_pct": levels["RSS"],
        "private_level_growth_pct": levels["private"],
        "api_allocators_per_minute": per_minute(soak.allocators.get("api", {})),
        "api_allocators_level_growth_pct": allocator_levels.get("api", {}),
        "allocators_level_growth_pct": allocator_levels,
        "store_process": args.store_process,
        "p95_ms_search_per_minute": [rounded(percentile(m.search_ms, 95)) for m in measured],
        "search_p95_drift": drift(measured),
        "upload_p95_drift": drift(measured, lambda minute: minute.upload_ms),
        "search_drift_by_step": drift_by_step(measured),
        "p50_ms_search_per_minute": [rounded(percentile(m.search_ms, 50)) for m in measured],
        "p95_ms_upload_per_minute": [rounded(percentile(m.upload_ms, 95)) for m in measured],
        "p50_ms_upload_per_minute": [rounded(percentile(m.upload_ms, 50)) for m in measured],
        "p95_s_ingest_per_minute": [rounded(percentile(m.ingest_s, 95), 2) for m in measured],
        **machine,
    }


def machine_figures(soak: Soak, warmup: int, measured: int) -> dict[str, Any]:
    """What the machine gave each measured minute: the fixed probe's wall and CPU ms, how busy
    its cores were and what the host took, and each process's CPU; and `probe_drift`, the
    probe's median in the last `DRIFT_MINUTES` minutes over that in the first (near 1.0: the
    machine gave the same at both ends, and a latency drift is the product's own)."""
    labels = [f"minute {k}" for k in range(warmup + 1, warmup + measured + 1)]
    pairs = [
        (label, f"minute {k - 1}" if k > 1 else "start")
        for k, label in zip(range(warmup + 1, warmup + measured + 1), labels, strict=True)
        if label in soak.machine
    ]
    probes = [soak.probes[label] for label in labels if label in soak.probes]
    walls = [wall for wall, _ in probes]
    machine = [
        soak.machine[label].since(soak.machine[before])
        for label, before in pairs
        if before in soak.machine
    ]
    cpu = [
        cpu_pct_between(
            soak.cpu[before], soak.cpu[label], soak.cpu[label]["_wall"] - soak.cpu[before]["_wall"]
        )
        for label, before in pairs
        if before in soak.cpu
    ]
    ends = min(DRIFT_MINUTES, len(walls) // 2)
    return {
        "probe_ms_per_minute": [round(wall, 1) for wall in walls],
        "probe_cpu_ms_per_minute": [round(cpu_ms, 1) for _, cpu_ms in probes],
        "probe_drift": (
            round(statistics.median(walls[-ends:]) / statistics.median(walls[:ends]), 3)
            if ends
            else None
        ),
        "machine_busy_pct_per_minute": [m["busy_pct"] for m in machine],
        "machine_steal_pct_per_minute": [m["steal_pct"] for m in machine],
        "cpu_pct_per_minute": {
            name: [minute.get(name, 0.0) for minute in cpu] for name in (cpu[0] if cpu else {})
        },
    }


def account_for_unlisted(
    docs: Iterable[Doc], listed: set[str], indexed_files: Mapping[str, str], now: float
) -> None:
    """Says what became of each document missing from the KB's list at the end: deleted (its
    delete's answer was lost, yet it was done), replaced by a new version of its file listed
    indexed (one whose upload was accepted though answered with an error or not at all: a
    commit MongoDB applied after the API stopped waiting, as a user retrying it would learn),
    or else vanished (lost)."""
    for doc in docs:
        if doc.id in listed or doc.deleted is not None or doc.status == REPLACED:
            continue
        newer = indexed_files.get(doc.filename or "")
        if doc.delete_sent is not None:
            doc.deleted = doc.delete_sent
        elif newer is not None and newer != doc.id:
            doc.status, doc.replaced_by, doc.replaced_at = REPLACED, newer, now
        else:
            doc.status = "vanished"


# The minutes at each end of the load whose latencies `drift` compares.
DRIFT_MINUTES = 10


def per_minute(snapshots: dict[str, dict[str, float]]) -> dict[str, list[float]]:
    """Each process's figure at the end of every minute (`minute N` snapshots), in MB."""
    minutes = sorted(
        (int(label.split()[1]), values)
        for label, values in snapshots.items()
        if label.startswith("minute ")
    )
    names = dict.fromkeys(name for _, values in minutes for name in values)
    return {name: [round(values.get(name, 0.0), 1) for _, values in minutes] for name in names}


def drift(
    measured: Sequence[Minute], of: Callable[[Minute], list[float]] = lambda m: m.search_ms
) -> float | None:
    """The p95 of `of` (searches' latencies, or uploads') in the last `DRIFT_MINUTES` minutes
    over that of the first (1.0: no slowdown as the store grows and churns); None for a run too
    short to have both."""
    if len(measured) < 2 * DRIFT_MINUTES:
        first, last = measured[: len(measured) // 2], measured[len(measured) // 2 :]
    else:
        first, last = measured[:DRIFT_MINUTES], measured[-DRIFT_MINUTES:]
    before = percentile([ms for minute in first for ms in of(minute)], 95)
    after = percentile([ms for minute in last for ms in of(minute)], 95)
    if before is None or after is None or before <= 0:
        return None
    return round(after / before, 3)


def drift_by_step(measured: Sequence[Minute]) -> dict[str, dict[str, float | None]]:
    """Where the drift is: each search step's p95 (the server's own timings, and `waited_ms`,
    what the client waited beyond them) in the first and the last `DRIFT_MINUTES` minutes."""
    half = min(DRIFT_MINUTES, len(measured) // 2)
    ends = {"first": measured[:half], "last": measured[len(measured) - half :]}
    steps = sorted({k for m in measured for answer in m.search_steps for k in answer})
    return {
        step: {
            end: rounded(
                percentile([a[step] for m in minutes for a in m.search_steps if step in a], 95),
                2,
            )
            for end, minutes in ends.items()
        }
        for step in steps
    }


def allocator_figures(metrics: str) -> dict[str, float]:
    """What a process's malloc holds by kind (`malloc_<kind>_mb`) and its Python blocks
    (`python_blocks_k`, thousands), from its /metrics text."""
    figures: dict[str, float] = {}
    for family in text_string_to_metric_families(metrics):
        for sample in family.samples:
            if sample.name == "ragline_malloc_bytes":
                figures[f"malloc_{sample.labels['kind']}_mb"] = sample.value / 2**20
            elif sample.name == "ragline_python_allocated_blocks":
                figures["python_blocks_k"] = sample.value / 1000
    return figures


def stack_settings(args: argparse.Namespace) -> dict[str, str]:
    """The settings the stack runs with: every one at its default, but for tracing memory
    when `--trace-memory` asks for it, and the hashed embedder in a tiny run."""
    tracing = {"RAGLINE_MEMORY_TRACE_FRAMES": str(args.trace_memory)} if args.trace_memory else {}
    return run_settings(STACK_SETTINGS, tiny=args.tiny) | tracing


def run(args: argparse.Namespace, work: Path) -> dict[str, Any]:
    """Starts the stack, drives the load, checks the outcome; everything stops on the way out."""
    rng = random.Random(args.seed)
    corpus = Corpus(args.eval, rng)
    settings = stack_settings(args)
    with bench_stack(
        work, TOKEN, SECRET, settings, RECORD_STAGES, store_process=args.store_process
    ) as (services, pipeline):
        print(f"stack up: {', '.join(p.name for p in [*services.processes, *pipeline.processes])}")

        async def drive() -> tuple[Soak, dict[str, Any]]:
            limits = httpx.Limits(max_connections=64, max_keepalive_connections=16)
            async with httpx.AsyncClient(
                base_url=pipeline.api_url, timeout=REQUEST_TIMEOUT_S, limits=limits
            ) as http:
                soak = Soak(http, services, pipeline, corpus, rng, args)
                await soak.setup()
                await soak.run()
                finals = await soak.final_checks()
            finals["stages"] = await stage_metrics(pipeline)
            return soak, finals

        soak, finals = asyncio.run(drive())
        pipeline.stop()  # the vector store has one owner: it must be gone to open it
        store = asyncio.run(check_store(work / "run", soak.docs))
    return summary(soak, finals, store)


def main() -> None:
    """Runs the soak and prints its figures; the last line is JSON."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.soak")
    parser.add_argument("--minutes", type=float, default=30.0)
    parser.add_argument("--warmup-minutes", type=int, default=2)
    parser.add_argument("--upload-rate", type=float, default=0.5, help="uploads per second")
    parser.add_argument("--search-rate", type=float, default=1.0, help="searches per second")
    parser.add_argument("--delete-rate", type=float, default=0.4, help="deletes per second")
    parser.add_argument("--grace-s", type=float, default=300.0)
    parser.add_argument(
        "--min-indexed",
        type=int,
        default=30,
        help="deletes wait until more documents than this are indexed (searches keep targets)",
    )
    parser.add_argument(
        "--tiny",
        action="store_true",
        help="18 s at 1 upload/s, 2 searches/s, 1 delete/s, no warm-up: what `make test` runs",
    )
    parser.add_argument(
        "--trace-memory",
        type=int,
        default=0,
        metavar="FRAMES",
        help="trace the Ragline processes' Python allocations (tracemalloc, FRAMES frames) and "
        "print what grew between the warm-up's end and the load's end (costs memory and CPU: "
        "the growth figures of such a run are not comparable)",
    )
    parser.add_argument(
        "--store-process",
        action="store_true",
        help="serve the embedded vector store from a process of its own (`python -m "
        "ragline.store`) rather than the API's, to tell their memory apart",
    )
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--eval", type=Path, default=Path("../shared/eval/manpages.json"))
    parser.add_argument(
        "--work-dir", type=Path, default=None, help="keep the stack's data and logs here"
    )
    add_results_option(parser)
    args = parser.parse_args()
    if args.tiny:
        vars(args).update(TINY)
    announce(stack_settings(args))
    print(
        f"soak: {args.warmup_minutes} min warm-up + {args.minutes:g} min at "
        f"{args.upload_rate:g} uploads/s, {args.delete_rate:g} deletes/s, "
        f"{args.search_rate:g} searches/s; the vector store in "
        f"{'a process of its own' if args.store_process else 'the API'}; "
        f"load average {os.getloadavg()}"
    )
    with sigterm_as_interrupt():
        if args.work_dir is not None:
            args.work_dir.mkdir(parents=True, exist_ok=True)
            result = run(args, args.work_dir)
        else:
            with tempfile.TemporaryDirectory(prefix="ragline-soak-") as tmp:
                result = run(args, Path(tmp))
    result["load_average_at_end"] = [round(v, 2) for v in os.getloadavg()]
    report("soak", result, args, data_problems(result))


def data_problems(result: dict[str, Any]) -> list[str]:
    """What the run lost or corrupted: documents accepted and never indexed, deleted ones
    still found, still listed or still holding points, indexed ones whose points in the store
    are not all searchable or not their chunk count, points of no document uploaded, files or
    records with two documents searchable, live documents not found, a file that should fail
    indexed, a failure without a reason."""
    keys = (
        "lost_documents",
        "delete_not_finished",
        "indexed_but_should_fail",
        "failed_without_reason",
        "live_documents_not_found",
        "deleted_documents_returned",
        "deleted_documents_with_points",
        "documents_with_wrong_point_count",
        "points_of_no_uploaded_document",
        "sources_searchable_twice",
    )
    return [f"{key}: {result[key]}" for key in keys if result[key]]


if __name__ == "__main__":
    main()
