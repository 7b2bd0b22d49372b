"""The MCP server on its own (`python -m ragline.mcp`), as a real process on the local
servers, with its own database and embedded store, reached by the SDK's client."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
from pathlib import Path

import httpx
import httpx2
import mcp_types as types
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

from devstack.launcher import LocalServices, free_port, pipeline_env
from infra.mongo.client import connect
from infra.mongo.knowledge_base_repository import KnowledgeBaseRepository
from infra.settings.mongo import MongoSettings
from tests.conftest import unique

TOKEN = "standalone-admin-token"


def start_server(env: dict[str, str], port: int) -> subprocess.Popen[bytes]:
    """`python -m ragline.mcp` on `port`, once it answers (401 without a token)."""
    server = subprocess.Popen(
        [sys.executable, "-m", "ragline.mcp", "--host", "127.0.0.1", "--port", str(port)],
        env=env,
    )
    url = f"http://127.0.0.1:{port}/mcp"
    deadline = time.monotonic() + 120
    while True:
        assert server.poll() is None, "the MCP server exited"
        try:
            if httpx.post(url, json={}, timeout=2).status_code == 401:
                return server
        except httpx.TransportError:
            pass
        assert time.monotonic() < deadline, "the MCP server did not start"
        time.sleep(0.5)


async def test_the_mcp_server_runs_on_its_own(
    local_services: LocalServices, tmp_path: Path
) -> None:
    database = unique("mcp_alone")
    port = free_port()
    env = {
        **pipeline_env(local_services, tmp_path / "run", TOKEN, "secret"),
        "RAGLINE_MONGO__DATABASE": database,
        "RAGLINE_LOG_LEVEL": "WARNING",
    }
    mongo = MongoSettings(url=env["RAGLINE_MONGO__URL"], database=database)
    client = connect(mongo)
    kb = await KnowledgeBaseRepository(client[database]).create(
        "default", "Standalone", "served alone", "en", code="alone"
    )
    url = f"http://127.0.0.1:{port}/mcp"
    server = await asyncio.to_thread(start_server, env, port)
    try:
        async with (
            httpx2.AsyncClient(headers={"Authorization": f"Bearer {TOKEN}"}, timeout=60) as http,
            streamable_http_client(url, http_client=http) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            assert len((await session.list_tools()).tools) == 5
            result = await session.call_tool("list_knowledge_bases", {})
            block = result.content[0]
            assert isinstance(block, types.TextContent)
            listed = json.loads(block.text)["knowledge_bases"]
            assert [(k["id"], k["code"]) for k in listed] == [(kb.id, "alone")]
    finally:
        server.terminate()
        server.wait(timeout=30)
        await client.drop_database(database)
        await client.close()
