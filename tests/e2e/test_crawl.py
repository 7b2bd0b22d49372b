"""Crawling a real local site (tests/crawl_site.py) through the whole stack: scope, robots,
sitemap, redirects, limits; a re-crawl that costs no embedding; removal of a page that is
gone; one job at a time; cancel; and a crawl worker killed mid-job."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest

from tests.conftest import RunningPipeline, own_stack
from tests.crawl_site import (
    ALLOWED_PAGES,
    FACTS,
    GONE_PAGE,
    HUGE_PAGE,
    NO_VALIDATORS_PAGE,
    OFF_SCOPE_PAGE,
    ORPHAN_PAGE,
    PDF_PAGE,
    PRIVATE_PAGE,
    SLOW_PAGE,
    CrawlSite,
)
from tests.e2e.client import Api

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningPipeline]:
    """A stack of its own (its crawl worker is killed), allowed to crawl 127.0.0.1."""
    extra = {
        "RAGLINE_CRAWL__ALLOW_PRIVATE_NETWORKS": "true",
        "RAGLINE_CRAWL__PER_HOST_DELAY_S": "0.02",
        "RAGLINE_CRAWL__FETCH_TIMEOUT_S": "1.5",
        "RAGLINE_CRAWL__MAX_PAGE_BYTES": str(1024 * 1024),
    }
    with own_stack(tmp_path_factory.mktemp("crawl"), extra) as running:
        yield running


@pytest.fixture(scope="module")
def site() -> Iterator[CrawlSite]:
    """The website; its slow page is quick at first (the test slows it down later)."""
    with CrawlSite(slow_seconds=0.1, huge_bytes=2 * 1024 * 1024) as served:
        yield served


async def _start(api: Api, kb_id: str, body: dict[str, Any], expect: int = 202) -> Any:
    response = await api.http.post(
        f"/api/v1/knowledge-bases/{kb_id}/crawl-jobs", json=body, headers=api.auth
    )
    assert response.status_code == expect, response.text
    return response.json()


async def _job(api: Api, job_id: str) -> dict[str, Any]:
    response = await api.http.get(f"/api/v1/crawl-jobs/{job_id}", headers=api.auth)
    assert response.status_code == 200, response.text
    return dict(response.json())


async def _ended(api: Api, job_id: str) -> dict[str, Any]:
    async with asyncio.timeout(180):
        while (job := await _job(api, job_id))["state"] not in ("completed", "failed", "cancelled"):
            await asyncio.sleep(0.3)
    return job


async def _indexed_urls(api: Api, kb_id: str) -> dict[str, str]:
    """The KB's documents by URL, once all are final (each URL once)."""
    items: list[dict[str, Any]] = []
    cursor = None
    while True:
        page = await api.documents(kb_id, limit=200, **({"cursor": cursor} if cursor else {}))
        items += page["items"]
        if not (cursor := page["next_cursor"]):
            break
    # Documents being removed (a page that is gone) are on their way out.
    items = [item for item in items if item["parse_status"] != "deleting"]
    for item in items:
        final = await api.wait_final(kb_id, item["id"])
        assert final["parse_status"] == "indexed", (final["url"], final["parse_error"])
    urls = [item["url"] for item in items]
    assert len(urls) == len(set(urls)), "a URL was indexed twice"
    return {item["url"]: item["id"] for item in items}


async def test_a_site_is_crawled_incrementally_and_kept_in_step(
    api: Api, stack: RunningPipeline, site: CrawlSite
) -> None:
    created = await api.http.post(
        "/api/v1/knowledge-bases",
        json={"name": "Docs site", "urls": [site.url("/docs/")]},
        headers=api.auth,
    )
    assert created.status_code == 201, created.text
    kb = created.json()
    # The KB's own `urls` are what a crawl starts from when the request names none.
    queued = await _start(api, kb["id"], {"max_depth": 5})
    assert queued["queued"] is True
    job_id = queued["job_id"]
    # One crawl of a KB at a time.
    busy = await _start(api, kb["id"], {"urls": [site.url("/docs/")]}, expect=409)
    assert "queued or running" in busy["detail"]

    job = await _ended(api, job_id)
    assert job["state"] == "completed", job
    assert job["started_at"]
    assert job["finished_at"]
    indexed = await _indexed_urls(api, kb["id"])
    assert set(indexed) == {site.url(p) for p in ALLOWED_PAGES | {SLOW_PAGE}}
    assert job["counts"]["fetched"] == len(ALLOWED_PAGES) + 1
    reasons = {e["url"]: e for e in job["errors"]}
    assert "robots.txt" in reasons[site.url(PRIVATE_PAGE)]["reason"]
    assert "larger than" in reasons[site.url(HUGE_PAGE)]["reason"]
    assert "redirect loop" in " ".join(e["reason"] for e in job["errors"])
    assert "out of the crawl's scope" in reasons[site.url("/docs/away")]["reason"]
    # Never asked for: what robots.txt forbids, and anything off scope.
    assert site.requests_for(PRIVATE_PAGE) == []
    assert site.requests_for(OFF_SCOPE_PAGE) == []
    # The page only the sitemap names, and the PDF, are searchable with their URL.
    for path in (ORPHAN_PAGE, PDF_PAGE):
        hits = await api.search([kb["id"]], FACTS[path], top_k=1)
        assert hits[0]["url"] == site.url(path)

    # A second crawl: everything answers 304 (or the same content), nothing is embedded, and
    # the page that is gone now leaves the KB.
    embed = api.worker_metrics("embed")
    embedded = await api.metric(embed, "ragline_chunks_embedded_total")
    site.remove(GONE_PAGE)
    site.slow_seconds = 3.0  # now slower than the crawl's fetch timeout: a failure for now
    site.clear_log()
    again = await _ended(api, (await _start(api, kb["id"], {"max_depth": 5}))["job_id"])
    assert again["state"] == "completed", again
    assert again["counts"]["fetched"] == 0
    assert again["counts"]["unchanged"] == len(ALLOWED_PAGES) - 1
    assert again["counts"]["removed"] == 1
    slow = next(e for e in again["errors"] if e["url"] == site.url(SLOW_PAGE))
    assert slow["transient"] is True
    conditional = [r for r in site.requests if r.status == 304]
    assert len(conditional) >= len(ALLOWED_PAGES) - 2
    assert site.requests_for(NO_VALIDATORS_PAGE)[0].status == 200  # the content hash decides
    assert await api.metric(embed, "ragline_chunks_embedded_total") == embedded
    async with asyncio.timeout(30):
        while site.url(GONE_PAGE) in await _indexed_urls(api, kb["id"]):
            await asyncio.sleep(0.3)
    # Its chunks leave search with the API's next sweep of retired documents (each second).
    async with asyncio.timeout(10):
        while site.url(GONE_PAGE) in [
            h["url"] for h in await api.search([kb["id"]], FACTS[GONE_PAGE], top_k=3)
        ]:
            await asyncio.sleep(0.3)
    # The slow page failed for now: its last version stays, and is found.
    assert site.url(SLOW_PAGE) in await _indexed_urls(api, kb["id"])
    hits = await api.search([kb["id"]], FACTS[SLOW_PAGE], top_k=1)
    assert hits[0]["url"] == site.url(SLOW_PAGE)
    site.slow_seconds = 0.1


