"""A small documentation website on 127.0.0.1 for the crawler's tests, with every trap they need.

The site, served by `CrawlSite` (HTTP/1.1, one thread per connection):

- `/robots.txt` forbids `/docs/private/` and names `/sitemap.xml`, which lists most pages under
  `/docs/`: among them `/docs/page-25`, which no page links to, and the forbidden
  `/docs/private/secret`.
- `/docs/` links to two sub-indexes (`/docs/guides/` -> `/docs/guides/advanced/`,
  `/docs/reference/`) and through them to `/docs/page-01` ... `/docs/page-24`, three links deep
  at most, by relative, root-relative and absolute links, some with a `#fragment` or a
  `?utm_source=` variant of the same page. The pages share a `<nav>` and a `<footer>`; their
  `<main>` holds the sentence of `FACTS` that a search finds them by.
- Links leaving the scope: `/blog/post` (same host, outside `/docs/`), `http://example.invalid/`
  (another host), `mailto:` and `javascript:`, and `/docs/away`, which redirects to `/blog/post`.
- `/docs/redirected` redirects (301) to `/docs/page-02`; `/docs/loop-a` and `/docs/loop-b`
  redirect (302) to each other.
- `/docs/manual.pdf` is a real one-page PDF (tests/fixtures/crazyones.pdf).
- `/docs/gone` answers 404 once the test calls `remove("/docs/gone")`.
- `/docs/slow` answers after `slow_seconds`; `/docs/huge` is larger than `huge_bytes`.
- Every page, the PDF, robots.txt and the sitemap carry an ETag and a Last-Modified and answer a
  matching If-None-Match, or an If-Modified-Since not older than the page, with 304 and no body;
  `/docs/no-validators` carries neither header.

A page answers with the same content whatever its query string (as a static site does);
`Request.query` keeps the query each request came with.
"""

from __future__ import annotations

import hashlib
import threading
import time
from collections.abc import Mapping
from contextlib import ExitStack
from dataclasses import dataclass
from email.utils import formatdate, parsedate_to_datetime
from html import escape
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from types import TracebackType
from typing import Any, ClassVar
from urllib.parse import urlsplit

from tests.local_http import serving

PDF_BYTES = (Path(__file__).parent / "fixtures" / "crazyones.pdf").read_bytes()

INDEX_PAGE = "/docs/"
GUIDES_PAGE = "/docs/guides/"
ADVANCED_PAGE = "/docs/guides/advanced/"
REFERENCE_PAGE = "/docs/reference/"
ORPHAN_PAGE = "/docs/page-25"
"""Only the sitemap names it: no page links to it."""
PDF_PAGE = "/docs/manual.pdf"
GONE_PAGE = "/docs/gone"
NO_VALIDATORS_PAGE = "/docs/no-validators"
PRIVATE_PAGE = "/docs/private/secret"
SLOW_PAGE = "/docs/slow"
HUGE_PAGE = "/docs/huge"
OFF_SCOPE_PAGE = "/blog/post"
OTHER_HOST_URL = "http://example.invalid/"

REDIRECTS: dict[str, tuple[int, str]] = {
    "/docs/redirected": (301, "/docs/page-02"),
    "/docs/away": (302, OFF_SCOPE_PAGE),
    "/docs/loop-a": (302, "/docs/loop-b"),
    "/docs/loop-b": (302, "/docs/loop-a"),
}
"""Path -> (status, path its Location names)."""

SITE_DATE = 1_704_067_200
"""Last-Modified of every page as the site starts: 2024-01-01 00:00:00 GMT."""

