"""A client's idle connection stays usable: the API keeps a connection open longer than the
idle timeouts of common clients and proxies (`api.keep_alive_s`), so a request sent on a pooled
connection is never lost to the server closing it at that moment.

Cost: one connection held idle for six seconds (no CPU), on the session's mechanics stack.
"""

from __future__ import annotations

import asyncio
from urllib.parse import urlsplit

import pytest

from tests.conftest import RunningPipeline

pytestmark = pytest.mark.e2e

# Past uvicorn's default keep-alive (5 s) and httpx's default pool expiry (5 s): the idle time
# at which a server on defaults closes the connection a client is about to reuse.
IDLE_S = 6.0


async def _get(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, host: str) -> bytes:
    writer.write(f"GET /healthz HTTP/1.1\r\nHost: {host}\r\n\r\n".encode())
    await writer.drain()
    head = await reader.readuntil(b"\r\n\r\n")
    length = next(
        int(line.split(b":", 1)[1])
        for line in head.split(b"\r\n")
        if line.lower().startswith(b"content-length:")
    )
    await reader.readexactly(length)
    return head.split(b"\r\n", 1)[0]


async def test_a_connection_idle_past_common_client_timeouts_still_answers(
    stack: RunningPipeline,
) -> None:
    address = urlsplit(stack.url)
    assert address.hostname
    assert address.port
    reader, writer = await asyncio.open_connection(address.hostname, address.port)
    try:
        host = f"{address.hostname}:{address.port}"
        assert await _get(reader, writer, host) == b"HTTP/1.1 200 OK"
        # The subject of the test is the idle time itself: nothing else is awaited here.
        await asyncio.sleep(IDLE_S)
        assert not reader.at_eof(), "the server closed an idle connection within 6 s"
        assert await _get(reader, writer, host) == b"HTTP/1.1 200 OK"
    finally:
        writer.close()
        await writer.wait_closed()
