"""The crawler's test site answers as documented: robots, sitemap, validators, redirects, log."""

from __future__ import annotations

import io
import time
from collections import deque
from collections.abc import Iterator
from email.utils import formatdate
from html.parser import HTMLParser
from urllib.parse import parse_qsl, urlencode, urljoin, urlsplit
from urllib.robotparser import RobotFileParser
from xml.etree import ElementTree

import httpx
import pytest
from pypdf import PdfReader

from tests.crawl_site import (
    ALL_DOC_PAGES,
    ALLOWED_PAGES,
    FACTS,
    GONE_PAGE,
    HUGE_PAGE,
    INDEX_PAGE,
    NO_VALIDATORS_PAGE,
    OFF_SCOPE_PAGE,
    ORPHAN_PAGE,
    OTHER_HOST_URL,
    PDF_PAGE,
    PRIVATE_PAGE,
    SITE_DATE,
    SLOW_PAGE,
    CrawlSite,
)

SLOW_SECONDS = 1.5
FETCH_TIMEOUT = 0.4  # the reference crawler's: shorter than SLOW_SECONDS, the slow page times out
SIZE_LIMIT = 1024 * 1024  # smaller than the default huge_bytes


@pytest.fixture(scope="module")
def running_site() -> Iterator[CrawlSite]:
    """One site for the module (stopping a server takes half a second): tests reset it."""
    with CrawlSite(slow_seconds=SLOW_SECONDS) as site:
        yield site


@pytest.fixture
def site(running_site: CrawlSite) -> CrawlSite:
    """The module's site as it started, its log empty."""
    running_site.reset()
    return running_site


@pytest.fixture
def http(site: CrawlSite) -> Iterator[httpx.Client]:
    """A client of the site that follows no redirects."""
    with httpx.Client(base_url=site.base_url, timeout=5) as client:
        yield client


class _Links(HTMLParser):
    """The href of every <a> of a page."""

    def __init__(self) -> None:
        super().__init__()
        self.hrefs: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        href = dict(attrs).get("href")
        if tag == "a" and href is not None:
            self.hrefs.append(href)


def _hrefs(html: str) -> list[str]:
    parser = _Links()
    parser.feed(html)
    return parser.hrefs


def _canonical(url: str) -> str:
    """Without fragment and utm_* parameters."""
    parts = urlsplit(url)
    query = [(key, value) for key, value in parse_qsl(parts.query) if not key.startswith("utm_")]
    return parts._replace(query=urlencode(query), fragment="").geturl()


def _sitemap_paths(http: httpx.Client) -> list[str]:
    root = ElementTree.fromstring(http.get("/sitemap.xml").content)  # noqa: S314 - our own site
    namespace = "{http://www.sitemaps.org/schemas/sitemap/0.9}"
    return [urlsplit(loc.text or "").path for loc in root.iter(f"{namespace}loc")]


def _reference_crawl(site: CrawlSite, http: httpx.Client) -> tuple[dict[str, str], set[str]]:
    """What a correct crawler indexes from /docs/ (path -> text), and every link it saw."""
    robots = RobotFileParser()
    robots.parse(http.get("/robots.txt").text.splitlines())
    queue = deque([site.url(INDEX_PAGE), *map(site.url, _sitemap_paths(http))])
    seen: set[str] = set()
    linked: set[str] = set()
    indexed: dict[str, str] = {}
    while queue:
        url = _canonical(queue.popleft())
        in_scope = url.startswith(site.url("/docs/"))  # this host, under /docs/
        if url in seen or not in_scope or not robots.can_fetch("*", url):
            continue
        seen.add(url)
        try:
            response = http.get(url, follow_redirects=True, timeout=FETCH_TIMEOUT)
        except (httpx.TooManyRedirects, httpx.TimeoutException):
            continue
        final = str(response.url)
        if not final.startswith(site.url("/docs/")) or len(response.content) > SIZE_LIMIT:
            continue
        if response.headers["content-type"] == "application/pdf":
            indexed[response.url.path] = response.content.decode("latin-1")
            continue
        indexed[response.url.path] = response.text
        for href in _hrefs(response.text):
            target = _canonical(urljoin(final, href))
            linked.add(target)
            queue.append(target)
    return indexed, linked


