"""Crawl jobs: start one for a KB over its pages and files, follow it, cancel it."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, status

from api.deadline import bulk_operation
from api.deps import AdminPrincipal, CrawlJobServiceDep, KbId
from api.responses import AUTHENTICATED, BODY, refusals
from schemas.api import CrawlJobCreate, CrawlJobList, CrawlJobQueued
from schemas.crawl import CrawlJob
from services.crawl_service import CrawlRequest

router = APIRouter(tags=["crawl jobs"], responses=AUTHENTICATED)


@router.post(
    "/api/v1/knowledge-bases/{kb_id}/crawl-jobs",
    status_code=status.HTTP_202_ACCEPTED,
    responses=refusals(404, 409, *BODY),
)
@bulk_operation
async def start_crawl(
    kb_id: KbId,
    body: CrawlJobCreate,
    principal: AdminPrincipal,
    crawl_job_service: CrawlJobServiceDep,
) -> CrawlJobQueued:
    """Queues a crawl of the KB's site (409 while another crawl of it is queued or running):
    pages within the start URLs' host and path, robots.txt obeyed, sitemaps read, links
    followed to `max_depth` and `max_pages`; unchanged pages cost nothing, and the KB's crawled
    pages that are gone are removed when the crawl completes."""
    request = CrawlRequest(
        urls=body.urls,
        file_urls=body.file_urls,
        max_pages=body.max_pages,
        max_depth=body.max_depth,
        include=body.include,
        exclude=body.exclude,
    )
    job = await crawl_job_service.start(principal.tenant_id, kb_id, request)
    return CrawlJobQueued(job_id=job.id, job=job)


@router.get("/api/v1/knowledge-bases/{kb_id}/crawl-jobs", responses=refusals(404, 422))
async def list_crawls(
    kb_id: KbId,
    principal: AdminPrincipal,
    crawl_job_service: CrawlJobServiceDep,
    limit: Annotated[int, Query(ge=1, le=200)] = 50,
) -> CrawlJobList:
    """The KB's crawl jobs, newest first."""
    return CrawlJobList(items=await crawl_job_service.of_kb(principal.tenant_id, kb_id, limit))


@router.get("/api/v1/crawl-jobs/{job_id}", responses=refusals(404))
async def get_crawl(
    job_id: str, principal: AdminPrincipal, crawl_job_service: CrawlJobServiceDep
) -> CrawlJob:
    """A crawl job: state, timestamps, counts (seen, fetched, unchanged, failed, removed) and
    why URLs were not taken."""
    return await crawl_job_service.get(principal.tenant_id, job_id)


@router.post("/api/v1/crawl-jobs/{job_id}/cancel", responses=refusals(404, 409))
async def cancel_crawl(
    job_id: str, principal: AdminPrincipal, crawl_job_service: CrawlJobServiceDep
) -> CrawlJob:
    """Cancels a queued or running crawl: its remaining URLs are passed over; what it indexed
    stays (409 if it already ended)."""
    return await crawl_job_service.cancel(principal.tenant_id, job_id)
