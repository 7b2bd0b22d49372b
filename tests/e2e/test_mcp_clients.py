"""MCP clients written outside this project against the running API's `/mcp`, configured as
docs/mcp-clients.md tells users: the official TypeScript SDK (tests/mcp_clients/sdk_client.mjs,
under node), mcp-remote as Claude Desktop runs it (driven over stdio by the Python SDK's stdio
client, as Claude Desktop drives it) and the page's Python snippet. Each lists the tools and finds
an indexed passage with a bot's token and a person's token, and is refused a bad token at once.

The npm packages are those of tests/mcp_clients/package-lock.json, installed by `make test`
(`npm ci`); nothing is fetched while the tests run, and every client talks to 127.0.0.1 only.
The module's set-up indexes one text on the shared mechanics stack (the hashed embedder, no
model): a few seconds, and about 10 s more when it is the first to start that stack."""

from __future__ import annotations

import ast
import asyncio
import json
import os
import re
import shutil
import sys
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

import httpx
import mcp_types as types
import pytest
from mcp import ClientSession, MCPError, StdioServerParameters
from mcp.client.stdio import stdio_client

from tests.conftest import RunningPipeline, unique
from tests.e2e.client import CLIENT_LIMITS, Api

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]
CLIENTS = ROOT / "tests" / "mcp_clients"
SDK_SCRIPT = CLIENTS / "sdk_client.mjs"
MCP_REMOTE = CLIENTS / "node_modules" / ".bin" / "mcp-remote"
PAGE = ROOT / "docs" / "mcp-clients.md"
# What the page's configurations name, put in place of the stack's address and a real token.
PAGE_URL = "http://127.0.0.1:8000"
PAGE_TOKEN = "rl_..."
PAGE_QUESTION = "How long do refunds take?"
# Longest a client may take to connect, list the tools and search (or to be refused): a client
# that hangs fails its test after this long rather than holding the run.
CLIENT_TIMEOUT_S = 60
TOOLS = {
    "knowledge_search",
    "retrieve_knowledge",
    "wiki_read",
    "wiki_write",
    "list_knowledge_bases",
}


@dataclass(frozen=True)
class Knowledge:
    """What the clients look for: a KB with one indexed document, and who may search it."""

    url: str
    phrase: str
    document_id: str
    bot_token: str
    person_token: str


@dataclass(frozen=True)
class Finished:
    """A client process that ran to its end."""

    returncode: int
    stdout: str
    stderr: str

    def shown(self) -> str:
        """Everything it printed, for an assertion's message."""
        return f"exit status {self.returncode}\nstdout:\n{self.stdout}\nstderr:\n{self.stderr}"


@pytest.fixture(scope="module")
async def knowledge(stack: RunningPipeline) -> AsyncIterator[Knowledge]:
    """A KB holding a text with a distinctive phrase (indexed), a bot with the KB attached, the
    bot's token and a person's token."""
    missing = "run `make tests/mcp_clients/.installed` (npm ci; Node.js 20.18 or newer)"
    assert shutil.which("node"), f"node is not on PATH: {missing}"
    assert MCP_REMOTE.exists(), f"the npm clients are not installed: {missing}"
    async with httpx.AsyncClient(base_url=stack.url, timeout=30, limits=CLIENT_LIMITS) as http:
        api = Api(http, stack, stack.admin_token)
        run = unique("clients")
        kb = await api.create_kb(f"Clients {run}")
        phrase = f"The {run} ferry leaves the east pier at seven"
        document = await api.text(
            kb["id"], {"title": "Ferry", "content": f"{phrase}, weather permitting."}
        )
        assert (await api.wait_final(kb["id"], document["id"]))["parse_status"] == "indexed"
        bot = await http.post(
            "/api/v1/bots",
            json={
                "name": f"ferry bot {run}",
                "knowledge": {"enabled": True, "kb_ids": [kb["id"]], "score_threshold": 0.0},
            },
            headers=api.auth,
        )
        assert bot.status_code == 201, bot.text
        bot_token = await issue(api, f"/api/v1/bots/{bot.json()['id']}/tokens", {"name": "agent"})
        person_token = await issue(
            api, "/api/v1/tokens", {"name": "p", "role": "user", "user_id": f"pia-{run}"}
        )
        yield Knowledge(stack.url, phrase, document["id"], bot_token, person_token)


async def issue(api: Api, path: str, body: dict[str, Any]) -> str:
    """A new token's secret (issued as the admin)."""
    response = await api.http.post(path, json=body, headers=api.auth)
    assert response.status_code == 201, response.text
    return str(response.json()["token"])


def client_env(home: Path, extra: Mapping[str, str]) -> dict[str, str]:
    """A client's whole environment: the PATH to find node, a home of its own (nothing is
    written under the real ~) and `extra`."""
    return {"PATH": os.environ["PATH"], "HOME": str(home), **extra}


