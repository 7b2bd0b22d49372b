"""The MCP server (the official `mcp` SDK's low-level server over streamable HTTP at `/mcp`).

Every request carries `Authorization: Bearer <token>`: a user's or admin's token (what their
permissions allow) or a bot's (`POST /api/v1/bots/{bot_id}/tokens`: the bot's KBs and
settings). The SDK's bearer middleware asks `RaglineTokens` and answers 401 itself for no or a
bad token. The token is resolved before the SDK sees the request (`TokenGate`), so that a
database that does not answer gives a 503 with `Retry-After`, as the rest of the API does,
rather than the 500 an error inside the SDK's middleware would. The server is stateless (each
request stands alone, authorised on its own), answers JSON, and turns every refused or failed
call into a tool error with its message: the session never breaks. The tools themselves are
`services.agent_tool_service`.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from contextvars import ContextVar
from typing import Any

import mcp_types as types
from mcp.server.auth.middleware.auth_context import get_access_token
from mcp.server.auth.provider import AccessToken
from mcp.server.auth.settings import AuthSettings
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import Server
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecuritySettings
from pydantic import BaseModel, ValidationError
from starlette.applications import Starlette
from starlette.types import ASGIApp, Receive, Scope, Send

from api.deadline import unavailable_answer
from api.state import Services
from core.errors import RaglineError, ServiceUnavailable
from schemas.domain import Principal
from services.agent_tool_service import TOOLS, Agent, AgentToolService, Session, ToolSpec

log = logging.getLogger(__name__)


# The services of the running app (None while it starts or stops).
ServicesNow = Callable[[], Services | None]
# The request's bearer token and who it stands for, as `TokenGate` resolved it.
_RESOLVED: ContextVar[tuple[str, Principal | None] | None] = ContextVar(
    "ragline_mcp_resolved", default=None
)


class RaglineTokens:
    """The SDK's token verifier over Ragline's API tokens."""

    def __init__(self, services: ServicesNow) -> None:
        self._services = services

    async def resolve(self, token: str) -> Principal | None:
        """Who the token stands for (None: nobody, or the API still starting), kept for the
        SDK's `verify_token` within the same request; `ServiceUnavailable` if the database
        does not answer."""
        services = self._services()
        principal = None if services is None else await services.token_service.resolve(token)
        _RESOLVED.set((token, principal))
        return principal

    async def verify_token(self, token: str) -> AccessToken | None:
        """The token's principal as the SDK carries it, or None (the SDK answers 401)."""
        resolved = _RESOLVED.get()
        principal = resolved[1] if resolved and resolved[0] == token else await self.resolve(token)
        if principal is None:
            return None
        return AccessToken(
            token=token,
            client_id=principal.token_id,
            scopes=[],
            subject=principal.user_id or principal.bot_id,
            claims={"principal": principal.model_dump(mode="json")},
        )


class TokenGate:
    """ASGI: resolves a request's bearer token before the MCP app runs, answering 503 with
    `Retry-After` when the database does not answer (an error inside the SDK's authentication
    middleware would be a 500)."""

    def __init__(self, app: ASGIApp, tokens: RaglineTokens) -> None:
        self._app = app
        self._tokens = tokens

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        token = _bearer(scope) if scope["type"] == "http" else None
        if token is not None:
            try:
                await self._tokens.resolve(token)
            except ServiceUnavailable as exc:
                log.warning("MCP request refused: %s", exc)
                await unavailable_answer(str(exc))(scope, receive, send)
                return
        await self._app(scope, receive, send)


def _bearer(scope: Scope) -> str | None:
    """The request's bearer token, if it has one."""
    for name, value in scope.get("headers", ()):
        if name.lower() == b"authorization":
            text = value.decode("latin-1")
            return text[7:] if text.lower().startswith("bearer ") else None
    return None


def _session_id(ctx: ServerRequestContext[Any]) -> str:
    """The conversation a call belongs to: the client's MCP session id if it sent one, else
    the token it calls with."""
    request = ctx.request
    headers = getattr(request, "headers", None)
    session = headers.get("mcp-session-id") if headers is not None else None
    if session:
        return str(session)
    token = get_access_token()
    return f"mcp:{token.client_id}" if token is not None else "mcp"


def _tool_error(message: str) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(text=message)], is_error=True)


