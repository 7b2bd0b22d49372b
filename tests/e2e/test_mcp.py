"""The MCP server with the official SDK's client over streamable HTTP against the running API:
bearer auth (users, admins, bots), every tool, permission scoping, and tool errors."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
import httpx2
import jsonschema
import mcp_types as types
import pytest
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

from tests.conftest import unique
from tests.e2e.client import Api

pytestmark = pytest.mark.e2e


@asynccontextmanager
async def mcp_session(api: Api, token: str | None) -> AsyncIterator[ClientSession]:
    """An initialised SDK session on the API's `/mcp`, bearing `token`."""
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=60) as http,
        streamable_http_client(f"{api.running.url}/mcp", http_client=http) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        yield session


def answer(result: types.CallToolResult) -> dict[str, Any]:
    """A successful tool call's JSON answer."""
    assert not result.is_error, result.content
    block = result.content[0]
    assert isinstance(block, types.TextContent)
    data = json.loads(block.text)
    assert data == result.structured_content
    return dict(data)


def error_text(result: types.CallToolResult) -> str:
    """A failed tool call's message."""
    assert result.is_error
    block = result.content[0]
    assert isinstance(block, types.TextContent)
    return block.text


async def issue(api: Api, path: str, body: dict[str, Any]) -> str:
    response = await api.http.post(path, json=body, headers=api.auth)
    assert response.status_code == 201, response.text
    return str(response.json()["token"])


