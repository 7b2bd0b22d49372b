"""URLs of a crawl: their canonical form, the links of a page and a sitemap, and the scope a
job stays within (the start URLs' hosts and paths, then `include` and `exclude` globs)."""

from __future__ import annotations

import fnmatch
import posixpath
from collections.abc import Sequence
from dataclasses import dataclass
from urllib.parse import parse_qsl, urlencode, urljoin, urlsplit, urlunsplit

import lxml.html
from lxml import etree

from core.urls import InvalidUrl, check_http_url

# Query parameters that only track where a visitor came from: dropped from canonical URLs.
TRACKING = ("utm_", "fbclid", "gclid", "mc_cid", "mc_eid")
FILE_EXTENSIONS = (".pdf", ".docx", ".pptx", ".xlsx", ".csv", ".txt", ".md", ".epub", ".eml")


def canonical(url: str) -> str | None:
    """The URL without fragment, tracking parameters and default port, scheme and host in
    lower case (None: not an http(s) URL with a valid host, as `core.urls` checks it)."""
    try:
        check_http_url(url.strip())
    except InvalidUrl:
        return None
    parts = urlsplit(url.strip())
    scheme = parts.scheme.lower()
    host = str(parts.hostname).lower()
    if ":" in host:  # an IPv6 address keeps its brackets
        host = f"[{host}]"
    port = parts.port
    if port and not ((scheme == "http" and port == 80) or (scheme == "https" and port == 443)):
        host = f"{host}:{port}"
    query = urlencode(
        [(k, v) for k, v in parse_qsl(parts.query, keep_blank_values=True)
         if not k.lower().startswith(TRACKING)]
    )  # fmt: skip
    path = parts.path or "/"
    return urlunsplit((scheme, host, path, query, ""))


def is_file(url: str) -> bool:
    """Whether the URL names a file to extract (PDF, DOCX, …) rather than a page."""
    return urlsplit(url).path.lower().endswith(FILE_EXTENSIONS)


# libxml2's parsers: linear time, nesting capped, no entities expanded, nothing fetched.
_HTML = lxml.html.HTMLParser(remove_comments=True, remove_pis=True)
_XML = etree.XMLParser(recover=True, resolve_entities=False, no_network=True)


def page_links(html: bytes, base: str) -> list[str]:
    """The canonical http(s) links of a page, in order, once each."""
    try:
        page = lxml.html.document_fromstring(html, parser=_HTML)
    except etree.ParserError:  # an empty page
        return []
    tag = page.find(".//base[@href]")
    if tag is not None:
        base = urljoin(base, str(tag.get("href")))
    found: dict[str, None] = {}
    for anchor in page.iter("a"):
        href = anchor.get("href")
        if href is None or "nofollow" in str(anchor.get("rel", "")).lower().split():
            continue
        url = canonical(urljoin(base, str(href)))
        if url is not None:
            found[url] = None
    return list(found)


def sitemap_links(xml: bytes) -> tuple[list[str], list[str]]:
    """A sitemap's page URLs and, for a sitemap index, its sitemaps."""
    try:
        root = etree.fromstring(xml, parser=_XML)
    except etree.XMLSyntaxError:  # nothing a sitemap could be read from
        root = None
    pages: list[str] = []
    maps: list[str] = []
    for element in root.iter() if root is not None else ():
        kind = etree.QName(element).localname if isinstance(element.tag, str) else ""
        if kind not in ("url", "sitemap"):
            continue
        for loc in element:
            if isinstance(loc.tag, str) and etree.QName(loc).localname == "loc":
                url = canonical("".join(loc.itertext()))
                if url:
                    (pages if kind == "url" else maps).append(url)
    return pages, maps


@dataclass(frozen=True)
class Scope:
    """Where a crawl may go: under a start URL's host and directory, matching `include` (if
    any) and no `exclude` pattern (globs on the path, `/docs/*`)."""

    prefixes: tuple[str, ...]
    include: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()

    @classmethod
    def of(
        cls, starts: Sequence[str], include: Sequence[str] = (), exclude: Sequence[str] = ()
    ) -> Scope:
        """The scope of these start URLs: each one's origin and directory."""
        prefixes = []
        for start in starts:
            url = canonical(start)
            if url is None:
                continue
            parts = urlsplit(url)
            directory = parts.path if parts.path.endswith("/") else posixpath.dirname(parts.path)
            directory = directory.rstrip("/") + "/"
            prefixes.append(f"{parts.scheme}://{parts.netloc}{directory}")
        return cls(tuple(dict.fromkeys(prefixes)), tuple(include), tuple(exclude))

    def __call__(self, url: str) -> bool:
        """Whether `url` is within the scope."""
        if not any(url.startswith(prefix) for prefix in self.prefixes):
            return False
        path = urlsplit(url).path
        if self.include and not any(fnmatch.fnmatchcase(path, p) for p in self.include):
            return False
        return not any(fnmatch.fnmatchcase(path, p) for p in self.exclude)