def _result(value: Any) -> types.CallToolResult:
    """A tool's answer: JSON text for any client, and the same as structured content."""
    data = _plain(value)
    structured = data if isinstance(data, dict) else {"results": data}
    return types.CallToolResult(
        content=[types.TextContent(text=json.dumps(structured, ensure_ascii=False))],
        structured_content=structured,
    )


def _plain(value: Any) -> Any:
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    if isinstance(value, list):
        return [_plain(item) for item in value]
    return value


class KnowledgeMcp:
    """The tools over MCP, each answered as the calling token may."""

    def __init__(self, services: ServicesNow) -> None:
        self._services = services
        self.server: Server[Any] = Server(
            "ragline",
            instructions=(
                "Ragline's knowledge: search what you may read, with citations; read and "
                "write wiki pages. Prefer knowledge_search to web search for internal or "
                "company-specific questions."
            ),
            on_list_tools=self._list_tools,
            on_call_tool=self._call_tool,
        )
        self.verifier = RaglineTokens(services)

    def app(self, issuer_url: str, allowed_hosts: list[str]) -> Starlette:
        """The ASGI app serving `/mcp` (its session manager runs in the API's lifespan)."""
        security = TransportSecuritySettings(
            enable_dns_rebinding_protection="*" not in allowed_hosts,
            allowed_hosts=allowed_hosts,
            allowed_origins=[f"http://{host}" for host in allowed_hosts]
            + [f"https://{host}" for host in allowed_hosts],
        )
        served = self.server.streamable_http_app(
            streamable_http_path="/mcp",
            json_response=True,
            stateless_http=True,
            transport_security=security,
            auth=AuthSettings(issuer_url=issuer_url, resource_server_url=None),
            token_verifier=self.verifier,
        )
        # Outermost of its middleware (inside only the app's own error handling): the token
        # is resolved before the SDK's authentication runs.
        served.add_middleware(TokenGate, tokens=self.verifier)
        return served

    @property
    def session_manager(self) -> StreamableHTTPSessionManager:
        """Runs the transport's requests (entered for the app's lifetime)."""
        return self.server.session_manager

    def _tools(self) -> AgentToolService:
        services = self._services()
        if services is None:
            raise ServiceUnavailable("api", "still starting")
        return services.agent_tool_service

    async def _agent(self) -> Agent:
        token = get_access_token()
        if token is None or token.claims is None:
            raise ServiceUnavailable("mcp", "the request carries no verified token")
        principal = Principal.model_validate(token.claims["principal"])
        return await self._tools().agent(principal)

    async def _list_tools(
        self, ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        agent = await self._agent()
        tools = self._tools()
        return types.ListToolsResult(
            tools=[
                types.Tool(
                    name=spec.name,
                    description=await tools.describe(agent, spec),
                    input_schema=spec.arguments.model_json_schema(),
                )
                for spec in TOOLS
            ]
        )

    async def _call_tool(
        self, ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        spec = next((tool for tool in TOOLS if tool.name == params.name), None)
        if spec is None:
            return _tool_error(f"unknown tool {params.name!r}; see tools/list")
        try:
            arguments = spec.arguments.model_validate(params.arguments or {})
        except ValidationError as exc:
            problems = "; ".join(
                f"{'.'.join(map(str, e['loc'])) or 'arguments'}: {e['msg']}" for e in exc.errors()
            )
            return _tool_error(f"invalid arguments for {spec.name}: {problems}")
        try:
            return _result(await self._run(spec, arguments, _session_id(ctx)))
        except RaglineError as exc:
            return _tool_error(f"{spec.name} failed: {exc}")
        except Exception:
            log.exception("tool %s failed", spec.name)
            return _tool_error(f"{spec.name} failed: an internal error (it was logged)")

    async def _run(self, spec: ToolSpec, arguments: Any, session_id: str) -> Any:
        agent = await self._agent()
        tools = self._tools()
        session = Session(session_id)
        match spec.name:
            case "knowledge_search":
                return {"results": _plain(await tools.knowledge_search(agent, arguments, session))}
            case "retrieve_knowledge":
                documents = await tools.retrieve_knowledge(agent, arguments, session)
                return {
                    "documents": _plain(documents),
                    "skip_evaluation": arguments.skip_evaluation,
                }
            case "wiki_read":
                return await tools.wiki_read(agent, arguments)
            case "wiki_write":
                return await tools.wiki_write(agent, arguments)
            case "list_knowledge_bases":
                return {"knowledge_bases": _plain(await tools.knowledge_bases(agent))}
        raise ServiceUnavailable("mcp", f"no handler for {spec.name}")
