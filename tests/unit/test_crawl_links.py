"""Canonical URLs, links of pages and sitemaps, and the scope a crawl stays within."""

from __future__ import annotations

import pytest

from services.crawl_links import Scope, canonical, is_file, page_links, sitemap_links


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("HTTP://Example.COM:80/a#top", "http://example.com/a"),
        ("https://example.com:443", "https://example.com/"),
        (
            "https://example.com:8443/x?b=2&utm_source=news&a=1",
            "https://example.com:8443/x?b=2&a=1",
        ),
        ("http://example.com/p?fbclid=abc", "http://example.com/p"),
        ("mailto:someone@example.com", None),
        ("javascript:alert(1)", None),
        ("ftp://example.com/file", None),
        ("http:///nohost", None),
    ],
)
def test_canonical_urls(url: str, expected: str | None) -> None:
    assert canonical(url) == expected


def test_page_links_are_resolved_canonical_and_once_each() -> None:
    html = b"""<html><body>
      <a href="guide">guide</a> <a href="guide#part-2">again</a>
      <a href="/docs/guide?utm_medium=x">tracked</a>
      <a href="https://other.example/page">other host</a>
      <a href="mailto:x@example.com">mail</a> <a href="javascript:void(0)">js</a>
      <a href="/secret" rel="nofollow">nofollow</a>
    </body></html>"""
    assert page_links(html, "http://site.test/docs/index") == [
        "http://site.test/docs/guide",
        "https://other.example/page",
    ]


def test_a_base_element_changes_where_relative_links_point() -> None:
    html = b'<html><head><base href="/v2/"></head><body><a href="a">a</a></body></html>'
    assert page_links(html, "http://site.test/docs/") == ["http://site.test/v2/a"]


def test_sitemaps_and_sitemap_indexes() -> None:
    urlset = b"""<?xml version="1.0" encoding="UTF-8"?>
    <urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">
      <url><loc>http://site.test/docs/a</loc></url>
      <url><loc> http://site.test/docs/b#x </loc></url>
    </urlset>"""
    index = b"""<?xml version="1.0" encoding="UTF-8"?>
    <sitemapindex xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">
      <sitemap><loc>http://site.test/sitemap-docs.xml</loc></sitemap>
    </sitemapindex>"""
    assert sitemap_links(urlset) == (["http://site.test/docs/a", "http://site.test/docs/b"], [])
    assert sitemap_links(index) == ([], ["http://site.test/sitemap-docs.xml"])
    assert sitemap_links(b"not xml at all") == ([], [])


def test_the_scope_is_the_start_urls_host_and_directory_then_the_patterns() -> None:
    scope = Scope.of(["http://site.test/docs/", "http://site.test/help/faq"])
    assert scope("http://site.test/docs/deep/page")
    assert scope("http://site.test/help/other")
    assert not scope("http://site.test/blog/post")
    assert not scope("http://other.test/docs/page")
    assert not scope("https://site.test/docs/page")  # another scheme is another site
    narrowed = Scope.of(["http://site.test/docs/"], include=["/docs/guides/*"], exclude=["*.zip"])
    assert narrowed("http://site.test/docs/guides/a")
    assert not narrowed("http://site.test/docs/reference/a")
    assert not narrowed("http://site.test/docs/guides/all.zip")


def test_files_are_told_from_pages_by_their_path() -> None:
    assert is_file("http://site.test/docs/manual.PDF")
    assert is_file("http://site.test/files/report.docx?download=1")
    assert not is_file("http://site.test/docs/manual")
