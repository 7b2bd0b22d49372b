"""Write path: connector records through the whole pipeline, and what each costs MongoDB.

Starts its own stack (the API with the index stage, the relay, and one records, extract,
chunk and embed worker; every setting at its default), creates a KB and publishes `--records`
connector records on the records topic (`records.ingest.v1`), as a connector does: man-page
passages of every length (`../shared/eval/manpages.json`; where it is absent, the paraphrase
set's answer passages), one record each, of which `--updates` (a share) are published again
once all are out, with new text: a new version that must replace the first. It times them from
the first publish until every record's latest version is indexed, then uploads `--files`
Markdown files through the API, one after the other, and reports:

- `records_per_s`: records published per second, end to end; `model_records_per_s`: the same
  records' chunks embedded by the model alone in this process (the pipeline's batch size);
  `bulk_ratio_to_model`, the first over the second (the share of the model's speed the write
  path keeps);
- `mongo_commands_idle_per_s`: what the stack sends MongoDB with nothing to do, counted for
  `--idle-s` before the records go out (its sweeps and polling);
- `mongo_commands_per_record` and `mongo_commands_per_file`: the MongoDB commands the
  records, then the files, cost: every command the stack's processes sent (their
  `ragline_mongo_commands_total`) while they went through, less what the idle stack sends in
  as long (kind by kind), over their number; `..._gross` without that subtraction (the idle
  stack's share of a file uploaded alone is large); `mongo_commands_by_kind_per_record` and
  `..._per_file`: the net figures by process, command and collection. The benchmark waits on
  the index stage's metrics and reads the KB's counts only when enough documents finished, so
  its own polling adds a few reads in all;
- `mongo_writes_per_record` and `mongo_writes_per_file`: of those, the writes (inserts,
  updates, deletes, find-and-modifies and transaction commits: what a replica set's majority
  acknowledges); `mongo_commands_per_s`: the commands the stack sent per second while the
  records went through (gross);
- `goals`: each goal (`mongo_commands_per_record` <= 12, `mongo_commands_per_file` <= 16,
  `bulk_ratio_to_model` >= 0.9), its figure and whether it is met;
- `intake_p95_ms`: the records stage's time per message, p95 (from its histogram: the upper
  bound of the bucket that holds it);
- `lost_records` (a record whose latest version is not indexed), `indexed_twice` (a record
  with more than one document, or a document whose searchable points are not its chunk
  count, read from the vector store with the stack stopped), `points_of_no_document` (a
  replaced version's points left behind). A run with any of them exits non-zero.

Run it alone (nothing else on the machine):

    .venv/bin/python -m benchmarks.bulk [--records 20000] [--updates 0.1] [--files 50]
    .venv/bin/python -m benchmarks.bulk --tiny   # 200 records, 5 files, hashed embedder

The tiny run's stack embeds with the hashed embedder (it checks the mechanics and counts the
commands; its ratio says nothing about the model).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import tempfile
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
from aiokafka import AIOKafkaProducer
from prometheus_client.parser import text_string_to_metric_families

from benchmarks.ingest import SECRET, TOKEN, model_alone
from benchmarks.results import Goal, add_results_option, judge, report
from benchmarks.soak import EVAL_DIR, Doc, check_store
from benchmarks.stack import RECORD_STAGES, announce, bench_stack, run_settings
from devstack.launcher import Pipeline
from infra.settings.embedding import EmbeddingSettings
from infra.settings.ingest import ChunkingSettings
from schemas.domain import Record
from schemas.events import RecordPublished
from schemas.topics import RECORDS_INGEST
from workers.chunk.chunking import chunk_document
from workers.extract.extractors import extract

# Every setting at its default.
STACK_SETTINGS: dict[str, str] = {}
TINY = {"records": 200, "updates": 0.1, "files": 5, "idle_s": 6.0}
WAIT_LIMIT_S = 3 * 3600
POLL_EVERY_S = 1.0
REASK_AFTER_S = 5.0
TENANT = "default"
# The write path's goals.
GOALS = (
    Goal("mongo_commands_per_record", 12, at_most=True),
    Goal("mongo_commands_per_file", 16, at_most=True),
    Goal("bulk_ratio_to_model", 0.9, at_most=False),
)
# The commands that write (a transaction's writes are acknowledged at its commit).
WRITE_COMMANDS = {"insert", "update", "delete", "findAndModify", "commitTransaction"}


@dataclass(frozen=True)
class Published:
    """One record as published, and the chunks its text makes."""

    record: Record
    chunks: list[str]


def passages(path: Path) -> list[str]:
    """Texts of every length to make records of: the man pages' passages, or the paraphrase
    set's answers where the man pages are absent."""
    if path.is_file():
        return [text for _, text in sorted(json.loads(path.read_text())["corpus"].items())]
    questions = json.loads((EVAL_DIR / "paraphrase.json").read_text())["questions"]
    return [answer["text"] for q in questions.values() for answer in q["answers"]]


