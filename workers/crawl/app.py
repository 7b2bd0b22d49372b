"""Crawl worker: wiring only (the logic is in `services.crawl_service.CrawlerService`). Run
more of them to crawl faster: they share the job's URLs through the consumer group."""

from __future__ import annotations

from faststream import FastStream

from infra.settings import Settings
from ragline.stages.hosting import stage_app
from ragline.stages.ports import StageResult
from ragline.stages.runtime import Stage
from ragline.system import System
from schemas.crawl import CrawlTask

# URLs one worker fetches at once (from different partitions; one host is still fetched one
# request at a time, with its delay).
CONCURRENCY = 4


async def build_stage(system: System) -> Stage[CrawlTask]:
    """The crawl stage over the process's objects."""
    crawler_service = system.open_crawler_service()

    async def handle(task: CrawlTask) -> StageResult:
        return StageResult(skipped=not await crawler_service.handle(task))

    return Stage("crawl", CrawlTask, handle, system.settings.stages.crawl)


def create_app(settings: Settings) -> FastStream:
    """The crawl worker process."""
    return stage_app(settings, "crawl", build_stage, concurrency=CONCURRENCY)
