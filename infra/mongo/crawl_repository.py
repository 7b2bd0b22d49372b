"""Crawl jobs, their frontier (each URL taken once per job) and what each page looked like
when last fetched (validators for conditional requests, its links), in MongoDB.

A job's URLs enter the frontier and the outbox in one transaction, so a URL taken is always
on its way to a crawl worker; a URL is finished once (pending → done) together with the job's
counters, so a redelivered task changes nothing. One job per KB is active at a time (a lock
record keyed by the KB).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from pymongo import DESCENDING, AsyncMongoClient
from pymongo.asynchronous.client_session import AsyncClientSession
from pymongo.errors import DuplicateKeyError

from core.errors import Conflict, NotFound
from infra.mongo.client import (
    CRAWL_ACTIVE,
    CRAWL_FRONTIER,
    CRAWL_JOBS,
    CRAWL_PAGES,
    Database,
    MongoDoc,
    from_mongo,
    in_transaction,
    mongo_errors,
)
from infra.mongo.outbox import Outbox, Pending
from schemas.crawl import ACTIVE_STATES, CrawlJob, CrawlState, CrawlTask, CrawlUrlError
from schemas.domain import utcnow
from schemas.topics import CRAWL_PAGES as CRAWL_TOPIC

# Per-URL errors a job keeps (the newest).
MAX_ERRORS = 200


@dataclass(frozen=True)
class PageState:
    """A page as last fetched: its validators, content hash and links."""

    etag: str | None = None
    last_modified: str | None = None
    content_hash: str | None = None
    links: list[str] = field(default_factory=list)


def _job(doc: MongoDoc) -> CrawlJob:
    return CrawlJob.model_validate(from_mongo(doc))


class CrawlRepository:
    """Jobs, frontier and page states."""

    def __init__(self, client: AsyncMongoClient[MongoDoc], db: Database, outbox: Outbox) -> None:
        self._client = client
        self._jobs = db[CRAWL_JOBS]
        self._frontier = db[CRAWL_FRONTIER]
        self._pages = db[CRAWL_PAGES]
        self._active = db[CRAWL_ACTIVE]
        self._outbox = outbox

    async def create(self, job: CrawlJob) -> None:
        """Stores a new job; `Conflict` while another job of the KB is active."""
        record = job.model_dump(exclude={"id"})
        record["_id"] = job.id
        async with mongo_errors():
            try:
                await self._active.insert_one({"_id": job.kb_id, "job_id": job.id})
            except DuplicateKeyError as exc:
                raise Conflict(
                    "a crawl of this knowledge base is queued or running; wait for it to end or "
                    "cancel it"
                ) from exc
            await self._jobs.insert_one(record)

    async def get(self, tenant_id: str, job_id: str) -> CrawlJob:
        """A job of the tenant; `NotFound` otherwise."""
        job = await self.find(job_id)
        if job is None or job.tenant_id != tenant_id:
            raise NotFound("crawl job", job_id)
        return job

    async def find(self, job_id: str) -> CrawlJob | None:
        """A job by id."""
        async with mongo_errors():
            doc = await self._jobs.find_one({"_id": job_id})
        return None if doc is None else _job(doc)

    async def of_kb(self, tenant_id: str, kb_id: str, limit: int) -> list[CrawlJob]:
        """A KB's jobs, newest first."""
        async with mongo_errors():
            cursor = self._jobs.find({"tenant_id": tenant_id, "kb_id": kb_id})
            cursor = cursor.sort([("created_at", DESCENDING), ("_id", DESCENDING)]).limit(limit)
            return [_job(doc) async for doc in cursor]

    async def take(self, job_id: str, tasks: Sequence[CrawlTask], max_pages: int) -> list[Pending]:
        """Adds URLs not taken by the job yet (pages and files up to `max_pages` in all) to
        its frontier and their tasks to the outbox, in one transaction; returns the outbox
        entries (to send at once)."""
        if not tasks:
            return []

        async def work(session: AsyncClientSession) -> list[Pending]:
            job = await self._jobs.find_one({"_id": job_id}, session=session)
            if job is None or CrawlState(job["state"]) not in ACTIVE_STATES:
                return []
            ids = {f"{job_id}\x00{task.url}": task for task in tasks}
            known = {
                doc["_id"]
                async for doc in self._frontier.find(
                    {"_id": {"$in": list(ids)}}, {"_id": 1}, session=session
                )
            }
            room = max_pages - int(job.get("counts", {}).get("seen", 0))
            fresh: list[tuple[str, CrawlTask]] = []
            for key, task in ids.items():
                if key in known:
                    continue
                if task.kind in ("page", "file"):
                    if room <= 0:
                        continue
                    room -= 1
                fresh.append((key, task))
            if not fresh:
                return []
            await self._frontier.insert_many(
                [{"_id": key, "job_id": job_id, "status": "pending"} for key, _ in fresh],
                session=session,
            )
            pages = sum(task.kind in ("page", "file") for _, task in fresh)
            update: dict[str, Any] = {"$inc": {"enqueued": len(fresh), "counts.seen": pages}}
            if job["state"] == CrawlState.CREATED.value:
                update["$set"] = {"state": CrawlState.QUEUED.value, "queued_at": utcnow()}
            await self._jobs.update_one({"_id": job_id}, update, session=session)
            entries = [
                Pending(CRAWL_TOPIC, task.key, task.model_dump_json().encode()) for _, task in fresh
            ]
            await self._outbox.add(entries, session)
            return entries

        return await in_transaction(self._client, work)

    async def start(self, job_id: str) -> None:
        """Marks a queued job started (its first task is being worked on)."""
        async with mongo_errors():
            await self._jobs.update_one(
                {"_id": job_id, "state": CrawlState.QUEUED.value},
                {"$set": {"state": CrawlState.STARTED.value, "started_at": utcnow()}},
            )

    async def is_pending(self, job_id: str, url: str) -> bool:
        """Whether the job's URL still waits to be finished."""
        async with mongo_errors():
            doc = await self._frontier.find_one({"_id": f"{job_id}\x00{url}"})
        return doc is not None and doc.get("status") == "pending"

    async def finish_task(
        self, job_id: str, url: str, counts: dict[str, int], error: CrawlUrlError | None
    ) -> bool:
        """Finishes one of the job's URLs once, with what it counted; returns True when this
        was the job's last one (the caller completes the job)."""

        async def work(session: AsyncClientSession) -> bool:
            done = await self._frontier.update_one(
                {"_id": f"{job_id}\x00{url}", "status": "pending"},
                {"$set": {"status": "done"}},
                session=session,
            )
            if done.matched_count == 0:
                return False
            update: dict[str, Any] = {
                "$inc": {"done": 1, **{f"counts.{k}": v for k, v in counts.items()}}
            }
            if error is not None:
                update["$push"] = {"errors": {"$each": [error.model_dump()], "$slice": -MAX_ERRORS}}
            await self._jobs.update_one({"_id": job_id}, update, session=session)
            job = await self._jobs.find_one({"_id": job_id}, session=session)
            if job is None or job["done"] < job["enqueued"]:
                return False
            claimed = await self._jobs.update_one(
                {"_id": job_id, "state": CrawlState.STARTED.value, "completing": {"$ne": True}},
                {"$set": {"completing": True}},
                session=session,
            )
            return claimed.matched_count == 1

        return await in_transaction(self._client, work)

    async def complete(self, job: CrawlJob, removed: int) -> None:
        """Ends a job that went through all its URLs."""
        await self._end(job, CrawlState.COMPLETED, {"counts.removed": removed})

    async def fail(self, job: CrawlJob, error: str) -> None:
        """Ends a job that could not go on."""
        await self._end(job, CrawlState.FAILED, {"error": error[:1000]})

    async def cancel(self, tenant_id: str, job_id: str) -> CrawlJob:
        """Cancels an active job: its remaining URLs are passed over."""
        job = await self.get(tenant_id, job_id)
        if job.state not in ACTIVE_STATES:
            raise Conflict(f"crawl job {job_id!r} already ended ({job.state.value})")
        await self._end(job, CrawlState.CANCELLED, {})
        return await self.get(tenant_id, job_id)

    async def _end(self, job: CrawlJob, state: CrawlState, fields: dict[str, Any]) -> None:
        async with mongo_errors():
            await self._jobs.update_one(
                {"_id": job.id, "state": {"$in": [s.value for s in ACTIVE_STATES]}},
                {"$set": {"state": state.value, "finished_at": utcnow(), **fields}},
            )
            await self._active.delete_one({"_id": job.kb_id, "job_id": job.id})

    async def page_state(self, kb_id: str, url: str) -> PageState | None:
        """How the page looked when last fetched for this KB."""
        async with mongo_errors():
            doc = await self._pages.find_one({"_id": f"{kb_id}\x00{url}"})
        if doc is None:
            return None
        return PageState(
            etag=doc.get("etag"),
            last_modified=doc.get("last_modified"),
            content_hash=doc.get("content_hash"),
            links=list(doc.get("links") or []),
        )

    async def save_page_state(self, kb_id: str, url: str, state: PageState) -> None:
        """Remembers how the page looked (for the next crawl's conditional request)."""
        async with mongo_errors():
            await self._pages.update_one(
                {"_id": f"{kb_id}\x00{url}"},
                {
                    "$set": {
                        "kb_id": kb_id,
                        "etag": state.etag,
                        "last_modified": state.last_modified,
                        "content_hash": state.content_hash,
                        "links": state.links,
                        "fetched_at": utcnow(),
                    }
                },
                upsert=True,
            )
