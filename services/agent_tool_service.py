"""What agents call as tools, whatever carries the call (the MCP server, function calling):
search with citations, `retrieve_knowledge` (documents of title, source URL and text within a
token budget), wiki pages, and the list of knowledge bases the caller may search.

An agent is a token's holder: a bot (its attached, active KBs and its knowledge settings; it
reads what the whole tenant may read), a user (what their permissions allow) or an admin.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from core.errors import Forbidden, InvalidRequest, NotFound
from core.governance import GovernanceChange, Reader
from infra.mongo.knowledge_base_repository import KnowledgeBaseRepository
from schemas.domain import KnowledgeBase, Principal, Role
from schemas.search import (
    BOT_TOP_K_MAX,
    AgentHit,
    BotSearchRequest,
    KnowledgeSearchRequest,
)
from services.policy_service import PolicyService
from services.search.access import AccessGuard, BotAccess
from services.search.search_service import Answer, SearchService
from services.wiki_service import WikiService

# What `retrieve_knowledge` returns at most, in tokens (about four characters each).
RETRIEVE_TOKEN_BUDGET = 4000


@dataclass(frozen=True)
class Session:
    """The conversation a tool call belongs to (its searches' retrieval events name it)."""

    session_id: str


@dataclass(frozen=True)
class Agent:
    """Who calls a tool: the token's principal, what it reads, and the bot it acts as."""

    principal: Principal
    reader: Reader
    bot: BotAccess | None = None

    @property
    def tenant_id(self) -> str:
        """The caller's tenant."""
        return self.principal.tenant_id


# --- the tools' arguments: their JSON Schemas are what agents see -------------------------


class KnowledgeSearchArgs(BaseModel):
    """Arguments of `knowledge_search`."""

    model_config = ConfigDict(extra="forbid")

    query: str = Field(min_length=1, max_length=2000, description="What to look for.")
    kb_ids: list[str] | None = Field(
        default=None,
        max_length=100,
        description="Knowledge bases to search, by id or code (default: all the caller may).",
    )
    top_k: int | None = Field(default=None, ge=1, le=10, description="How many passages.")


class RetrieveKnowledgeArgs(BaseModel):
    """Arguments of `retrieve_knowledge`: the query, and optionally a KB by its code."""

    model_config = ConfigDict(extra="forbid")

    query: str = Field(
        min_length=1,
        max_length=2000,
        description="The query based on which the knowledge will be retrieved.",
    )
    knowledge_base_code: str | None = Field(
        default=None, description="The code of the knowledge base to retrieve knowledge from."
    )
    skip_evaluation: bool = Field(
        default=False, description="Whether to skip evaluation after the tool is executed."
    )


class WikiReadArgs(BaseModel):
    """Arguments of `wiki_read`."""

    model_config = ConfigDict(extra="forbid")

    topic: str = Field(min_length=1, max_length=128, description="The page's topic slug.")


class WikiWriteArgs(BaseModel):
    """Arguments of `wiki_write`."""

    model_config = ConfigDict(extra="forbid")

    topic: str = Field(pattern=r"^[a-z0-9][a-z0-9-]{0,127}$", description="The page's topic slug.")
    title: str = Field(min_length=1, max_length=500)
    content: str = Field(min_length=1, max_length=2_000_000, description="Markdown.")
    summary: str = Field(default="", max_length=2000)
    tags: list[str] | None = Field(default=None, max_length=100)
    kb_id: str | None = Field(
        default=None,
        description="The knowledge base of a new page, by id or code (default: the first the "
        "caller may search).",
    )


class ListKnowledgeBasesArgs(BaseModel):
    """`list_knowledge_bases` takes no arguments."""

    model_config = ConfigDict(extra="forbid")


@dataclass(frozen=True)
class ToolSpec:
    """A tool as agents see it: name, what it does, its arguments."""

    name: str
    description: str
    arguments: type[BaseModel]
    # Whether the caller's knowledge bases (and a bot's instructions) belong in its text.
    searches: bool = False


TOOLS: tuple[ToolSpec, ...] = (
    ToolSpec(
        "knowledge_search",
        "Search the internal knowledge you may read; prefer it to web search for internal or "
        "company-specific questions. Returns passages with their source, page or headings, "
        "url, score, when they were indexed, and a citation to quote.",
        KnowledgeSearchArgs,
        searches=True,
    ),
    ToolSpec(
        "retrieve_knowledge",
        "Retrieve knowledge from the knowledge base: documents (title, source_url, text) that "
        "fit a context budget.",
        RetrieveKnowledgeArgs,
        searches=True,
    ),
    ToolSpec("wiki_read", "Read a wiki page by its topic slug.", WikiReadArgs),
    ToolSpec(
        "wiki_write",
        "Create or update (as a new version) a Markdown wiki page as the current user.",
        WikiWriteArgs,
    ),
    ToolSpec(
        "list_knowledge_bases",
        "List the knowledge bases you may search: code, name, description, document count.",
        ListKnowledgeBasesArgs,
    ),
)


class KnowledgeBaseInfo(BaseModel):
    """A knowledge base as an agent discovers it."""

    id: str
    code: str | None
    name: str
    description: str
    document_count: int


class KnowledgeDocument(BaseModel):
    """A document `retrieve_knowledge` returns: its title, where it is, and the passage."""

    title: str
    source_url: str
    text: str


class AgentToolService:
    """The tools' use-cases, each as the calling agent may."""

    def __init__(
        self,
        search: SearchService,
        guard: AccessGuard,
        policy: PolicyService,
        kbs: KnowledgeBaseRepository,
        wiki: WikiService,
    ) -> None:
        self._search = search
        self._guard = guard
        self._policy = policy
        self._kbs = kbs
        self._wiki = wiki

    async def bot_agent(self, tenant_id: str, bot_id: str) -> Agent:
        """The agent a bot's token stands for (`NotFound` for another tenant's bot)."""
        # No token is involved: the admin asks what the bot's agents would see.
        principal = Principal(
            tenant_id=tenant_id,
            role=Role.BOT,
            token_id="(admin view)",  # noqa: S106 - a label, not a secret
            bot_id=bot_id,
        )
        return await self.agent(principal)

    async def agent(self, principal: Principal) -> Agent:
        """The agent behind a token (`NotFound` for a bot token whose bot is gone)."""
        if principal.role is Role.BOT and principal.bot_id is not None:
            access, _ = await self._guard.for_bot(principal.bot_id)
            if access.tenant_id != principal.tenant_id:
                raise NotFound("bot", principal.bot_id)
            return Agent(principal, Reader.tenant_wide(), access)
        return Agent(principal, await self._policy.reader(principal))

    async def knowledge_bases(self, agent: Agent) -> list[KnowledgeBaseInfo]:
        """The KBs the agent may search: a bot's attached active ones, else the tenant's."""
        if agent.bot is not None:
            allowed = set(agent.bot.allowed(None))
            kbs = [kb for kb in await self._kbs.list_all(agent.tenant_id) if kb.id in allowed]
        else:
            active = set(await self._kbs.all_active_ids(agent.tenant_id))
            kbs = [kb for kb in await self._kbs.list_all(agent.tenant_id) if kb.id in active]
        return [_info(kb) for kb in await self._kbs.counted(kbs)]

    async def describe(self, agent: Agent, spec: ToolSpec) -> str:
        """A tool's description for this agent: with a bot's trigger instructions and the
        knowledge bases it may search."""
        if not spec.searches:
            return spec.description
        parts = [spec.description]
        if agent.bot is not None and agent.bot.knowledge.trigger_instructions:
            parts.append(f"When to use it: {agent.bot.knowledge.trigger_instructions}")
        kbs = await self.knowledge_bases(agent)
        if kbs:
            listed = "; ".join(
                f"{kb.code or kb.id}: {kb.name}"
                + (f" ({kb.description})" if kb.description else "")
                for kb in kbs
            )
            parts.append(f"Knowledge bases: {listed}.")
        return "\n".join(parts)

    async def knowledge_search(
        self, agent: Agent, args: KnowledgeSearchArgs, session: Session
    ) -> list[AgentHit]:
        """Passages for the query, as the agent may read them."""
        response = await self._run_search(agent, args.query, args.kb_ids, args.top_k, session)
        return [AgentHit.of(hit) for hit in response.hits]

    async def retrieve_knowledge(
        self, agent: Agent, args: RetrieveKnowledgeArgs, session: Session
    ) -> list[KnowledgeDocument]:
        """The documents for the query (in the KB its code names, else every KB the agent
        may search), within `RETRIEVE_TOKEN_BUDGET`."""
        kb_ids = None
        if args.knowledge_base_code is not None:
            kb_ids = [args.knowledge_base_code]
        response = await self._run_search(
            agent, args.query, kb_ids, None, session, max_context_tokens=RETRIEVE_TOKEN_BUDGET
        )
        return [
            KnowledgeDocument(
                title=hit.document_title, source_url=hit.url or hit.cited_as, text=hit.chunk_text
            )
            for hit in response.hits
        ]

    async def wiki_read(self, agent: Agent, args: WikiReadArgs) -> dict[str, object]:
        """A wiki page the agent may read."""
        page, content = await self._wiki.read(agent.tenant_id, agent.reader, args.topic)
        return {
            "topic": page.topic,
            "title": page.title,
            "summary": page.summary,
            "content": content,
            "version": page.version,
            "updated_at": page.updated_at.isoformat(),
        }

    async def wiki_write(self, agent: Agent, args: WikiWriteArgs) -> dict[str, object]:
        """Writes a page as the calling user (a bot's token cannot: a page has an owner)."""
        if agent.bot is not None or (agent.reader.user_id is None and not agent.reader.admin):
            raise Forbidden("wiki_write needs a user's token: a page belongs to a person")
        kb_id = args.kb_id
        if kb_id is None:
            kbs = await self.knowledge_bases(agent)
            if not kbs:
                raise NotFound("knowledge base", "(none the caller may write to)")
            kb_id = kbs[0].id
        change = GovernanceChange(tags=args.tags) if args.tags is not None else None
        ingested = await self._wiki.write(
            agent.tenant_id,
            agent.reader,
            kb_id=kb_id,
            topic=args.topic,
            title=args.title,
            content=args.content,
            summary=args.summary,
            change=change,
        )
        document = ingested.document
        return {
            "topic": document.topic,
            "document_id": document.id,
            "version": document.version,
            "outcome": ingested.outcome.value,
            "parse_status": document.parse_status.value,
        }

    async def search(self, agent: Agent, request: KnowledgeSearchRequest) -> Answer:
        """A search over HTTP with the agent's own token: a bot's within its attached KBs and
        knowledge settings (the bot contract), a person's within what they may read."""
        if agent.bot is None:
            return await self._search.search_reader(
                agent.tenant_id, agent.reader, request, caller=agent.principal
            )
        if request.retrieval_mode is not None:
            raise InvalidRequest("retrieval_mode: a bot searches in its own retrieval mode")
        if request.top_k > BOT_TOP_K_MAX:
            raise InvalidRequest(f"top_k: a bot's search returns at most {BOT_TOP_K_MAX}")
        named = None
        if request.kb_ids is not None:
            named = await self._kbs.ids_of(agent.tenant_id, request.kb_ids)
        bot_request = BotSearchRequest(
            bot_id=agent.bot.bot_id,
            session_id=request.session_id or f"api:{agent.principal.token_id}",
            turn_id=request.turn_id,
            query=request.query,
            kb_ids=named,
            top_k=request.top_k,
            score_threshold=request.score_threshold,
            max_context_tokens=request.max_context_tokens,
        )
        return await self._search.search_bot(bot_request, caller=agent.principal)

    async def _run_search(
        self,
        agent: Agent,
        query: str,
        kb_ids: list[str] | None,
        top_k: int | None,
        session: Session,
        max_context_tokens: int | None = None,
    ) -> Answer:
        if agent.bot is not None:
            named = None if kb_ids is None else await self._kbs.ids_of(agent.tenant_id, kb_ids)
            request = BotSearchRequest(
                bot_id=agent.bot.bot_id,
                session_id=session.session_id,
                query=query,
                kb_ids=named,
                top_k=top_k,
                max_context_tokens=max_context_tokens,
            )
            return await self._search.search_bot(request, "mcp", caller=agent.principal)
        people = KnowledgeSearchRequest(
            query=query,
            kb_ids=kb_ids,
            top_k=top_k or 5,
            max_context_tokens=max_context_tokens,
            session_id=session.session_id,
        )
        return await self._search.search_reader(
            agent.tenant_id, agent.reader, people, "mcp", caller=agent.principal
        )


def _info(kb: KnowledgeBase) -> KnowledgeBaseInfo:
    return KnowledgeBaseInfo(
        id=kb.id,
        code=kb.code,
        name=kb.name,
        description=kb.description,
        document_count=kb.document_count,
    )


# --- function calling: the tools as JSON Schema function definitions ----------------------


def knowledge_base_instructions(knowledge_base_code: str) -> str:
    """The instructions injected into an assistant's system prompt for its KB: call
    `retrieve_knowledge` with the KB's code first, and answer from what it returns."""
    return (
        "You are a helpful office assistant.\n"
        "Your task is to answer user questions by first calling the retrieve_knowledge tool "
        "and answering from the documents it returns.\n"
        "You MUST always use the retrieve_knowledge tool to get the context by these "
        "parameters:\n"
        "- query: {Rephrase the question from the user to contain the essence of the "
        "question}\n"
        f"- knowledge_base_code: {knowledge_base_code}\n"
    )


def openai_function(name: str, description: str, parameters: dict[str, Any]) -> dict[str, Any]:
    """A tool in the OpenAI-style function-calling shape."""
    return {
        "type": "function",
        "function": {"name": name, "description": description, "parameters": parameters},
    }


def gemini_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """A pydantic JSON Schema in the OpenAPI subset Gemini's `functionDeclarations` take:
    optional fields as `nullable`, no titles, defaults or `additionalProperties`."""
    out: dict[str, Any] = {}
    variants = schema.get("anyOf")
    if isinstance(variants, list):
        kinds = [v for v in variants if v.get("type") != "null"]
        if len(kinds) == 1:
            out = gemini_schema(kinds[0])
            out["nullable"] = True
            if "description" in schema:
                out["description"] = schema["description"]
            return out
    for key, value in schema.items():
        if key in ("title", "default", "additionalProperties", "anyOf"):
            continue
        if key == "properties":
            out[key] = {name: gemini_schema(prop) for name, prop in value.items()}
        elif key == "items":
            out[key] = gemini_schema(value)
        else:
            out[key] = value
    return out


class FunctionTools(BaseModel):
    """Body of `GET /api/v1/bots/{bot_id}/tools`."""

    openai: list[dict[str, Any]]
    gemini: dict[str, list[dict[str, Any]]]
    system_instructions: str


async def function_tools(tools: AgentToolService, agent: Agent) -> FunctionTools:
    """The agent's tools as function definitions, in both common shapes, with the
    system-prompt instructions for its first KB that has a code."""
    declared = [
        (spec.name, await tools.describe(agent, spec), spec.arguments.model_json_schema())
        for spec in TOOLS
    ]
    kbs = await tools.knowledge_bases(agent)
    coded = next((kb.code for kb in kbs if kb.code), None)
    return FunctionTools(
        openai=[openai_function(name, text, schema) for name, text, schema in declared],
        gemini={
            "functionDeclarations": [
                {"name": name, "description": text, "parameters": gemini_schema(schema)}
                for name, text, schema in declared
            ]
        },
        system_instructions=knowledge_base_instructions(coded or (kbs[0].id if kbs else "")),
    )