def made_chunks(record: Record) -> list[str]:
    """The chunks the pipeline makes of a record, made here the same way."""
    chunking = ChunkingSettings()
    document = extract(record.as_markdown().encode(), f"{record.external_id}.md")
    chunks, _ = chunk_document(document, chunking.chunk_size_chars, chunking.chunk_overlap_chars)
    return [chunk.text for chunk in chunks]


def make_records(texts: Sequence[str], count: int, updates: float, seed: int) -> list[Published]:
    """`count` records, then a share `updates` of them again with new text (new versions)."""
    rng = random.Random(seed)
    first = [
        Record(
            external_id=f"rec-{n:06d}",
            title=f"Record {n}",
            content=f"{rng.choice(texts)}\n\nRecord {n}.",
        )
        for n in range(count)
    ]
    again = [
        record.model_copy(
            update={"content": f"{rng.choice(texts)}\n\nRecord {record.external_id}, v2."}
        )
        for record in rng.sample(first, round(count * updates))
    ]
    return [Published(record, made_chunks(record)) for record in [*first, *again]]


def command_counts(pipeline: Pipeline) -> Counter[str]:
    """Every MongoDB command the stack's processes sent so far, by `process command
    collection`."""
    counts: Counter[str] = Counter()
    for proc in pipeline.processes:
        text = httpx.get(pipeline.metrics_url(proc), timeout=30).text
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                if sample.name == "ragline_mongo_commands_total":
                    labels = sample.labels
                    key = f"{proc.name} {labels['command']} {labels['collection']}".strip()
                    counts[key] += int(sample.value)
    return counts


def intake_p95_ms(pipeline: Pipeline) -> float | None:
    """The records stage's time per message, p95: the upper bound of the histogram bucket
    that holds it."""
    buckets: list[tuple[float, float]] = []
    for proc in pipeline.workers("records"):
        text = httpx.get(pipeline.metrics_url(proc), timeout=30).text
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                if (
                    sample.name == "ragline_stage_duration_seconds_bucket"
                    and sample.labels.get("stage") == "records"
                ):
                    buckets.append((float(sample.labels["le"]), sample.value))
    if not buckets:
        return None
    buckets.sort()
    total = buckets[-1][1]
    if not total:
        return None
    bound = next(le for le, count in buckets if count >= 0.95 * total)
    return round(bound * 1000, 1)


async def publish_records(bootstrap: str, kb_id: str, records: Sequence[Published]) -> None:
    """Publishes the records on the records topic, keyed as a connector keys them."""
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, linger_ms=20)
    await producer.start()
    try:
        sends = []
        for published in records:
            event = RecordPublished(tenant_id=TENANT, kb_id=kb_id, record=published.record)
            sends.append(
                await producer.send(RECORDS_INGEST, event.model_dump_json().encode(), key=event.key)
            )
        await asyncio.gather(*sends)
    finally:
        await producer.stop()


def wait_until(
    http: httpx.Client, pipeline: Pipeline, kb_id: str, documents: int, chunks: int
) -> None:
    """Waits until the KB counts `documents` documents and `chunks` chunks (what the records'
    latest versions make). Watches the index stage's finished documents on the API's metrics,
    which costs MongoDB nothing, and asks the KB (a read of every document's count) only when
    enough have finished, and again only after more have, or after a refusal (a count of tens
    of thousands of documents may take the local MongoDB stand-in longer than a request may
    take while the last documents finish: 503, asked again a few seconds later)."""
    deadline = time.monotonic() + WAIT_LIMIT_S
    asked_at = -1
    while time.monotonic() < deadline:
        finished = documents_finished(pipeline)
        if finished >= documents and finished != asked_at:
            asked_at = finished
            answer = http.get(f"/api/v1/knowledge-bases/{kb_id}")
            if answer.status_code != 200:
                print(f"the KB's counts were refused ({answer.status_code}: {answer.text[:200]})")
                asked_at = -1
                time.sleep(REASK_AFTER_S)
                continue
            kb = answer.json()
            if kb["document_count"] == documents and kb["chunk_count"] == chunks:
                return
        time.sleep(POLL_EVERY_S)
    raise TimeoutError(f"the KB did not reach {documents} documents within {WAIT_LIMIT_S} s")


