"""Crawl jobs: starting, listing and cancelling a crawl of a KB's site (its URLs are worked
by the crawl stage, `workers/crawl/`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from urllib.parse import urlsplit

from core.errors import InvalidRequest
from infra.mongo.crawl_repository import CrawlRepository
from infra.mongo.knowledge_base_repository import KnowledgeBaseRepository
from infra.mongo.outbox import EventSender
from infra.settings.crawl import CrawlSettings
from schemas.crawl import (
    CrawlJob,
    CrawlState,
    CrawlTask,
    new_crawl_job_id,
)
from schemas.domain import utcnow
from schemas.rules import ensure_changeable
from services.crawl_links import canonical, is_file

# The source a crawl keeps in step: every crawled page and file of a KB.
CRAWL_SOURCE = "crawl"


@dataclass(frozen=True)
class CrawlRequest:
    """What to crawl (empty lists: the KB's `urls` and `files`) and how far."""

    urls: Sequence[str] = ()
    file_urls: Sequence[str] = ()
    max_pages: int | None = None
    max_depth: int | None = None
    include: Sequence[str] = ()
    exclude: Sequence[str] = ()


def _canonical_all(urls: Sequence[str], what: str) -> list[str]:
    found = []
    for url in urls:
        clean = canonical(url)
        if clean is None:
            raise InvalidRequest(f"{what}: {url!r} is not an http(s) URL")
        found.append(clean)
    return list(dict.fromkeys(found))


def crawl_task(job: CrawlJob, url: str, depth: int, kind: str) -> CrawlTask:
    """One URL of a job for the crawl worker."""
    return CrawlTask.model_validate(
        {"job_id": job.id, "tenant_id": job.tenant_id, "kb_id": job.kb_id, "url": url,
         "depth": depth, "kind": kind}
    )  # fmt: skip


class CrawlJobService:
    """Starts, lists and cancels crawl jobs."""

    def __init__(
        self,
        jobs: CrawlRepository,
        kbs: KnowledgeBaseRepository,
        events: EventSender,
        settings: CrawlSettings,
    ) -> None:
        self._jobs = jobs
        self._kbs = kbs
        self._events = events
        self._settings = settings

    async def start(self, tenant_id: str, kb_id: str, request: CrawlRequest) -> CrawlJob:
        """Queues a crawl of the KB; `Conflict` while another one is queued or running."""
        kb = ensure_changeable(await self._kbs.get(tenant_id, kb_id))
        urls = _canonical_all(request.urls or kb.urls, "urls")
        files = _canonical_all(request.file_urls or kb.files, "file_urls")
        if not urls and not files:
            raise InvalidRequest(
                "nothing to crawl: give urls or file_urls, or set the knowledge base's urls"
            )
        job = CrawlJob(
            id=new_crawl_job_id(),
            tenant_id=tenant_id,
            kb_id=kb.id,
            state=CrawlState.CREATED,
            urls=urls,
            file_urls=files,
            max_pages=request.max_pages or self._settings.max_pages,
            max_depth=self._settings.max_depth if request.max_depth is None else request.max_depth,
            include=list(request.include),
            exclude=list(request.exclude),
            created_at=utcnow(),
        )
        await self._jobs.create(job)
        origins = {f"{urlsplit(u).scheme}://{urlsplit(u).netloc}" for u in urls}
        tasks = [crawl_task(job, f"{o}/robots.txt", 0, "robots") for o in sorted(origins)]
        tasks += [crawl_task(job, url, 0, "file" if is_file(url) else "page") for url in urls]
        tasks += [crawl_task(job, url, 0, "file") for url in files]
        entries = await self._jobs.take(job.id, tasks, job.max_pages)
        await self._events.send_now(entries)
        return await self._jobs.get(tenant_id, job.id)

    async def of_kb(self, tenant_id: str, kb_id: str, limit: int = 50) -> list[CrawlJob]:
        """The KB's jobs, newest first."""
        kb = await self._kbs.get(tenant_id, kb_id)
        return await self._jobs.of_kb(tenant_id, kb.id, limit)

    async def get(self, tenant_id: str, job_id: str) -> CrawlJob:
        """One job with its counts and per-URL errors."""
        return await self._jobs.get(tenant_id, job_id)

    async def cancel(self, tenant_id: str, job_id: str) -> CrawlJob:
        """Cancels an active job; what it indexed stays, nothing is removed."""
        return await self._jobs.cancel(tenant_id, job_id)