async def test_mcp_tools_answer_each_caller_as_it_may(api: Api) -> None:
    run = unique("mcp")
    code = run.replace("_", "-")
    kb = (
        await api.http.post(
            "/api/v1/knowledge-bases",
            json={"name": "Ops manual", "code": code, "description": "How ops runs"},
            headers=api.auth,
        )
    ).json()
    other = await api.create_kb(f"Other {run}")
    phrase = f"The {run} generator is refuelled every Tuesday"
    shared = await api.text(
        kb["id"],
        {"title": "Generator", "content": f"{phrase} at the north depot, after the pump check."},
    )
    elsewhere = await api.text(
        other["id"],
        {
            "title": "Elsewhere",
            "content": f"Spare filters for the {run} generator wait in the south warehouse.",
        },
    )
    for document, kb_id in ((shared, kb["id"]), (elsewhere, other["id"])):
        assert (await api.wait_final(kb_id, document["id"]))["parse_status"] == "indexed"

    bot = await api.http.post(
        "/api/v1/bots",
        json={
            "name": f"ops bot {run}",
            "knowledge": {
                "enabled": True,
                "kb_ids": [kb["id"]],
                "score_threshold": 0.0,
                "trigger_instructions": "Use it for questions about the generator.",
            },
        },
        headers=api.auth,
    )
    assert bot.status_code == 201, bot.text
    bot_id = bot.json()["id"]
    bot_token = await issue(api, f"/api/v1/bots/{bot_id}/tokens", {"name": "agent"})
    user_token = await issue(
        api, "/api/v1/tokens", {"name": "u", "role": "user", "user_id": f"mia-{run}"}
    )
    # Another person's private note on the same subject, and another bot over the other KB.
    ned_token = await issue(
        api, "/api/v1/tokens", {"name": "n", "role": "user", "user_id": f"ned-{run}"}
    )
    private = await api.http.post(
        f"/api/v1/knowledge-bases/{kb['id']}/documents/text",
        json={"title": "Ned's notes", "content": f"{phrase}, Ned noted privately."},
        headers={"Authorization": f"Bearer {ned_token}"},
    )
    assert private.status_code == 202, private.text
    assert (await api.wait_final(kb["id"], private.json()["id"]))["parse_status"] == "indexed"
    other_bot = await api.http.post(
        "/api/v1/bots",
        json={"name": f"other {run}", "knowledge": {"enabled": True, "kb_ids": [other["id"]]}},
        headers=api.auth,
    )
    assert other_bot.status_code == 201, other_bot.text

    async with mcp_session(api, bot_token) as session:
        tools = {tool.name: tool for tool in (await session.list_tools()).tools}
        assert set(tools) == {
            "knowledge_search",
            "retrieve_knowledge",
            "wiki_read",
            "wiki_write",
            "list_knowledge_bases",
        }
        description = tools["knowledge_search"].description or ""
        assert "Use it for questions about the generator." in description
        assert f"{code}: Ops manual (How ops runs)" in description
        listed = answer(await session.call_tool("list_knowledge_bases", {}))
        assert [k["code"] for k in listed["knowledge_bases"]] == [code]
        # The bot's token reaches its own KB only, even when it names another.
        found = answer(await session.call_tool("knowledge_search", {"query": phrase, "top_k": 10}))
        # Its own KB only (not the other bot's), and nobody's private notes.
        assert [r["source"] for r in found["results"]] == [shared["id"]]
        assert found["results"][0]["also_in"] == []
        hit = found["results"][0]
        assert hit["citation"].startswith("Generator")
        assert hit["indexed_at"]
        named = answer(
            await session.call_tool("knowledge_search", {"query": phrase, "kb_ids": [other["id"]]})
        )
        assert named["results"] == []
        retrieved = answer(
            await session.call_tool(
                "retrieve_knowledge", {"query": phrase, "knowledge_base_code": code}
            )
        )
        assert retrieved["documents"][0]["title"] == "Generator"
        assert set(retrieved["documents"][0]) == {"title", "source_url", "text"}
        # Bad arguments and refused calls are tool errors; the session carries on.
        assert "query" in error_text(await session.call_tool("knowledge_search", {}))
        assert "unknown tool" in error_text(await session.call_tool("nope", {}))
        refused = await session.call_tool(
            "wiki_write", {"topic": "t", "title": "T", "content": "# T"}
        )
        assert "user's token" in error_text(refused)
        assert answer(await session.call_tool("list_knowledge_bases", {}))

    async with mcp_session(api, user_token) as session:
        # A user reads the tenant's shared items in every KB, writes a private page.
        found = answer(await session.call_tool("knowledge_search", {"query": phrase, "top_k": 10}))
        assert {shared["id"], elsewhere["id"]} <= {r["source"] for r in found["results"]}
        topic = code[:40]
        written = answer(
            await session.call_tool(
                "wiki_write",
                {"topic": topic, "title": "Notes", "content": "# Notes\n\nMine.", "kb_id": code},
            )
        )
        assert written["version"] == 1
        page = answer(await session.call_tool("wiki_read", {"topic": topic}))
        assert page["content"] == "# Notes\n\nMine."

    async with mcp_session(api, bot_token) as session:
        # The page is private to its writer: the bot reads only what the tenant may.
        assert "not found" in error_text(await session.call_tool("wiki_read", {"topic": topic}))

    # Over REST a bot's token searches as the bot (its own KB, nobody's private notes) and
    # does nothing else; revoked, it is refused.
    as_bot = {"Authorization": f"Bearer {bot_token}"}
    searched = await api.http.post(
        "/api/v1/knowledge/search", json={"query": phrase, "top_k": 10}, headers=as_bot
    )
    assert searched.status_code == 200, searched.text
    assert [r["source"] for r in searched.json()["results"]] == [shared["id"]]
    elsewhere_only = await api.http.post(
        "/api/v1/knowledge/search", json={"query": phrase, "kb_ids": [other["id"]]}, headers=as_bot
    )
    assert elsewhere_only.json()["results"] == []
    too_many = await api.http.post(
        "/api/v1/knowledge/search", json={"query": phrase, "top_k": 11}, headers=as_bot
    )
    assert too_many.status_code == 422
    assert "top_k" in too_many.json()["detail"]
    rest = await api.http.get("/api/v1/knowledge-bases", headers=as_bot)
    assert rest.status_code == 403
    tokens = (await api.http.get(f"/api/v1/bots/{bot_id}/tokens", headers=api.auth)).json()
    revoked = await api.http.delete(
        f"/api/v1/bots/{bot_id}/tokens/{tokens['items'][0]['id']}", headers=api.auth
    )
    assert revoked.status_code == 204
    assert (await raw_mcp_status(api, bot_token)) == 401


async def raw_mcp_status(api: Api, token: str | None) -> int:
    """The status of an `initialize` POST to `/mcp` with this bearer token (or none)."""
    headers = {"Accept": "application/json, text/event-stream"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "test", "version": "0"},
        },
    }
    async with httpx.AsyncClient(base_url=api.running.url) as http:
        response = await http.post("/mcp", json=body, headers=headers)
    return response.status_code


async def test_mcp_refuses_requests_without_a_valid_token(api: Api) -> None:
    assert await raw_mcp_status(api, None) == 401
    assert await raw_mcp_status(api, "not-a-token") == 401
    assert await raw_mcp_status(api, api.token) == 200