_TOPICS = {
    1: ("pallet inspection", "PAL-01"),
    2: ("forklift battery swap", "FBS-02"),
    3: ("cold-room defrost", "CRD-03"),
    4: ("fire door audit", "FDA-04"),
    5: ("ladder certification", "LAD-05"),
    6: ("solvent disposal", "SOL-06"),
    7: ("badge revocation", "BDG-07"),
    8: ("server rack grounding", "SRG-08"),
    9: ("freight claim", "FRC-09"),
    10: ("chemical spill cleanup", "CSC-10"),
    11: ("vendor onboarding", "VON-11"),
    12: ("overtime approval", "OTA-12"),
    13: ("parking permit renewal", "PPR-13"),
    14: ("laptop decommissioning", "LDC-14"),
    15: ("visitor escort", "VES-15"),
    16: ("water heater flushing", "WHF-16"),
    17: ("roof drain clearing", "RDC-17"),
    18: ("first-aid kit restock", "FAK-18"),
    19: ("generator load test", "GLT-19"),
    20: ("conveyor belt tensioning", "CBT-20"),
    21: ("loading dock lockout", "LDL-21"),
    22: ("elevator key handover", "EKH-22"),
    23: ("boiler descaling", "BDS-23"),
    24: ("toner cartridge recycling", "TCR-24"),
    25: ("greenhouse irrigation audit", "GIA-25"),
}


def _fact(topic: str, code: str) -> str:
    return f"The {topic} procedure requires form {code}."


def _page(number: int) -> str:
    return f"/docs/page-{number:02d}"


FACTS: dict[str, str] = {
    INDEX_PAGE: _fact("documentation intake", "DOC-00"),
    GUIDES_PAGE: _fact("guide review", "GDR-30"),
    ADVANCED_PAGE: _fact("advanced guide sign-off", "AGS-31"),
    REFERENCE_PAGE: _fact("reference table update", "RTU-32"),
    **{_page(number): _fact(*topic) for number, topic in _TOPICS.items()},
    GONE_PAGE: _fact("courier booking", "CBK-90"),
    NO_VALIDATORS_PAGE: _fact("night shift handover", "NSH-91"),
    SLOW_PAGE: _fact("archive retrieval", "ARC-92"),
    HUGE_PAGE: _fact("warehouse census", "WHC-93"),
    PRIVATE_PAGE: _fact("payroll override", "PAY-94"),
    OFF_SCOPE_PAGE: _fact("company picnic planning", "PIC-95"),
    PDF_PAGE: "We make tools for these kinds of people.",
}
"""The sentence each page with content holds, found in no other page."""

ALL_DOC_PAGES = frozenset(FACTS) - {OFF_SCOPE_PAGE}
"""Every path under /docs/ that answers 200 with content (HTML pages and the PDF)."""

ALLOWED_PAGES = ALL_DOC_PAGES - {PRIVATE_PAGE, SLOW_PAGE, HUGE_PAGE}
"""What a correct crawl from /docs/ indexes, when its fetch timeout is shorter than
`slow_seconds` and its size limit smaller than `huge_bytes` (add SLOW_PAGE / HUGE_PAGE when the
crawler's limits let them through). Includes GONE_PAGE until `remove(GONE_PAGE)`, ORPHAN_PAGE
(through the sitemap), NO_VALIDATORS_PAGE and PDF_PAGE; /docs/redirected counts as
/docs/page-02; no redirect-loop page, robots-forbidden page or page outside /docs/."""

_NAV = (
    '<nav><a href="/docs/">Docs home</a> | <a href="/docs/guides/">Guides</a> | '
    '<a href="/docs/reference/">Reference</a></nav>'
)
_FOOTER = (
    "<footer><p>Ragline test documentation. Every procedure here is fictitious. "
    'Questions: <a href="mailto:docs@example.invalid">docs@example.invalid</a>.</p></footer>'
)


def _links(hrefs: Mapping[str, str]) -> str:
    items = "".join(f'<li><a href="{escape(href)}">{text}</a></li>' for href, text in hrefs.items())
    return f"<ul>{items}</ul>" if items else ""


def _html(title: str, body: str) -> str:
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>{title}</title></head>\n<body>{body}</body></html>\n"
    )


def _documentation_page(path: str, title: str, links: Mapping[str, str] | None = None) -> str:
    """A page of the site's template: nav, a main with the page's fact and links, footer."""
    main = (
        f'<main><h1 id="top">{title}</h1><p>{FACTS[path]}</p>'
        f"<p>Read this page before you start: it lists the steps of {title.lower()}, "
        "who to inform and which records to keep.</p>"
        '<h2 id="section-2">Records</h2><p>File the completed form with your team lead '
        "within five working days.</p>"
        f"{_links(links or {})}</main>"
    )
    return _html(title, f"{_NAV}\n{main}\n{_FOOTER}")