def documents_finished(pipeline: Pipeline) -> int:
    """Documents the index stage finished so far, in every process that hosts it."""
    finished = 0.0
    for proc in pipeline.processes:
        text = httpx.get(pipeline.metrics_url(proc), timeout=30).text
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                if sample.name == "ragline_documents_processed_total" and (
                    sample.labels.get("stage") == "index"
                ):
                    finished += sample.value
    return int(finished)


def listed(http: httpx.Client, kb_id: str) -> list[dict[str, Any]]:
    """Every document of the KB, as the API lists them."""
    items: list[dict[str, Any]] = []
    cursor = None
    while True:
        params: dict[str, Any] = {"limit": 200} | ({"cursor": cursor} if cursor else {})
        page = http.get(f"/api/v1/knowledge-bases/{kb_id}/documents", params=params).json()
        items += page["items"]
        cursor = page.get("next_cursor")
        if not cursor:
            return items


def per_unit(
    before: Counter[str],
    after: Counter[str],
    units: int,
    background: Counter[str],
) -> tuple[float, float, dict[str, float]]:
    """Commands sent between two counts, per unit: in all, then net of `background` (what the
    idle stack sends in as long, subtracted kind by kind), and net by `process command
    collection` (largest first)."""
    sent = after - before
    net = sent - background
    by_kind = {key: round(n / units, 2) for key, n in net.most_common()}
    return (
        round(sum(sent.values()) / units, 2),
        round(sum(net.values()) / units, 2),
        by_kind,
    )


def writes(by_kind: dict[str, float]) -> float:
    """Of commands by `process command collection`, the writes (a transaction's commit
    counted as one: what a replica set's majority acknowledges)."""
    return round(sum(n for key, n in by_kind.items() if key.split()[1] in WRITE_COMMANDS), 2)


def scaled(counts: Counter[str], factor: float) -> Counter[str]:
    """The counts times `factor`, rounded."""
    return Counter({key: round(n * factor) for key, n in counts.items()})