def test_the_facts_are_one_distinct_sentence_per_page() -> None:
    assert len(set(FACTS.values())) == len(FACTS)
    assert ALLOWED_PAGES < ALL_DOC_PAGES < set(FACTS)
    assert set(FACTS) - ALL_DOC_PAGES == {OFF_SCOPE_PAGE}
    assert {PRIVATE_PAGE, SLOW_PAGE, HUGE_PAGE} == ALL_DOC_PAGES - ALLOWED_PAGES
    assert CrawlSite.ALLOWED_PAGES is ALLOWED_PAGES
    assert len([path for path in ALLOWED_PAGES if path.startswith("/docs/page-")]) == 25


def test_robots_forbids_the_private_pages_and_names_the_sitemap(
    site: CrawlSite, http: httpx.Client
) -> None:
    response = http.get("/robots.txt")
    assert response.status_code == 200
    lines = response.text.splitlines()
    assert lines[:2] == ["User-agent: *", "Disallow: /docs/private/"]
    assert f"Sitemap: {site.base_url}/sitemap.xml" in lines


def test_the_sitemap_lists_the_orphan_and_the_forbidden_page(http: httpx.Client) -> None:
    paths = _sitemap_paths(http)
    assert {ORPHAN_PAGE, PRIVATE_PAGE, INDEX_PAGE, PDF_PAGE} <= set(paths)
    assert all(path.startswith("/docs/") for path in paths)
    assert len(set(paths)) == len(paths) >= 25


def test_a_correct_crawl_indexes_exactly_the_allowed_pages(
    site: CrawlSite, http: httpx.Client
) -> None:
    indexed, linked = _reference_crawl(site, http)

    assert set(indexed) == ALLOWED_PAGES
    for path, text in indexed.items():
        if path != PDF_PAGE:
            assert FACTS[path] in text, path
    assert site.url(ORPHAN_PAGE) not in linked  # only the sitemap finds it
    assert {site.url(PRIVATE_PAGE), site.url(OFF_SCOPE_PAGE), OTHER_HOST_URL} <= linked
    assert {"mailto:docs@example.invalid", "javascript:void(0)"} <= linked
    assert {site.url(path) for path in ("/docs/loop-a", SLOW_PAGE, HUGE_PAGE)} <= linked
    assert site.requests_for(PRIVATE_PAGE) == []


def test_the_pdf_is_a_real_pdf_holding_its_fact(http: httpx.Client) -> None:
    response = http.get(PDF_PAGE)
    assert response.headers["content-type"] == "application/pdf"
    text = PdfReader(io.BytesIO(response.content)).pages[0].extract_text()
    assert FACTS[PDF_PAGE] in text
    assert "etag" in response.headers
    assert "last-modified" in response.headers


def test_pages_carry_the_shared_boilerplate_around_their_main(http: httpx.Client) -> None:
    for path in ("/docs/page-01", "/docs/page-17"):
        html = http.get(path).text
        assert "<nav>" in html
        assert "<footer>" in html
        main = html[html.index("<main>") : html.index("</main>")]
        assert FACTS[path] in main


@pytest.mark.parametrize("path", ["/docs/page-05", PDF_PAGE, "/robots.txt"])
def test_a_matching_etag_gets_304_without_a_body(http: httpx.Client, path: str) -> None:
    first = http.get(path)
    etag = first.headers["etag"]

    for header in (etag, f"W/{etag}", f'"other", {etag}', "*"):
        again = http.get(path, headers={"If-None-Match": header})
        assert again.status_code == 304, header
        assert again.content == b""
        assert again.headers["etag"] == etag
    assert http.get(path, headers={"If-None-Match": '"other"'}).content == first.content


def test_if_modified_since_not_older_than_the_page_gets_304(http: httpx.Client) -> None:
    path = "/docs/page-06"
    modified = http.get(path).headers["last-modified"]
    assert modified == formatdate(SITE_DATE, usegmt=True)

    def status(since: str, none_match: str | None = None) -> int:
        headers = {"If-Modified-Since": since}
        if none_match is not None:
            headers["If-None-Match"] = none_match
        return http.get(path, headers=headers).status_code

    assert status(modified) == 304
    assert status(formatdate(SITE_DATE + 86400, usegmt=True)) == 304
    assert status(formatdate(SITE_DATE - 1, usegmt=True)) == 200
    assert status("not a date") == 200
    # If-None-Match decides when both are sent (RFC 9110).
    assert status(modified, none_match='"other"') == 200