def _plain_page(path: str, title: str) -> str:
    """A page without the template: a heading and the page's fact."""
    return _html(title, f"<h1>{title}</h1><p>{FACTS[path]}</p>")


def _topic_title(number: int) -> str:
    return _TOPICS[number][0].capitalize()


def _huge_page(size: int) -> str:
    """The census page: its fact, then numbered ledger lines until it is larger than `size`."""
    head = _documentation_page(HUGE_PAGE, "Warehouse census")
    lines = [head]
    total = len(head)
    number = 0
    while total <= size:
        number += 1
        line = (
            f"<p>Census ledger line {number}: shelf {number % 97} holds {number % 13} crates.</p>\n"
        )
        lines.append(line)
        total += len(line)
    return "".join(lines)


def _site_pages(base_url: str, huge_bytes: int) -> dict[str, tuple[str, str]]:
    """Path -> (content type, text) of every page but the PDF."""
    html = "text/html; charset=utf-8"
    pages = {
        INDEX_PAGE: _documentation_page(
            INDEX_PAGE,
            "Documentation",
            {
                "guides/": "Guides",
                "/docs/reference/": "Reference",
                "page-01": "Pallet inspection",
                "page-01#section-2": "Pallet inspection records",
                f"{base_url}/docs/page-02": "Forklift battery swap",
                "page-02?utm_source=x": "Forklift battery swap (tracked)",
                "/docs/page-03": "Cold-room defrost",
                "/docs/page-03?utm_source=newsletter&utm_medium=email#section-2": "Defrost records",
                "#top": "Back to top",
                "redirected": "Moved page",
                "away": "Our blog",
                "gone": "Courier booking",
                "no-validators": "Night shift handover",
                "private/secret": "Payroll override",
                OFF_SCOPE_PAGE: "Blog post",
                OTHER_HOST_URL: "Another site",
                "mailto:docs@example.invalid": "Write to us",
                "javascript:void(0)": "Print",
            },
        ),
        GUIDES_PAGE: _documentation_page(
            GUIDES_PAGE,
            "Guides",
            {
                **{f"../page-{number:02d}": _topic_title(number) for number in range(4, 10)},
                "advanced/": "Advanced guides",
                "/docs/loop-a": "Rotating duty roster",
            },
        ),
        ADVANCED_PAGE: _documentation_page(
            ADVANCED_PAGE,
            "Advanced guides",
            {
                **{f"../../page-{number:02d}": _topic_title(number) for number in range(10, 15)},
                f"{base_url}/docs/page-12#section-2": "Overtime approval records",
            },
        ),
        REFERENCE_PAGE: _documentation_page(
            REFERENCE_PAGE,
            "Reference",
            {
                **{_page(number): _topic_title(number) for number in range(15, 24)},
                "../manual.pdf": "Manual (PDF)",
                "../slow": "Archive retrieval",
                "../huge": "Warehouse census",
            },
        ),
        **{
            _page(number): _documentation_page(_page(number), _topic_title(number))
            for number in range(1, 26)
            if number != 23
        },
        _page(23): _documentation_page(_page(23), _topic_title(23), {"page-24": "Next: toner"}),
        GONE_PAGE: _plain_page(GONE_PAGE, "Courier booking"),
        NO_VALIDATORS_PAGE: _plain_page(NO_VALIDATORS_PAGE, "Night shift handover"),
        SLOW_PAGE: _documentation_page(SLOW_PAGE, "Archive retrieval"),
        HUGE_PAGE: _huge_page(huge_bytes),
        PRIVATE_PAGE: _documentation_page(PRIVATE_PAGE, "Payroll override"),
        OFF_SCOPE_PAGE: _plain_page(OFF_SCOPE_PAGE, "Company picnic"),
    }
    listed = sorted(
        {INDEX_PAGE, PDF_PAGE, GONE_PAGE, NO_VALIDATORS_PAGE, PRIVATE_PAGE}
        | {_page(number) for number in _TOPICS}
    )
    urls = "".join(
        f"  <url><loc>{base_url}{path}</loc><lastmod>2024-01-01</lastmod></url>\n"
        for path in listed
    )
    return {
        "/robots.txt": (
            "text/plain; charset=utf-8",
            f"User-agent: *\nDisallow: /docs/private/\n\nSitemap: {base_url}/sitemap.xml\n",
        ),
        "/sitemap.xml": (
            "application/xml",
            '<?xml version="1.0" encoding="UTF-8"?>\n'
            f'<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">\n{urls}</urlset>\n',
        ),
        **{path: (html, text) for path, text in pages.items()},
    }