async def test_a_crawl_is_cancelled_and_a_new_one_may_start(api: Api, site: CrawlSite) -> None:
    kb = await api.create_kb("Cancelled")
    job_id = (await _start(api, kb["id"], {"urls": [site.url("/docs/")]}))["job_id"]
    cancelled = await api.http.post(f"/api/v1/crawl-jobs/{job_id}/cancel", headers=api.auth)
    assert cancelled.status_code == 200, cancelled.text
    assert cancelled.json()["state"] == "cancelled"
    twice = await api.http.post(f"/api/v1/crawl-jobs/{job_id}/cancel", headers=api.auth)
    assert twice.status_code == 409
    listed = await api.http.get(f"/api/v1/knowledge-bases/{kb['id']}/crawl-jobs", headers=api.auth)
    assert [j["id"] for j in listed.json()["items"]] == [job_id]
    fresh = await _start(api, kb["id"], {"urls": [site.url("/docs/")], "max_pages": 3})
    job = await _ended(api, fresh["job_id"])
    assert job["state"] == "completed"
    assert job["counts"]["seen"] == 3


async def test_bad_requests_are_refused_with_a_reason(api: Api) -> None:
    kb = await api.create_kb("Nothing to crawl")
    empty = await _start(api, kb["id"], {}, expect=422)
    assert "nothing to crawl" in empty["detail"]
    scheme = await _start(api, kb["id"], {"urls": ["ftp://example.com/"]}, expect=422)
    assert scheme["detail"]
    missing = await api.http.get("/api/v1/crawl-jobs/crawl_nothing", headers=api.auth)
    assert missing.status_code == 404


async def test_a_crawl_worker_killed_mid_job_leaves_every_page_once(
    api: Api, stack: RunningPipeline, site: CrawlSite
) -> None:
    site.reset()  # the site as it began, whatever the module's earlier tests changed
    kb = await api.create_kb("Killed")
    job_id = (await _start(api, kb["id"], {"urls": [site.url("/docs/")], "max_depth": 5}))["job_id"]
    async with asyncio.timeout(60):
        while (await _job(api, job_id))["counts"]["fetched"] < 3:
            await asyncio.sleep(0.1)
    worker = stack.pipeline.workers("crawl")[0]
    worker.kill()
    worker.start()  # as a supervisor would
    job = await _ended(api, job_id)
    assert job["state"] == "completed", job
    indexed = await _indexed_urls(api, kb["id"])
    assert set(indexed) == {site.url(p) for p in ALLOWED_PAGES | {SLOW_PAGE}}


async def test_a_crawl_that_fetches_nothing_fails_and_removes_nothing(
    api: Api, site: CrawlSite
) -> None:
    kb = await api.create_kb("Site down")
    first = await _ended(
        api, (await _start(api, kb["id"], {"urls": [site.url("/docs/")]}))["job_id"]
    )
    assert first["state"] == "completed"
    before = await _indexed_urls(api, kb["id"])
    # The same KB pointed at a port where nothing listens: every fetch fails.
    down = await _start(api, kb["id"], {"urls": ["http://127.0.0.1:9/docs/"]})
    job = await _ended(api, down["job_id"])
    assert job["state"] == "failed"
    assert job["error"].startswith("no page could be fetched, so nothing was changed")
    assert job["counts"]["removed"] == 0
    assert await _indexed_urls(api, kb["id"]) == before
