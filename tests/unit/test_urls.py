"""Which strings are http(s) URLs a crawl may store and fetch, and how a JSON body with text
that is not text is found."""

from __future__ import annotations

import json
import re

import pytest

from api.text_bodies import lone_surrogate_field
from core.urls import InvalidUrl, check_http_url
from services.crawl_links import canonical


@pytest.mark.parametrize(
    "url",
    [
        "https://docs.python.org/3/",
        "http://127.0.0.1:8080/x",
        "http://[::1]:8080/a",
        "http://my_host.internal/x",
        "https://b\u00fccher.example/",
        "https://example.com./trailing-dot",
    ],
)
def test_urls_a_crawl_can_fetch_pass(url: str) -> None:
    assert check_http_url(url) == url
    assert canonical(url) is not None


@pytest.mark.parametrize(
    ("url", "says"),
    [
        (json.loads(r'"https://\udacf\udee0"'), "not a valid international domain name"),
        ("https://\udacf", "not text"),
        (json.loads(r'"http://0td:\ud87c\udee7"'), "Port could not be cast"),
        ("http://a:99999/", "Port out of range"),
        ("http://a:0/", "port 0"),
        ("http://[::1/", "Invalid IPv6 URL"),
        ("http://exa\x00mple.com/", "U+0000"),
        ("http://\u202eevil.com/", "U+202E"),
        ("http://exa mple.com/", "white space"),
        ("https://a..b/", "invalid label ''"),
        ("https://xn--/", "invalid label 'xn--'"),
        (f"https://{'a' * 64}.example/", "invalid label"),
        (f"https://{'a.' * 130}example/", "longer than 253"),
        ("ftp://example.com/", "not an http(s) URL"),
        ("https:///path-only", "names no host"),
    ],
)
def test_what_is_wrong_with_a_url_is_named(url: str, says: str) -> None:
    with pytest.raises(InvalidUrl, match=re.escape(says)) as refused:
        check_http_url(url)
    # The message can be sent back as it is: it encodes, and quotes the URL escaped.
    str(refused.value).encode("utf-8")
    assert canonical(url) is None


def test_an_ipv6_host_keeps_its_brackets() -> None:
    assert canonical("http://[::1]:80/a#top") == "http://[::1]/a"


def test_a_long_url_is_quoted_shortened() -> None:
    with pytest.raises(InvalidUrl) as refused:
        check_http_url("http://exa\x07mple.com/" + "x" * 10_000)
    assert len(str(refused.value)) < 200


@pytest.mark.parametrize(
    ("body", "found"),
    [
        (rb'{"name": "ok", "urls": ["https://\udacf"]}', ("urls.0", r"'https://\udacf'")),
        (rb'{"a": [1, {"\udc00": 2}]}', ("a.1", r"'\udc00'")),
        (rb'"\ud800"', ("body", r"'\ud800'")),
        (rb'{"pair": "\ud83d\ude00", "escaped": "\\ud800"}', None),
        (rb'{"broken": ', None),
        (b'{"plain": "text"}', None),
    ],
)
def test_a_json_body_with_a_lone_surrogate_is_found(
    body: bytes, found: tuple[str, str] | None
) -> None:
    assert lone_surrogate_field(body) == found