@dataclass(frozen=True)
class Request:
    """One request the site served: its path (without the query), header names in lower case."""

    path: str
    method: str
    headers: dict[str, str]
    status: int
    query: str = ""


@dataclass(frozen=True)
class _Resource:
    """What a path answers: its bytes and, unless it has none, its validators."""

    content_type: str
    body: bytes
    modified: int | None
    etag: str | None

    def not_modified(self, headers: Mapping[str, str]) -> bool:
        """Whether a conditional GET with `headers` gets 304 (If-None-Match wins, RFC 9110)."""
        if "if-none-match" in headers:
            tags = {tag.strip().removeprefix("W/") for tag in headers["if-none-match"].split(",")}
            return self.etag is not None and ("*" in tags or self.etag in tags)
        if "if-modified-since" in headers and self.modified is not None:
            try:
                since = parsedate_to_datetime(headers["if-modified-since"]).timestamp()
            except (TypeError, ValueError):
                return False
            return self.modified <= since
        return False


class CrawlSite:
    """The documentation site of the crawler's tests, served on a free port while in `with`.

    Leaving `with` takes up to half a second (the server's poll interval): tests that share one
    site call `reset()` to get it back as it started.
    """

    ALLOWED_PAGES: ClassVar[frozenset[str]] = ALLOWED_PAGES
    ALL_DOC_PAGES: ClassVar[frozenset[str]] = ALL_DOC_PAGES
    FACTS: ClassVar[dict[str, str]] = FACTS

    def __init__(self, *, slow_seconds: float = 3.0, huge_bytes: int = 3 * 1024 * 1024) -> None:
        self.slow_seconds = slow_seconds
        self._huge_bytes = huge_bytes
        self._base_url: str | None = None
        self._lock = threading.Lock()
        self._resources: dict[str, _Resource] = {}
        self._redirects = dict(REDIRECTS)
        self._log: list[Request] = []
        self._closing = threading.Event()
        self._stack = ExitStack()

    @property
    def base_url(self) -> str:
        """Like http://127.0.0.1:PORT, while serving."""
        if self._base_url is None:
            raise RuntimeError("the site serves only inside `with CrawlSite() as site`")
        return self._base_url

    @property
    def huge_bytes(self) -> int:
        """/docs/huge is larger than this many bytes."""
        return self._huge_bytes

    @huge_bytes.setter
    def huge_bytes(self, size: int) -> None:
        self._huge_bytes = size
        if self._base_url is not None:
            self.set_page(HUGE_PAGE, _huge_page(size))

    def __enter__(self) -> CrawlSite:
        self._closing.clear()

        class Handler(_SiteHandler):
            pass

        Handler.site = self
        self._base_url = self._stack.enter_context(serving(Handler))
        self.reset()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self._closing.set()  # wakes the requests waiting on /docs/slow
        self._stack.close()
        self._base_url = None

    def url(self, path: str) -> str:
        """The absolute URL of `path` (which starts with /)."""
        return f"{self.base_url}{path}"

    @property
    def requests(self) -> list[Request]:
        """Every request served so far, in order (a copy); logged before /docs/slow waits."""
        with self._lock:
            return list(self._log)

    def requests_for(self, path: str) -> list[Request]:
        """The requests for `path`, whatever their query string."""
        return [request for request in self.requests if request.path == path]

    def clear_log(self) -> None:
        """Forgets the requests served so far."""
        with self._lock:
            self._log.clear()

    def remove(self, path: str) -> None:
        """`path` (a page or a redirect) answers 404 from now on; links to it stay."""
        with self._lock:
            if self._resources.pop(path, None) is None and self._redirects.pop(path, None) is None:
                raise KeyError(path)

    def reset(self) -> None:
        """Back to the pages the site started with (`huge_bytes` as it is now); log emptied."""
        with self._lock:
            self._resources.clear()
            self._redirects = dict(REDIRECTS)
            self._log.clear()
        for path, (content_type, text) in _site_pages(self.base_url, self._huge_bytes).items():
            self._put(path, content_type, text.encode(), SITE_DATE)
        self._put(PDF_PAGE, "application/pdf", PDF_BYTES, SITE_DATE)

    def set_page(self, path: str, html: str) -> None:
        """Adds or changes an HTML page; its ETag and Last-Modified change with it."""
        with self._lock:
            previous = self._resources.get(path)
        after = previous.modified if previous is not None and previous.modified else 0
        self._put(path, "text/html; charset=utf-8", html.encode(), max(int(time.time()), after + 1))

    def _put(self, path: str, content_type: str, body: bytes, modified: int) -> None:
        resource = _Resource(content_type, body, None, None)
        if path != NO_VALIDATORS_PAGE:
            etag = f'"{hashlib.sha256(body).hexdigest()[:20]}"'
            resource = _Resource(content_type, body, modified, etag)
        with self._lock:
            self._redirects.pop(path, None)
            self._resources[path] = resource

    def _answer(
        self, path: str, query: str, method: str, headers: dict[str, str]
    ) -> tuple[int, dict[str, str], bytes]:
        """Status, headers and body for a request; logs it."""
        with self._lock:
            resource = self._resources.get(path)
            redirect = self._redirects.get(path)
        if redirect is not None:
            status, location = redirect
            answer = (status, {"Location": location}, b"")
        elif resource is None:
            answer = (404, {"Content-Type": "text/plain"}, b"Not found\n")
        else:
            validators = {}
            if resource.etag is not None:
                validators["ETag"] = resource.etag
            if resource.modified is not None:
                validators["Last-Modified"] = formatdate(resource.modified, usegmt=True)
            if resource.not_modified(headers):
                answer = (304, validators, b"")
            else:
                answer = (200, {"Content-Type": resource.content_type, **validators}, resource.body)
        with self._lock:
            self._log.append(Request(path, method, headers, answer[0], query))
        if path == SLOW_PAGE:
            self._closing.wait(self.slow_seconds)
        return answer


