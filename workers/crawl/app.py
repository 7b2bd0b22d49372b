"""Crawl stage: wiring only (the logic is in handler.py). Run more crawl workers to crawl
faster: they share the jobs' URLs through the consumer group."""

from __future__ import annotations

from infra.http.fetcher import Fetcher
from ragline.system import System
from schemas.crawl import CrawlTask
from workers.crawl.handler import CrawlHandler
from workers.hosting import StageProcess
from workers.runtime import Stage


async def build_stage(system: System) -> Stage[CrawlTask]:
    """The crawl stage over the process's objects, with an HTTP client closed with the
    process."""
    fetcher = Fetcher(system.settings.crawl)
    system.on_close(fetcher.close)
    handler = CrawlHandler(
        system.crawl_repo,
        system.document_repo,
        system.intake_service,
        system.blobs,
        system.retiring_sync_service,
        fetcher,
        system.events,
    )
    return Stage("crawl", CrawlTask, handler, system.settings.stages.crawl)


CRAWL = StageProcess("crawl", build_stage)
