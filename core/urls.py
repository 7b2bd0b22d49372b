"""Whether a string is an http(s) URL a crawler can fetch, and if not, what is wrong with it.

Checked before a URL is stored or fetched: text that is not text (lone surrogates), control
and format characters (NUL, right-to-left marks), an unreadable port or IPv6 literal, and a
host that is no hostname (empty or over-long labels, a name IDNA cannot encode). Every
message quotes the URL escaped and shortened, so it can be sent back to whoever sent it.
"""

from __future__ import annotations

import ipaddress
import re
import unicodedata
from urllib.parse import urlsplit

import idna

# What a host's labels may hold once in ASCII: letters, digits, hyphens, underscores (seen in
# the wild in internal names), at most 63 characters each, 253 in all.
_ASCII_LABEL = re.compile(r"^[a-z0-9_](?:[a-z0-9_-]{0,61}[a-z0-9_])?$")
_QUOTED_CHARS = 80


class InvalidUrl(ValueError):
    """A string that is not an http(s) URL; the message says why."""


def quoted(text: str, limit: int = _QUOTED_CHARS) -> str:
    """`text` as a printable, escaped quotation of at most about `limit` characters."""
    shown = text if len(text) <= limit else f"{text[:limit]}..."
    return ascii(shown)


def is_text(value: str) -> bool:
    """Whether `value` is text UTF-8 can encode (no lone surrogates)."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def check_http_url(url: str) -> str:
    """`url` unchanged when it is an http(s) URL with a valid host; `InvalidUrl` otherwise."""
    if not is_text(url):
        raise InvalidUrl(f"{quoted(url)} holds characters that are not text")
    bad = next((c for c in url if unicodedata.category(c) in ("Cc", "Cf", "Zl", "Zp")), None)
    if bad is not None:
        raise InvalidUrl(f"{quoted(url)} holds the control character U+{ord(bad):04X}")
    if any(c.isspace() for c in url):
        raise InvalidUrl(f"{quoted(url)} holds white space")
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        raise InvalidUrl(f"{quoted(url)} is not a URL: {exc}") from None
    if parts.scheme.lower() not in ("http", "https"):
        raise InvalidUrl(f"{quoted(url)} is not an http(s) URL")
    if not parts.hostname:
        raise InvalidUrl(f"{quoted(url)} names no host")
    if port == 0:
        raise InvalidUrl(f"{quoted(url)} names port 0")
    problem = host_problem(parts.hostname)
    if problem:
        raise InvalidUrl(f"{quoted(url)}: the host {problem}")
    return url


def host_problem(host: str) -> str | None:
    """What makes `host` (lower case, as `urlsplit` gives it) no hostname, or None."""
    try:
        ipaddress.ip_address(host)
        return None
    except ValueError:
        pass
    name = host[:-1] if host.endswith(".") else host
    if not name.isascii():
        try:
            name = idna.encode(name, uts46=True).decode("ascii")
        except idna.IDNAError as exc:
            return f"is not a valid international domain name ({exc})"
    if len(name) > 253:
        return "is longer than 253 characters"
    for label in name.split("."):
        if not _ASCII_LABEL.match(label):
            return f"has an invalid label {quoted(label, 63)}"
    return None