def test_the_page_without_validators_never_answers_304(http: httpx.Client) -> None:
    response = http.get(NO_VALIDATORS_PAGE)
    assert response.status_code == 200
    assert "etag" not in response.headers
    assert "last-modified" not in response.headers
    again = http.get(
        NO_VALIDATORS_PAGE,
        headers={"If-None-Match": "*", "If-Modified-Since": formatdate(usegmt=True)},
    )
    assert again.status_code == 200
    assert FACTS[NO_VALIDATORS_PAGE] in again.text


def test_a_removed_page_answers_404_and_links_to_it_stay(
    site: CrawlSite, http: httpx.Client
) -> None:
    assert http.get(GONE_PAGE).status_code == 200

    site.remove(GONE_PAGE)

    assert http.get(GONE_PAGE).status_code == 404
    assert "gone" in _hrefs(http.get(INDEX_PAGE).text)
    with pytest.raises(KeyError):
        site.remove("/docs/never-was")


def test_set_page_changes_the_etag_and_last_modified(site: CrawlSite, http: httpx.Client) -> None:
    path = "/docs/page-07"
    before = http.get(path)

    site.set_page(path, "<html><body><p>Revised procedure.</p></body></html>")

    after = http.get(path, headers={"If-None-Match": before.headers["etag"]})
    assert after.status_code == 200
    assert after.text == "<html><body><p>Revised procedure.</p></body></html>"
    assert after.headers["etag"] != before.headers["etag"]
    since = {"If-Modified-Since": before.headers["last-modified"]}
    assert http.get(path, headers=since).status_code == 200
    assert http.get(path, headers={"If-None-Match": after.headers["etag"]}).status_code == 304

    site.set_page("/docs/new", "<p>New.</p>")
    assert http.get("/docs/new").text == "<p>New.</p>"


def test_redirects_within_and_out_of_scope_and_in_a_loop(
    site: CrawlSite, http: httpx.Client
) -> None:
    moved = http.get("/docs/redirected")
    assert (moved.status_code, moved.headers["location"]) == (301, "/docs/page-02")
    assert http.get("/docs/away").headers["location"] == OFF_SCOPE_PAGE
    assert http.get(OFF_SCOPE_PAGE).status_code == 200
    assert http.get("/docs/loop-a").headers["location"] == "/docs/loop-b"
    assert http.get("/docs/loop-b").headers["location"] == "/docs/loop-a"
    with pytest.raises(httpx.TooManyRedirects):
        http.get("/docs/loop-a", follow_redirects=True)


def test_the_log_holds_every_request_in_order(site: CrawlSite, http: httpx.Client) -> None:
    etag = http.get("/docs/page-03?utm_source=x").headers["etag"]
    http.get("/docs/page-03", headers={"If-None-Match": etag})
    http.head("/docs/missing")

    assert [(r.path, r.query, r.method, r.status) for r in site.requests] == [
        ("/docs/page-03", "utm_source=x", "GET", 200),
        ("/docs/page-03", "", "GET", 304),
        ("/docs/missing", "", "HEAD", 404),
    ]
    assert site.requests[1].headers["if-none-match"] == etag
    assert [r.status for r in site.requests_for("/docs/page-03")] == [200, 304]

    site.clear_log()

    assert site.requests == []


def test_the_slow_page_answers_after_slow_seconds(site: CrawlSite, http: httpx.Client) -> None:
    with pytest.raises(httpx.ReadTimeout):
        http.get(SLOW_PAGE, timeout=FETCH_TIMEOUT)
    site.slow_seconds = 0.05
    try:
        started = time.monotonic()
        assert FACTS[SLOW_PAGE] in http.get(SLOW_PAGE).text
        assert time.monotonic() - started >= 0.05
    finally:
        site.slow_seconds = SLOW_SECONDS


def test_the_huge_page_is_larger_than_huge_bytes(site: CrawlSite, http: httpx.Client) -> None:
    assert site.huge_bytes == 3 * 1024 * 1024
    assert len(http.get(HUGE_PAGE).content) > site.huge_bytes
    site.huge_bytes = 10_000
    try:
        response = http.get(HUGE_PAGE)
        assert 10_000 < len(response.content) < 11_000
        assert FACTS[HUGE_PAGE] in response.text
    finally:
        site.huge_bytes = 3 * 1024 * 1024


def test_a_site_serves_only_inside_with() -> None:
    site = CrawlSite()
    assert site.slow_seconds == 3.0
    with pytest.raises(RuntimeError):
        site.url("/docs/")
