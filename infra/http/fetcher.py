"""Fetching one URL of a crawl safely and politely: http(s) only, no private addresses
(unless allowed), robots.txt obeyed, a delay between requests to one host, redirects followed
by hand and each hop checked again (scheme, address and scope), a size and a time limit, and
conditional requests with the page's validators."""

from __future__ import annotations

import asyncio
import ipaddress
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass
from urllib.parse import urljoin, urlsplit

import httpx
from protego import Protego

from infra.settings.crawl import CrawlSettings


class Refused(Exception):
    """The URL may not be fetched (scheme, address, robots.txt, scope): not retried."""


class FetchFailed(Exception):
    """The fetch failed for now (timeout, connection, 5xx): the page's old version is kept."""


@dataclass(frozen=True)
class Fetched:
    """A response: its final URL, status, headers that matter, and body (empty for 304)."""

    url: str
    status: int
    content_type: str
    etag: str | None
    last_modified: str | None
    body: bytes


class Fetcher:
    """One worker's HTTP client for crawling."""

    def __init__(self, settings: CrawlSettings) -> None:
        self._settings = settings
        self._client = httpx.AsyncClient(
            timeout=settings.fetch_timeout_s,
            follow_redirects=False,
            headers={"User-Agent": settings.user_agent},
        )
        self._robots: dict[str, tuple[float, Protego | None]] = {}
        self._host_locks: dict[str, asyncio.Lock] = {}
        self._last_request: dict[str, float] = {}

    async def close(self) -> None:
        """Closes the connections."""
        await self._client.aclose()

    async def fetch(
        self,
        url: str,
        in_scope: Callable[[str], bool],
        etag: str | None = None,
        last_modified: str | None = None,
    ) -> Fetched:
        """GETs `url` (conditionally, with validators), following redirects that stay in
        scope; raises `Refused` or `FetchFailed`."""
        seen: list[str] = []
        current = url
        headers = {}
        if etag:
            headers["If-None-Match"] = etag
        if last_modified:
            headers["If-Modified-Since"] = last_modified
        for _ in range(self._settings.max_redirects + 1):
            await self._check(current)
            if not await self.allowed(current):
                raise Refused("robots.txt disallows it")
            seen.append(current)
            response = await self._get(current, headers)
            if response.status in (301, 302, 303, 307, 308):
                target = urljoin(current, response.location or "")
                if target in seen:
                    raise Refused(f"redirect loop ({' -> '.join([*seen, target])})")
                if not in_scope(target):
                    raise Refused(f"redirects out of the crawl's scope, to {target}")
                current = target
                continue
            return Fetched(
                current,
                response.status,
                response.content_type,
                response.etag,
                response.last_modified,
                response.body,
            )
        raise Refused(f"more than {self._settings.max_redirects} redirects")

    async def robots(self, origin: str) -> Protego | None:
        """The site's robots.txt rules (None: there are none), cached for 10 minutes."""
        cached = self._robots.get(origin)
        if cached is not None and time.monotonic() - cached[0] < 600:
            return cached[1]
        rules: Protego | None = None
        try:
            await self._check(origin)
            response = await self._get(f"{origin}/robots.txt", {})
            if response.status == 200:
                rules = Protego.parse(response.body.decode("utf-8", "replace"))
        except (FetchFailed, Refused):
            rules = None
        self._robots[origin] = (time.monotonic(), rules)
        return rules

    async def allowed(self, url: str) -> bool:
        """Whether robots.txt lets this crawler fetch `url`."""
        parts = urlsplit(url)
        rules = await self.robots(f"{parts.scheme}://{parts.netloc}")
        return rules is None or bool(rules.can_fetch(url, self._settings.user_agent))

    async def _check(self, url: str) -> None:
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https"):
            raise Refused(f"only http and https URLs are crawled, not {parts.scheme or 'none'}")
        host = parts.hostname
        if not host:
            raise Refused("the URL has no host")
        if self._settings.allow_private_networks:
            return
        try:
            infos = await asyncio.to_thread(socket.getaddrinfo, host, parts.port or 80)
        except OSError as exc:
            raise FetchFailed(f"{host} does not resolve: {exc}") from exc
        for info in infos:
            address = ipaddress.ip_address(info[4][0])
            if not address.is_global:
                raise Refused(
                    f"{host} resolves to a private, loopback, link-local or reserved address "
                    f"({address}); set crawl.allow_private_networks to crawl it"
                )

    async def _get(self, url: str, headers: dict[str, str]) -> _Response:
        host = urlsplit(url).netloc
        lock = self._host_locks.setdefault(host, asyncio.Lock())
        async with lock:
            wait = self._last_request.get(host, 0.0) + self._settings.per_host_delay_s
            delay = wait - time.monotonic()
            if delay > 0:
                await asyncio.sleep(delay)
            try:
                return await self._download(url, headers)
            finally:
                self._last_request[host] = time.monotonic()

    async def _download(self, url: str, headers: dict[str, str]) -> _Response:
        limit = self._settings.max_page_bytes
        try:
            async with asyncio.timeout(self._settings.fetch_timeout_s):
                async with self._client.stream("GET", url, headers=headers) as response:
                    if response.status_code >= 500 or response.status_code == 429:
                        raise FetchFailed(f"the server answered {response.status_code}")
                    body = bytearray()
                    async for part in response.aiter_bytes():
                        body.extend(part)
                        if len(body) > limit:
                            raise Refused(f"larger than {limit // 1024} KB")
                    return _Response(
                        response.status_code,
                        response.headers.get("content-type", "").split(";")[0].strip().lower(),
                        response.headers.get("etag"),
                        response.headers.get("last-modified"),
                        response.headers.get("location"),
                        bytes(body),
                    )
        except TimeoutError as exc:
            raise FetchFailed(
                f"no complete answer within {self._settings.fetch_timeout_s:g} s"
            ) from exc
        except httpx.HTTPError as exc:
            raise FetchFailed(f"{type(exc).__name__}: {exc}") from exc


@dataclass(frozen=True)
class _Response:
    status: int
    content_type: str
    etag: str | None
    last_modified: str | None
    location: str | None
    body: bytes