def run(args: argparse.Namespace, work: Path) -> dict[str, Any]:
    """Starts the stack, publishes the records and uploads the files, checks the outcome."""
    texts = passages(args.eval)
    records = make_records(texts, args.records, args.updates, args.seed)
    latest = {str(p.record.external_id): p for p in records}
    expected_chunks = sum(len(p.chunks) for p in latest.values())
    settings = run_settings(STACK_SETTINGS, tiny=args.tiny)
    announce(settings)
    print(
        f"bulk: {len(latest):,} records, {len(records) - len(latest):,} published again, "
        f"{expected_chunks:,} chunks; then {args.files} files",
        flush=True,
    )
    with bench_stack(work, TOKEN, SECRET, settings, RECORD_STAGES) as (services, pipeline):
        headers = {"Authorization": f"Bearer {TOKEN}"}
        with httpx.Client(base_url=pipeline.api_url, headers=headers, timeout=120) as http:
            kb = http.post("/api/v1/knowledge-bases", json={"name": "bulk"}).json()["id"]
            # What the stack sends MongoDB with nothing to do (its periodic sweeps, the relay's
            # polling): part of every figure below, and what a longer run spreads thinner.
            idle_from, idle_started = command_counts(pipeline), time.monotonic()
            time.sleep(args.idle_s)
            before = command_counts(pipeline)
            idle_s = time.monotonic() - idle_started
            idle = before - idle_from
            started = time.monotonic()
            bootstrap = services.env()["RAGLINE_KAFKA__BOOTSTRAP_SERVERS"]
            asyncio.run(publish_records(bootstrap, kb, records))
            published_s = time.monotonic() - started
            wait_until(http, pipeline, kb, len(latest), expected_chunks)
            seconds = time.monotonic() - started
            after_records = command_counts(pipeline)
            files_started = time.monotonic()
            intake = intake_p95_ms(pipeline)
            files = [
                (f"file-{n:04d}.md", f"# File {n}\n\n{texts[n % len(texts)]}\n".encode())
                for n in range(args.files)
            ]
            for name, data in files:
                http.post(
                    f"/api/v1/knowledge-bases/{kb}/documents", files={"file": (name, data)}
                ).raise_for_status()
            file_chunks = sum(
                len(made_chunks(Record(external_id=name, content=data.decode())))
                for name, data in files
            )
            wait_until(http, pipeline, kb, len(latest) + len(files), expected_chunks + file_chunks)
            after_files = command_counts(pipeline)
            files_s = time.monotonic() - files_started
            documents = listed(http, kb)
        pipeline.stop()  # the vector store has one owner: it must be gone to open it
        docs = {
            d["id"]: Doc(
                d["id"], "record", None, status=d["parse_status"], chunks=d["chunk_count"] or 0
            )
            for d in documents
        }
        store = asyncio.run(check_store(work / "run", docs))
    per_record_gross, per_record, by_kind_record = per_unit(
        before, after_records, len(records), scaled(idle, seconds / idle_s)
    )
    per_file_gross, per_file, by_kind_file = per_unit(
        after_records, after_files, max(1, len(files)), scaled(idle, files_s / idle_s)
    )
    by_record: dict[str, list[dict[str, Any]]] = {}
    for document in documents:
        if document.get("external_id"):
            by_record.setdefault(document["external_id"], []).append(document)
    lost = [
        key
        for key, published in latest.items()
        if not any(
            d["parse_status"] == "indexed" and d["chunk_count"] == len(published.chunks)
            for d in by_record.get(key, [])
        )
    ]
    model_s = model_alone_seconds(records, args.tiny)
    result = {
        "records": len(records),
        "distinct_records": len(latest),
        "chunks": expected_chunks,
        "publish_s": round(published_s, 1),
        "seconds": round(seconds, 1),
        "records_per_s": round(len(records) / seconds, 1),
        "model_records_per_s": round(len(records) / model_s, 1) if model_s else None,
        "bulk_ratio_to_model": round(model_s / seconds, 3) if model_s else None,
        "mongo_commands_idle_per_s": round(sum(idle.values()) / idle_s, 1),
        "mongo_commands_per_record_gross": per_record_gross,
        "mongo_commands_per_file_gross": per_file_gross,
        "mongo_commands_per_record": per_record,
        "mongo_commands_per_file": per_file,
        "mongo_writes_per_record": writes(by_kind_record),
        "mongo_writes_per_file": writes(by_kind_file),
        "mongo_commands_per_s": round(sum((after_records - before).values()) / seconds, 1),
        "mongo_commands_by_kind_per_record": by_kind_record,
        "mongo_commands_by_kind_per_file": by_kind_file,
        "intake_p95_ms": intake,
        "lost_records": len(lost),
        "indexed_twice": sum(len(v) > 1 for v in by_record.values())
        + store["sources_searchable_twice"]
        + store["documents_with_wrong_point_count"],
        "points_of_no_document": store["points_of_no_uploaded_document"],
        "files_not_indexed": sum(
            d["parse_status"] != "indexed" for d in documents if not d.get("external_id")
        ),
    }
    result["goals"] = judge(result, GOALS)
    return result


def model_alone_seconds(records: Sequence[Published], tiny: bool) -> float | None:
    """Seconds the embedding model alone takes on every published record's chunks (None in
    the tiny run, whose stack does not run the model)."""
    if tiny:
        return None
    texts = [chunk for published in records for chunk in published.chunks]
    return model_alone(texts, EmbeddingSettings())


def data_problems(result: dict[str, Any]) -> list[str]:
    """Records lost or indexed twice, points left of replaced versions, files not indexed."""
    keys = ("lost_records", "indexed_twice", "points_of_no_document", "files_not_indexed")
    return [f"{key}: {result[key]}" for key in keys if result[key]]


def main() -> None:
    """Runs the benchmark and prints its figures; the last line is JSON."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.bulk")
    parser.add_argument("--records", type=int, default=20_000)
    parser.add_argument("--updates", type=float, default=0.1, help="share published again")
    parser.add_argument("--files", type=int, default=50)
    parser.add_argument(
        "--idle-s", type=float, default=10.0, help="seconds the idle stack's commands are counted"
    )
    parser.add_argument("--seed", type=int, default=5)
    parser.add_argument("--eval", type=Path, default=Path("../shared/eval/manpages.json"))
    parser.add_argument("--tiny", action="store_true", help="200 records: what `make test` runs")
    add_results_option(parser)
    args = parser.parse_args()
    if args.tiny:
        vars(args).update(TINY)
    with tempfile.TemporaryDirectory(prefix="ragline-bulk-") as tmp:
        result = run(args, Path(tmp))
    report("bulk", result, args, data_problems(result))


if __name__ == "__main__":
    main()
