"""The crawl stage's logic: works one URL of a crawl job.

It fetches the URL conditionally, hands changed content to the intake keyed by its canonical
URL (the same exactly-once path as records; an unchanged page costs nothing), takes the page's
links within scope into the job, and finishes the URL. The last URL completes the job: the KB's
crawled documents that this job did not reach (gone, 404/410, out of scope) are removed, and
those whose fetch failed for now are kept. A job that could fetch no page at all fails and
removes nothing.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Sequence
from urllib.parse import urlsplit

from core.governance import Reader
from infra.http.fetcher import Fetched, Fetcher, FetchFailed, Refused
from infra.mongo.blob_store import BlobStore
from infra.mongo.crawl_repository import CrawlRepository, PageState
from infra.mongo.document_repository import DocumentRepository
from infra.mongo.outbox import EventSender
from schemas.crawl import ACTIVE_STATES, CrawlJob, CrawlState, CrawlTask, CrawlUrlError
from schemas.domain import new_document_id, record_source_key
from schemas.formats import extension_for
from services.crawl_links import Scope, is_file, page_links, sitemap_links
from services.crawl_service import CRAWL_SOURCE, crawl_task
from services.intake_service import IntakeService, SyncRun
from services.policy_service import Submission
from services.sync_service import SyncService
from workers.ports import StageResult

log = logging.getLogger(__name__)

# The content types a crawl indexes (the web's documents; an API's JSON or a mail file found on
# a site is not one), each read as the extension `schemas.formats` records for it.
CRAWLED_TYPES = (
    "text/html",
    "text/plain",
    "text/markdown",
    "text/csv",
    "application/pdf",
    "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
)
EXTENSIONS = {
    **{content_type: extension_for(content_type) for content_type in CRAWLED_TYPES},
    "application/xhtml+xml": extension_for("text/html"),
}


class CrawlHandler:
    """Works one URL of a crawl job."""

    def __init__(
        self,
        jobs: CrawlRepository,
        documents: DocumentRepository,
        intake: IntakeService,
        blobs: BlobStore,
        syncs: SyncService,
        fetcher: Fetcher,
        events: EventSender,
    ) -> None:
        self._jobs = jobs
        self._documents = documents
        self._intake = intake
        self._blobs = blobs
        self._syncs = syncs
        self._fetcher = fetcher
        self._events = events

    async def __call__(self, task: CrawlTask) -> StageResult:
        """Works the task once (a redelivered one, or one of a cancelled job, is passed over)."""
        job = await self._jobs.find(task.job_id)
        if job is None or not await self._jobs.is_pending(job.id, task.url):
            return StageResult(skipped=True)
        if job.state not in ACTIVE_STATES:
            await self._finish(job, task, {}, None)  # cancelled: passed over
            return StageResult(skipped=True)
        if job.state is CrawlState.QUEUED:
            await self._jobs.start(job.id)
        scope = Scope.of(job.urls, job.include, job.exclude)
        counts: dict[str, int] = {}
        error: CrawlUrlError | None = None
        try:
            if task.kind == "robots":
                await self._robots(job, task)
            elif task.kind == "sitemap":
                await self._sitemap(job, task, scope)
            else:
                counts = await self._page(job, task, scope)
        except Refused as exc:
            error = CrawlUrlError(url=task.url, reason=str(exc))
        except FetchFailed as exc:
            await self._keep(job, task.url)
            error = CrawlUrlError(url=task.url, reason=str(exc), transient=True)
        if error is not None:
            counts = {"failed": int(task.kind in ("page", "file"))}
        await self._finish(job, task, counts, error)
        return StageResult()

    async def _robots(self, job: CrawlJob, task: CrawlTask) -> None:
        parts = urlsplit(task.url)
        rules = await self._fetcher.robots(f"{parts.scheme}://{parts.netloc}")
        maps = list(rules.sitemaps) if rules is not None else []
        maps = maps or [f"{parts.scheme}://{parts.netloc}/sitemap.xml"]
        await self._take(job, [crawl_task(job, u, 0, "sitemap") for u in maps])

    async def _sitemap(self, job: CrawlJob, task: CrawlTask, scope: Scope) -> None:
        fetched = await self._fetcher.fetch(task.url, lambda _: True)
        if fetched.status != 200:
            return  # no sitemap: links are followed anyway
        pages, maps = sitemap_links(fetched.body)
        tasks = [crawl_task(job, u, 1, "sitemap") for u in maps]
        tasks += [crawl_task(job, u, 1, "file" if is_file(u) else "page") for u in pages]
        await self._take(job, [t for t in tasks if t.kind == "sitemap" or scope(t.url)])

    async def _page(self, job: CrawlJob, task: CrawlTask, scope: Scope) -> dict[str, int]:
        listed = task.url in job.file_urls
        in_scope = (lambda _: True) if listed else scope
        if not in_scope(task.url):
            raise Refused("outside the crawl's scope")
        known = await self._jobs.page_state(job.kb_id, task.url)
        fetched = await self._fetcher.fetch(
            task.url, in_scope, known.etag if known else None,
            known.last_modified if known else None,
        )  # fmt: skip
        if fetched.url != task.url:
            # Redirected within scope: the page is known by where it lives.
            await self._take(job, [crawl_task(job, fetched.url, task.depth, task.kind)])
            return {}
        if fetched.status == 304 and known is not None:
            await self._keep(job, task.url)
            await self._follow(job, task, scope, known.links)
            return {"unchanged": 1}
        if fetched.status in (404, 410):
            raise Refused(f"the server answered {fetched.status}: the page is gone")
        if fetched.status != 200:
            raise Refused(f"the server answered {fetched.status}")
        extension = EXTENSIONS.get(fetched.content_type)
        if extension is None:
            raise Refused(f"content type {fetched.content_type or 'unknown'!r} is not indexed")
        if not fetched.body:
            raise Refused("the server answered with an empty body")
        digest = hashlib.sha256(fetched.body).hexdigest()
        links = page_links(fetched.body, fetched.url) if extension == ".html" else []
        state = PageState(fetched.etag, fetched.last_modified, digest, links)
        unchanged = known is not None and known.content_hash == digest
        if unchanged:
            await self._keep(job, task.url)
        else:
            await self._ingest(job, task.url, fetched, extension)
        await self._jobs.save_page_state(job.kb_id, task.url, state)
        await self._follow(job, task, scope, links)
        return {"unchanged": 1} if unchanged else {"fetched": 1}

    async def _ingest(self, job: CrawlJob, url: str, fetched: Fetched, extension: str) -> None:
        document_id = new_document_id()
        path = urlsplit(url).path.strip("/") or urlsplit(url).netloc
        name = path.rsplit("/", 1)[-1] or "index"
        filename = name if name.lower().endswith(extension) else f"{name}{extension}"
        stored = await self._blobs.store_original(fetched.body, filename, document_id)
        await self._intake.accept_file(
            job.tenant_id, job.kb_id, document_id, filename, stored,
            by=Submission.connector(), url=url, sync=SyncRun(CRAWL_SOURCE, job.id),
        )  # fmt: skip

    async def _keep(self, job: CrawlJob, url: str) -> None:
        """The page's document stays: it joins this crawl's run (unchanged, or failed for
        now)."""
        latest = await self._documents.latest_of_source(job.kb_id, record_source_key(url))
        if latest is not None:
            await self._documents.mark_synced([latest.id], CRAWL_SOURCE, job.id)

    async def _follow(
        self, job: CrawlJob, task: CrawlTask, scope: Scope, links: Sequence[str]
    ) -> None:
        if task.kind != "page" or task.depth >= job.max_depth:
            return
        tasks = [
            crawl_task(job, u, task.depth + 1, "file" if is_file(u) else "page")
            for u in links
            if scope(u)
        ]
        await self._take(job, tasks)

    async def _take(self, job: CrawlJob, tasks: list[CrawlTask]) -> None:
        entries = await self._jobs.take(job.id, tasks, job.max_pages)
        await self._events.send_now(entries)

    async def _finish(
        self,
        job: CrawlJob,
        task: CrawlTask,
        counts: dict[str, int],
        error: CrawlUrlError | None,
    ) -> None:
        last = await self._jobs.finish_task(job.id, task.url, counts, error)
        if not last:
            return
        ended = await self._jobs.find(job.id) or job
        if ended.counts.fetched + ended.counts.unchanged == 0:
            # Nothing of the site answered: keep what the KB has rather than empty it.
            first = ended.errors[0].reason if ended.errors else "no URL was in scope"
            await self._jobs.fail(
                job, f"no page could be fetched, so nothing was changed (first error: {first})"
            )
            return
        removed = await self._syncs.finish(
            job.tenant_id, job.kb_id, CRAWL_SOURCE, job.id, Reader.administrator()
        )
        await self._jobs.complete(job, len(removed))
        log.info("crawl %s of KB %s completed; %d pages removed", job.id, job.kb_id, len(removed))