async def finish(argv: list[str], env: dict[str, str], cwd: Path) -> Finished:
    """Runs a client to its end, at most `CLIENT_TIMEOUT_S` (then kills it and fails)."""
    process = await asyncio.create_subprocess_exec(
        *argv,
        env=env,
        cwd=cwd,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        stdout, stderr = await asyncio.wait_for(process.communicate(), CLIENT_TIMEOUT_S)
    except TimeoutError:
        process.kill()
        await process.communicate()
        raise AssertionError(f"{argv[:2]} did not finish in {CLIENT_TIMEOUT_S} s") from None
    assert process.returncode is not None
    return Finished(process.returncode, stdout.decode(), stderr.decode())


async def run_sdk_client(knowledge: Knowledge, token: str, home: Path) -> Finished:
    """The TypeScript SDK's script, asking for the phrase with this token."""
    return await finish(
        ["node", str(SDK_SCRIPT), f"{knowledge.url}/mcp", knowledge.phrase],
        client_env(home, {"RAGLINE_TOKEN": token}),
        CLIENTS,
    )


def page_blocks(language: str) -> list[str]:
    """The page's fenced code blocks in this language."""
    return re.findall(rf"^```{language}\n(.*?)^```$", PAGE.read_text(), re.MULTILINE | re.DOTALL)


def desktop_server() -> dict[str, Any]:
    """The `ragline` entry of the page's `claude_desktop_config.json` (the JSON block that runs
    mcp-remote)."""
    configs = [json.loads(block) for block in page_blocks("json") if "mcp-remote" in block]
    assert len(configs) == 1, configs
    return dict(configs[0]["mcpServers"]["ragline"])


def mcp_remote_as_desktop(knowledge: Knowledge, token: str, home: Path) -> StdioServerParameters:
    """mcp-remote started as Claude Desktop starts the page's configuration: its `args` and
    `env`, with the stack's address and this token in place of the page's, and `npx mcp-remote`
    replaced by the locally installed mcp-remote (so that npx never asks the registry)."""
    server = desktop_server()
    assert server["command"] == "npx"
    assert server["args"][0] == "mcp-remote"
    args = [arg.replace(PAGE_URL, knowledge.url) for arg in server["args"][1:]]
    assert f"{knowledge.url}/mcp" in args
    env = {name: value.replace(PAGE_TOKEN, token) for name, value in server["env"].items()}
    assert token in env["AUTH_HEADER"]
    return StdioServerParameters(
        command=str(MCP_REMOTE),
        args=args,
        env={**env, "HOME": str(home), "MCP_REMOTE_CONFIG_DIR": str(home / ".mcp-auth")},
        cwd=home,
    )


def found_sources(result: dict[str, Any]) -> list[str]:
    """The sources of a successful `knowledge_search` result (as a client gets it)."""
    assert not result.get("isError"), result
    structured = result["structuredContent"]
    assert json.loads(result["content"][0]["text"]) == structured
    return [hit["source"] for hit in structured["results"]]


async def test_the_typescript_sdk_lists_the_tools_and_searches_with_a_bots_and_a_persons_token(
    knowledge: Knowledge, tmp_path: Path
) -> None:
    """The official TypeScript SDK (`Client` + `StreamableHTTPClientTransport`, the bearer token
    in `requestInit.headers`): the page's code, under node. About 2 s (two node runs; the
    shared stack embeds with the hashed embedder, no model)."""
    script = SDK_SCRIPT.read_text()
    assert script[script.index("import ") :] in page_blocks("js")
    for token in (knowledge.bot_token, knowledge.person_token):
        run = await run_sdk_client(knowledge, token, tmp_path)
        assert run.returncode == 0, run.shown()
        printed = json.loads(run.stdout)
        assert set(printed["tools"]) == TOOLS
        sources = found_sources(printed["result"])
        assert knowledge.document_id in sources, run.shown()
        assert knowledge.phrase in printed["result"]["structuredContent"]["results"][0]["text"]


async def test_the_typescript_sdk_is_refused_a_bad_token_at_once(
    knowledge: Knowledge, tmp_path: Path
) -> None:
    """A bad token: the SDK's `connect` fails with the server's 401 (`invalid_token`) and the
    script says so and exits 1. About 1 s (one node run, no model)."""
    run = await run_sdk_client(knowledge, "rl_not-a-token", tmp_path)
    assert run.returncode == 1, run.shown()
    printed = json.loads(run.stdout)
    assert printed["status"] == 401, run.shown()
    assert "invalid_token" in printed["error"]


def logged(errlog: TextIO) -> str:
    """All a client wrote to this log file so far."""
    errlog.flush()
    errlog.seek(0)
    return errlog.read()


async def search_through_mcp_remote(
    params: StdioServerParameters, phrase: str, errlog: TextIO
) -> tuple[set[str], types.CallToolResult, str]:
    """Starts mcp-remote with these parameters (its stderr to `errlog`), drives it over stdio
    as Claude Desktop does (initialize, list the tools, search for `phrase`) and stops it;
    returns the tools' names, the search's result and what mcp-remote logged. A failure or a
    hang (`CLIENT_TIMEOUT_S`) fails with that log."""
    try:
        async with (
            asyncio.timeout(CLIENT_TIMEOUT_S),
            stdio_client(params, errlog) as streams,
            ClientSession(*streams) as session,
        ):
            await session.initialize()
            tools = {tool.name for tool in (await session.list_tools()).tools}
            result = await session.call_tool("knowledge_search", {"query": phrase, "top_k": 5})
    except (ExceptionGroup, TimeoutError) as failure:
        shown = f"mcp-remote failed: {failure!r}; it logged:\n{logged(errlog)}"
        raise AssertionError(shown) from failure
    return tools, result, logged(errlog)


async def test_mcp_remote_as_claude_desktop_runs_it_lists_the_tools_and_searches(
    knowledge: Knowledge, tmp_path: Path
) -> None:
    """The page's Claude Desktop configuration (`npx mcp-remote <url>/mcp --header
    "Authorization:${AUTH_HEADER}"`, the token in `env`), over stdio, with a bot's token and a
    person's: the tools, and the passage found. About 3 s (two mcp-remote runs, each stopped
    as the stdio client closes it; no model)."""
    for whose, token in (("bot", knowledge.bot_token), ("person", knowledge.person_token)):
        params = mcp_remote_as_desktop(knowledge, token, tmp_path)
        with (tmp_path / f"mcp-remote-{whose}.log").open("w+") as errlog:
            tools, result, log = await search_through_mcp_remote(params, knowledge.phrase, errlog)
        assert tools == TOOLS, log
        assert not result.is_error, result.content
        assert isinstance(result.content[0], types.TextContent)
        sources = found_sources(
            {
                "structuredContent": result.structured_content,
                "content": [{"text": result.content[0].text}],
            }
        )
        assert knowledge.document_id in sources, log
        # A token in a header needs no sign-in: mcp-remote started none.
        assert "OAuth callback server" not in log, log


async def test_mcp_remote_with_a_bad_token_fails_at_once_without_a_sign_in_page(
    knowledge: Knowledge, tmp_path: Path
) -> None:
    """A bad token in the page's Claude Desktop configuration: mcp-remote takes the 401 for an
    OAuth sign-in, Ragline offers none (no client registration), and it exits at once. What
    Claude Desktop sees: the connection closes during `initialize`; its log ends with the
    registration error the page describes, and no sign-in URL was ever offered to a browser.
    About 2 s (one mcp-remote run; no model)."""
    params = mcp_remote_as_desktop(knowledge, "rl_not-a-token", tmp_path)
    with (tmp_path / "mcp-remote.log").open("w+") as errlog:
        with pytest.raises(ExceptionGroup) as refused:
            async with (
                asyncio.timeout(CLIENT_TIMEOUT_S),
                stdio_client(params, errlog) as streams,
                ClientSession(*streams) as session,
            ):
                await session.initialize()
        log = logged(errlog)
    assert refused.group_contains(MCPError, match="Connection closed"), log
    assert "Dynamic Client Registration rejected (HTTP 404)" in log, log
    assert "Fatal error" in log, log
    assert "Please authorize this client" not in log, log
    # Run on its own, the same configuration exits with status 1, by itself.
    assert params.env is not None
    alone = await finish([params.command, *params.args], client_env(tmp_path, params.env), tmp_path)
    assert alone.returncode == 1, alone.shown()
    assert alone.stdout == "", alone.shown()
    assert "Dynamic Client Registration rejected (HTTP 404)" in alone.stderr


async def test_the_pages_python_snippet_lists_the_tools_and_searches(
    knowledge: Knowledge, tmp_path: Path
) -> None:
    """The page's Python SDK snippet, run as it is with the stack's address and the phrase as
    its question: with a bot's token it prints the tools and the passage; with a bad token it
    fails in `initialize`. About 3 s (two Python processes importing the SDK; no model)."""
    snippets = [block for block in page_blocks("python") if "streamable_http_client" in block]
    assert len(snippets) == 1, snippets
    snippet = snippets[0]
    assert snippet.count(PAGE_URL) == 1
    assert snippet.count(PAGE_QUESTION) == 1
    script = tmp_path / "agent.py"
    script.write_text(
        snippet.replace(PAGE_URL, knowledge.url).replace(PAGE_QUESTION, knowledge.phrase)
    )
    run = await finish(
        [sys.executable, str(script)],
        client_env(tmp_path, {"RAGLINE_TOKEN": knowledge.bot_token}),
        tmp_path,
    )
    assert run.returncode == 0, run.shown()
    tools_line, found_line = run.stdout.splitlines()
    assert set(ast.literal_eval(tools_line)) == TOOLS
    assert knowledge.document_id in found_line, run.shown()
    assert knowledge.phrase in found_line
    refused = await finish(
        [sys.executable, str(script)],
        client_env(tmp_path, {"RAGLINE_TOKEN": "rl_not-a-token"}),
        tmp_path,
    )
    # The SDK does not name the 401: the request failed, and nothing was listed.
    assert refused.returncode == 1, refused.shown()
    assert refused.stdout == "", refused.shown()
    assert "MCPError: Server returned an error response" in refused.stderr, refused.shown()