OPENAI_TOOL = {
    "type": "object",
    "required": ["type", "function"],
    "properties": {
        "type": {"const": "function"},
        "function": {
            "type": "object",
            "required": ["name", "description", "parameters"],
            "properties": {
                "name": {"type": "string", "pattern": "^[a-zA-Z0-9_-]{1,64}$"},
                "description": {"type": "string", "minLength": 1},
                "parameters": {"type": "object", "required": ["type", "properties"]},
            },
        },
    },
}
GEMINI_DECLARATION = {
    "type": "object",
    "required": ["name", "description", "parameters"],
    "properties": {
        "name": {"type": "string"},
        "parameters": {
            "type": "object",
            "properties": {"type": {"const": "object"}},
            # Gemini's OpenAPI subset: no JSON Schema unions, titles or defaults.
            "not": {
                "anyOf": [{"required": ["anyOf"]}, {"required": ["title"]}, {"required": ["$defs"]}]
            },
        },
    },
}


async def test_a_bots_tools_come_as_valid_function_definitions(api: Api) -> None:
    run = unique("tools")
    code = run.replace("_", "-")
    kb = await api.http.post(
        "/api/v1/knowledge-bases", json={"name": "Tools KB", "code": code}, headers=api.auth
    )
    assert kb.status_code == 201, kb.text
    bot = await api.http.post(
        "/api/v1/bots",
        json={
            "name": run,
            "knowledge": {
                "enabled": True,
                "kb_ids": [kb.json()["id"]],
                "trigger_instructions": "Call it for warranty questions.",
            },
        },
        headers=api.auth,
    )
    response = await api.http.get(f"/api/v1/bots/{bot.json()['id']}/tools", headers=api.auth)
    assert response.status_code == 200, response.text
    tools = response.json()
    by_name = {}
    for tool in tools["openai"]:
        jsonschema.validate(tool, OPENAI_TOOL)
        jsonschema.Draft202012Validator.check_schema(tool["function"]["parameters"])
        by_name[tool["function"]["name"]] = tool["function"]
    assert set(by_name) == {
        "knowledge_search",
        "retrieve_knowledge",
        "wiki_read",
        "wiki_write",
        "list_knowledge_bases",
    }
    assert "Call it for warranty questions." in by_name["knowledge_search"]["description"]
    search = jsonschema.Draft202012Validator(by_name["knowledge_search"]["parameters"])
    assert search.is_valid({"query": "warranty", "top_k": 3})
    assert not search.is_valid({"top_k": 3})
    assert not search.is_valid({"query": "warranty", "top_k": 99})
    assert not search.is_valid({"query": "warranty", "surprise": 1})
    retrieve = by_name["retrieve_knowledge"]["parameters"]
    assert set(retrieve["properties"]) == {"query", "knowledge_base_code", "skip_evaluation"}
    assert retrieve["required"] == ["query"]
    declarations = tools["gemini"]["functionDeclarations"]
    assert [d["name"] for d in declarations] == [t["function"]["name"] for t in tools["openai"]]
    for declaration in declarations:
        jsonschema.validate(declaration, GEMINI_DECLARATION)
    kb_ids = declarations[0]["parameters"]["properties"]["kb_ids"]
    assert (kb_ids["type"], kb_ids["nullable"]) == ("array", True)
    assert f"knowledge_base_code: {code}" in tools["system_instructions"]
    other_tenant = await api.http.get("/api/v1/bots/bot_nope/tools", headers=api.auth)
    assert other_tenant.status_code == 404


async def test_a_single_json_rpc_post_calls_a_tool(api: Api) -> None:
    """Stateless: one POST carries a tool call, no session set-up (what lean clients and the
    search benchmark do)."""
    body = {
        "jsonrpc": "2.0",
        "id": 7,
        "method": "tools/call",
        "params": {"name": "list_knowledge_bases", "arguments": {}},
    }
    headers = {
        "Accept": "application/json, text/event-stream",
        "Authorization": f"Bearer {api.token}",
        "MCP-Protocol-Version": "2025-06-18",
    }
    async with httpx.AsyncClient(base_url=api.running.url) as http:
        response = await http.post("/mcp", json=body, headers=headers)
    assert response.status_code == 200, response.text
    result = response.json()["result"]
    assert result["isError"] is False
    assert "knowledge_bases" in result["structuredContent"]
