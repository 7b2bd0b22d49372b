"""The crawl fetcher against a real local site: what it refuses and why, and its limits."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from infra.http.fetcher import Fetcher, FetchFailed, Refused
from infra.settings.crawl import CrawlSettings
from tests.crawl_site import HUGE_PAGE, PRIVATE_PAGE, SLOW_PAGE, CrawlSite


@pytest.fixture(scope="module")
def site() -> Iterator[CrawlSite]:
    with CrawlSite(slow_seconds=1.0, huge_bytes=64 * 1024) as served:
        yield served


def _fetcher(**overrides: object) -> Fetcher:
    values: dict[str, object] = {
        "allow_private_networks": True,
        "per_host_delay_s": 0,
        "fetch_timeout_s": 0.5,
        "max_page_bytes": 32 * 1024,
        **overrides,
    }
    return Fetcher(CrawlSettings.model_validate(values))


def _anywhere(_: str) -> bool:
    return True


@pytest.mark.parametrize(
    "url",
    ["http://127.0.0.1:9/", "http://localhost:9/", "http://169.254.169.254/latest/meta-data/",
     "http://10.1.2.3/", "http://[::1]:9/"],
)  # fmt: skip
async def test_private_and_metadata_addresses_are_refused_unless_allowed(url: str) -> None:
    fetcher = _fetcher(allow_private_networks=False)
    try:
        with pytest.raises(Refused, match="private, loopback, link-local or reserved"):
            await fetcher.fetch(url, _anywhere)
    finally:
        await fetcher.close()


@pytest.mark.parametrize("url", ["ftp://example.com/file", "file:///etc/passwd"])
async def test_only_http_and_https_are_fetched(url: str) -> None:
    fetcher = _fetcher()
    try:
        with pytest.raises(Refused, match="only http and https"):
            await fetcher.fetch(url, _anywhere)
    finally:
        await fetcher.close()


async def test_robots_redirects_limits_and_conditional_requests(site: CrawlSite) -> None:
    fetcher = _fetcher()
    try:
        with pytest.raises(Refused, match=r"robots\.txt disallows"):
            await fetcher.fetch(site.url(PRIVATE_PAGE), _anywhere)
        with pytest.raises(Refused, match="redirect loop"):
            await fetcher.fetch(site.url("/docs/loop-a"), _anywhere)
        with pytest.raises(Refused, match="out of the crawl's scope"):
            await fetcher.fetch(site.url("/docs/away"), lambda url: "/docs/" in url)
        with pytest.raises(Refused, match="larger than 32 KB"):
            await fetcher.fetch(site.url(HUGE_PAGE), _anywhere)
        with pytest.raises(FetchFailed, match=r"within 0\.5 s"):
            await fetcher.fetch(site.url(SLOW_PAGE), _anywhere)
        moved = await fetcher.fetch(site.url("/docs/redirected"), _anywhere)
        assert moved.url == site.url("/docs/page-02")
        first = await fetcher.fetch(site.url("/docs/page-01"), _anywhere)
        assert first.status == 200
        assert first.etag
        again = await fetcher.fetch(site.url("/docs/page-01"), _anywhere, etag=first.etag)
        assert (again.status, again.body) == (304, b"")
        since = await fetcher.fetch(
            site.url("/docs/page-01"), _anywhere, last_modified=first.last_modified
        )
        assert since.status == 304
    finally:
        await fetcher.close()