class _SiteHandler(BaseHTTPRequestHandler):
    """Answers GET and HEAD from its `CrawlSite`; logs nothing to stderr."""

    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # headers and body go out in two writes: no 40 ms stall
    timeout = 30  # an idle keep-alive connection's thread ends after this many seconds
    site: ClassVar[CrawlSite]  # set on the subclass each site serves with

    def do_GET(self) -> None:
        self._respond(send_body=True)

    def do_HEAD(self) -> None:
        self._respond(send_body=False)

    def _respond(self, *, send_body: bool) -> None:
        target = urlsplit(self.path)
        headers: dict[str, str] = {}
        for name, value in self.headers.items():
            key = name.lower()
            headers[key] = f"{headers[key]}, {value}" if key in headers else value
        status, response_headers, body = self.site._answer(
            target.path, target.query, self.command, headers
        )
        try:
            self.send_response(status)
            for name, value in response_headers.items():
                self.send_header(name, value)
            if status != HTTPStatus.NOT_MODIFIED:
                self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            if send_body:
                self.wfile.write(body)
        except (BrokenPipeError, ConnectionResetError):
            # The client gave up (its timeout on /docs/slow, its size limit on /docs/huge).
            self.close_connection = True

    def log_message(self, format: str, *args: Any) -> None:
        return
