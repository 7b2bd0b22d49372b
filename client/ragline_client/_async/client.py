"""The Ragline client: one method per operation of the API, each answer read into its model,
each refusal raised as its typed error, listings iterated page by page."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Mapping, Sequence
from pathlib import Path
from time import monotonic
from types import TracebackType
from typing import IO, Any, Literal, TypeVar

import httpx
from pydantic import BaseModel

from ragline_client._shared import (
    DEFAULT_PAGE_SIZE,
    DEFAULT_TIMEOUT_S,
    FINAL_STATUSES,
    LONG_TIMEOUT_S,
    USER_AGENT,
    RetryPolicy,
    body_of,
    params_of,
    parse,
    parse_list,
    url_of,
)
from ragline_client.errors import (
    APIConnectionError,
    APITimeoutError,
    RetryableStatusError,
    WaitTimeout,
    status_error,
)
from ragline_client.models import (
    Applied,
    Audience,
    AudienceIn,
    AudienceList,
    AudienceMembersIn,
    AuditEntry,
    AuditPage,
    BatchIn,
    BatchOut,
    Bot,
    BotCreate,
    BotList,
    BotSearchOptions,
    BotTokenCreate,
    BotUpdate,
    CrawlJob,
    CrawlJobCreate,
    CrawlJobList,
    CrawlJobQueued,
    DeadLetterEntry,
    DeadLetterPage,
    DocumentContent,
    DocumentList,
    DocumentOut,
    Evaluation,
    EvaluationRequest,
    FunctionTools,
    GenerationOut,
    GenerationsOut,
    GovernanceChange,
    Health,
    KnowledgeBaseCreate,
    KnowledgeBaseList,
    KnowledgeBaseOut,
    KnowledgeBaseUpdate,
    KnowledgeSearchResponse,
    ModelIdentity,
    PlaygroundResponse,
    Readiness,
    RecordReplace,
    RedriveAllOut,
    RedriveOut,
    RestoreOut,
    SearchResponse,
    StoredChunks,
    SyncIn,
    SyncOut,
    TokenCreate,
    TokenInfo,
    TokenList,
    TokenOut,
    User,
    UserIn,
    UserList,
    WikiPageIn,
    WikiPageList,
    WikiPageOut,
)

ModelT = TypeVar("ModelT", bound=BaseModel)
Body = BaseModel | Mapping[str, Any] | None
RetrievalMode = Literal["dense", "sparse", "hybrid"]
FileSource = str | Path | bytes | IO[bytes]


class AsyncRagline:
    """A client of the Ragline API at `base_url`, calling with `token` (an admin's, a
    person's or, for searching, a bot's: `Authorization: Bearer`) and, for the internal
    search contract only, the deployment's `internal_secret`.

    Refusals raise the `ragline_client.errors` class of their status. A 429 or 503 is sent
    again after what `Retry-After` says, and a request that got no answer after a backoff
    (only if it is idempotent or never left), at most `max_retries` times. Use it as a
    context manager, or close it, to release its connections."""

    def __init__(
        self,
        base_url: str,
        token: str | None = None,
        *,
        internal_secret: str | None = None,
        timeout: float = DEFAULT_TIMEOUT_S,
        max_retries: int = 2,
        retry_policy: RetryPolicy | None = None,
        http_client: httpx.AsyncClient | None = None,
        user_agent: str = USER_AGENT,
    ) -> None:
        headers = {"User-Agent": user_agent}
        if token:
            headers["Authorization"] = f"Bearer {token}"
        if internal_secret:
            headers["X-Internal-Secret"] = internal_secret
        self.base_url = base_url.rstrip("/")
        self.retry_policy = retry_policy or RetryPolicy(max_retries=max_retries)
        self._own_http = http_client is None
        self._http = http_client or httpx.AsyncClient(timeout=timeout)
        self._headers = headers

    async def __aenter__(self) -> AsyncRagline:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Releases the client's connections (not those of an `http_client` passed in)."""
        if self._own_http:
            await self._http.aclose()

    # -- sending ---------------------------------------------------------------------------

    async def _send(
        self,
        operation: str,
        path_params: Mapping[str, str] | None = None,
        *,
        params: Mapping[str, Any] | None = None,
        json: Any = None,
        files: Mapping[str, Any] | None = None,
        data: Mapping[str, str] | None = None,
        timeout: float | None = None,
        accept: frozenset[int] = frozenset(),
        stream: bool = False,
    ) -> httpx.Response:
        """Sends the operation, retrying as the policy allows; the answer, or the typed error
        of its status (`accept`: error statuses answered as they are). With `stream`, a
        successful answer's body is left unread, for the caller to read and close."""
        method, path = url_of(operation, path_params or {})
        attempt = 0
        while True:
            extra: dict[str, Any] = {}
            if timeout is not None:
                extra["timeout"] = timeout
            request = self._http.build_request(
                method,
                self.base_url + path,
                params=params,
                json=json,
                files=files,
                data=data,
                headers=self._headers,
                **extra,
            )
            try:
                response = await self._http.send(request, stream=stream)
                if stream and response.status_code >= 400:
                    await response.aread()
                    await response.aclose()
            except httpx.TransportError as exc:
                wait_s = self.retry_policy.after_transport_error(method, exc, attempt)
                if wait_s is None:
                    raise _connection_error(exc, self.base_url) from exc
                await asyncio.sleep(wait_s)
                attempt += 1
                _rewind(files)
                continue
            if response.status_code < 400 or response.status_code in accept:
                return response
            error = status_error(response)
            if isinstance(error, RetryableStatusError):
                wait_s = self.retry_policy.after_status(error, attempt)
                if wait_s is not None:
                    await asyncio.sleep(wait_s)
                    attempt += 1
                    _rewind(files)
                    continue
            raise error

    async def _model(
        self, model: type[ModelT], operation: str, *args: Any, **kwargs: Any
    ) -> ModelT:
        response = await self._send(operation, *args, **kwargs)
        return parse(model, response, operation)

    # -- health ----------------------------------------------------------------------------

    async def health(self) -> Health:
        """Whether the API process is up (`GET /healthz`)."""
        return await self._model(Health, "health")

    async def readiness(self) -> Readiness:
        """Whether the API can serve, with each dependency's state (`GET /readyz`); a
        not-ready answer is returned, not raised."""
        return await self._model(Readiness, "readiness", accept=frozenset({503}))

    async def metrics(self) -> str:
        """The API process's Prometheus metrics, as text (`GET /metrics`)."""
        return (await self._send("metrics")).text

    # -- knowledge bases -------------------------------------------------------------------

    async def list_knowledge_bases(self) -> list[KnowledgeBaseOut]:
        """The tenant's knowledge bases."""
        return (await self._model(KnowledgeBaseList, "list_knowledge_bases")).items

    async def create_knowledge_base(
        self, body: KnowledgeBaseCreate | Body = None, **fields: Any
    ) -> KnowledgeBaseOut:
        """Creates a knowledge base (`name`, optional `code`, `description`,
        `default_visibility`, ...)."""
        json = body_of(body, fields)
        return await self._model(KnowledgeBaseOut, "create_knowledge_base", json=json)

    async def get_knowledge_base(self, kb: str) -> KnowledgeBaseOut:
        """One knowledge base, by id or code."""
        return await self._model(KnowledgeBaseOut, "get_knowledge_base", {"kb_id": kb})

    async def update_knowledge_base(
        self, kb: str, body: KnowledgeBaseUpdate | Body = None, **fields: Any
    ) -> KnowledgeBaseOut:
        """Changes the fields given of a knowledge base (by id or code)."""
        json = body_of(body, fields)
        return await self._model(
            KnowledgeBaseOut, "update_knowledge_base", {"kb_id": kb}, json=json
        )

    async def delete_knowledge_base(
        self, kb: str, *, hard: bool = False
    ) -> KnowledgeBaseOut | None:
        """Disables a knowledge base (its passages leave search at once; nothing is lost) and
        answers it; with `hard`, deletes it with its documents, files and chunks for good."""
        params = {"hard": "true"} if hard else None
        response = await self._send(
            "delete_knowledge_base", {"kb_id": kb}, params=params, timeout=LONG_TIMEOUT_S
        )
        if response.status_code == 204:
            return None
        return parse(KnowledgeBaseOut, response, "delete_knowledge_base")

    # -- documents -------------------------------------------------------------------------

    async def list_documents(
        self,
        kb: str,
        *,
        status: str | None = None,
        external_id: str | None = None,
        page_size: int = DEFAULT_PAGE_SIZE,
    ) -> AsyncIterator[DocumentOut]:
        """Every document of the KB the token may see, newest first, fetched a page at a
        time (`status`: a parse status, or `stalled`)."""
        cursor: str | None = None
        while True:
            params = params_of(
                status=status, external_id=external_id, limit=page_size, cursor=cursor
            )
            page = await self._model(DocumentList, "list_documents", {"kb_id": kb}, params=params)
            for document in page.items:
                yield document
            if not page.next_cursor:
                return
            cursor = page.next_cursor

    async def upload_file(
        self,
        kb: str,
        file: FileSource,
        *,
        filename: str | None = None,
        title: str | None = None,
        reindex: bool = False,
        governance: GovernanceChange | Mapping[str, Any] | None = None,
    ) -> DocumentOut:
        """Uploads a file (a path, bytes or an open binary file) and queues it; answers at
        once with the document (`parse_status` `queued`), or with the document that already
        holds the same bytes. `filename` names it (required for bytes); a file of the same
        name as an earlier one is its new version. `governance`: who may read it
        (`visibility_mode`, `audience_tags`, `user_grants`, `owner_user_id`, `tags`)."""
        name, content, opened = _file_part(file, filename)
        try:
            data = {key: _form_value(value) for key, value in body_of(governance, {}).items()}
            if title is not None:
                data["title"] = title
            return await self._model(
                DocumentOut,
                "upload_file",
                {"kb_id": kb},
                params={"reindex": "true"} if reindex else None,
                files={"file": (name, content, "application/octet-stream")},
                data=data,
                timeout=LONG_TIMEOUT_S,
            )
        finally:
            if opened is not None:
                opened.close()

    async def add_text(self, kb: str, body: Body = None, **fields: Any) -> DocumentOut:
        """Indexes a text (`title`, `content`; optional `external_id`, `url`, `metadata`
        and the governance fields); an unchanged text answers the document as it is."""
        return await self._model(DocumentOut, "add_text", {"kb_id": kb}, json=body_of(body, fields))

    async def add_records(self, kb: str, body: BatchIn | Body = None, **fields: Any) -> BatchOut:
        """Upserts up to 1,000 records (`records`: each with `external_id`, `title`,
        `content`, ...) by external id; unchanged records cost nothing."""
        return await self._model(
            BatchOut,
            "add_records",
            {"kb_id": kb},
            json=body_of(body, fields),
            timeout=LONG_TIMEOUT_S,
        )

    async def sync_source(self, kb: str, body: SyncIn | Body = None, **fields: Any) -> SyncOut:
        """Makes the KB's documents of `source` exactly `records` (a full sync): new ones
        added, changed ones re-indexed, the source's others deleted."""
        return await self._model(
            SyncOut,
            "sync_source",
            {"kb_id": kb},
            json=body_of(body, fields),
            timeout=LONG_TIMEOUT_S,
        )

    async def get_document(self, kb: str, document_id: str) -> DocumentOut:
        """One document, with its status (`parse_status`, `parse_error`)."""
        return await self._model(
            DocumentOut, "get_document", {"kb_id": kb, "document_id": document_id}
        )

    async def replace_record(
        self, kb: str, document_id: str, body: RecordReplace | Body = None, **fields: Any
    ) -> DocumentOut:
        """Replaces a record's title, content and URL with a new version, which takes the
        old one's place once indexed."""
        return await self._model(
            DocumentOut,
            "replace_record",
            {"kb_id": kb, "document_id": document_id},
            json=body_of(body, fields),
        )

    async def update_document(
        self, kb: str, document_id: str, body: GovernanceChange | Body = None, **fields: Any
    ) -> DocumentOut:
        """Changes who may read a document (`visibility_mode`, `audience_tags`,
        `user_grants`, `owner_user_id`, `tags`) or archives it (`archived`)."""
        return await self._model(
            DocumentOut,
            "update_document",
            {"kb_id": kb, "document_id": document_id},
            json=body_of(body, fields),
        )

    async def delete_document(self, kb: str, document_id: str) -> None:
        """Deletes a document: it leaves search at once."""
        await self._send("delete_document", {"kb_id": kb, "document_id": document_id})

    async def get_document_content(self, kb: str, document_id: str) -> DocumentContent:
        """The text extracted from a document."""
        return await self._model(
            DocumentContent, "get_document_content", {"kb_id": kb, "document_id": document_id}
        )

    async def list_document_chunks(
        self, kb: str, document_id: str, *, limit: int | None = None
    ) -> StoredChunks:
        """The chunks a document was indexed as, in order."""
        return await self._model(
            StoredChunks,
            "list_document_chunks",
            {"kb_id": kb, "document_id": document_id},
            params=params_of(limit=limit),
        )

    async def reindex_document(self, kb: str, document_id: str) -> DocumentOut:
        """Runs the pipeline again on a document's stored original."""
        return await self._model(
            DocumentOut, "reindex_document", {"kb_id": kb, "document_id": document_id}
        )

    async def wait_until_final(
        self,
        document: DocumentOut,
        timeout: float = 300.0,
        *,
        poll_interval: float = 0.5,
    ) -> DocumentOut:
        """The document once it is `indexed` or `failed` (then `parse_error` says why),
        read every `poll_interval` seconds; `WaitTimeout` after `timeout` seconds."""
        deadline = monotonic() + timeout
        current = document
        while current.parse_status not in FINAL_STATUSES:
            if monotonic() >= deadline:
                raise WaitTimeout(
                    f"document {document.id} was still {current.parse_status} after {timeout:g} s"
                )
            await asyncio.sleep(poll_interval)
            current = await self.get_document(document.kb_id, document.id)
        return current

    # -- evaluations -----------------------------------------------------------------------

    async def list_evaluations(self, kb: str, *, limit: int | None = None) -> list[Evaluation]:
        """The KB's evaluations, newest first."""
        response = await self._send(
            "list_evaluations", {"kb_id": kb}, params=params_of(limit=limit)
        )
        return parse_list(Evaluation, response, "list_evaluations")

    async def evaluate(
        self, kb: str, body: EvaluationRequest | Body = None, **fields: Any
    ) -> Evaluation:
        """Runs an evaluation (`cases`: questions with the documents that answer them) in
        every retrieval mode and fusion; it may take a while."""
        return await self._model(
            Evaluation,
            "evaluate",
            {"kb_id": kb},
            json=body_of(body, fields),
            timeout=LONG_TIMEOUT_S,
        )

    async def get_evaluation(self, kb: str, evaluation_id: str) -> Evaluation:
        """One evaluation with its scores."""
        return await self._model(
            Evaluation, "get_evaluation", {"kb_id": kb, "evaluation_id": evaluation_id}
        )

    async def apply_evaluation(
        self, kb: str, evaluation_id: str, body: Body = None, **fields: Any
    ) -> Applied:
        """Applies a configuration the evaluation measured to a bot (`target: "bot"`,
        `bot_id`) or as the KB's default (`target: "kb"`)."""
        return await self._model(
            Applied,
            "apply_evaluation",
            {"kb_id": kb, "evaluation_id": evaluation_id},
            json=body_of(body, fields),
        )

    # -- bots ------------------------------------------------------------------------------

    async def list_bots(self) -> list[Bot]:
        """The tenant's bots."""
        return (await self._model(BotList, "list_bots")).items

    async def create_bot(self, body: BotCreate | Body = None, **fields: Any) -> Bot:
        """Creates a bot (`name`, `knowledge`: its KBs and search settings)."""
        return await self._model(Bot, "create_bot", json=body_of(body, fields))

    async def get_bot(self, bot_id: str) -> Bot:
        """One bot."""
        return await self._model(Bot, "get_bot", {"bot_id": bot_id})

    async def update_bot(self, bot_id: str, body: BotUpdate | Body = None, **fields: Any) -> Bot:
        """Changes the fields given of a bot."""
        return await self._model(Bot, "update_bot", {"bot_id": bot_id}, json=body_of(body, fields))

    async def delete_bot(self, bot_id: str) -> None:
        """Deletes a bot (its tokens stop working)."""
        await self._send("delete_bot", {"bot_id": bot_id})

    async def list_bot_tokens(self, bot_id: str) -> list[TokenInfo]:
        """A bot's tokens, without their secrets."""
        return (await self._model(TokenList, "list_bot_tokens", {"bot_id": bot_id})).items

    async def create_bot_token(
        self, bot_id: str, body: BotTokenCreate | Body = None, **fields: Any
    ) -> TokenOut:
        """Issues a token for a bot's agents (its `token` is shown this once)."""
        return await self._model(
            TokenOut, "create_bot_token", {"bot_id": bot_id}, json=body_of(body, fields)
        )

    async def revoke_bot_token(self, bot_id: str, token_id: str) -> None:
        """Revokes one of a bot's tokens."""
        await self._send("revoke_bot_token", {"bot_id": bot_id, "token_id": token_id})

    async def get_bot_tools(self, bot_id: str) -> FunctionTools:
        """The bot's tools as function-calling declarations (OpenAI and Gemini shapes)."""
        return await self._model(FunctionTools, "get_bot_tools", {"bot_id": bot_id})

    async def search_as_bot(
        self, bot_id: str, body: BotSearchOptions | Body = None, **fields: Any
    ) -> PlaygroundResponse:
        """What the bot would find for `query` (the admin's playground: nothing is
        announced)."""
        return await self._model(
            PlaygroundResponse, "search_as_bot", {"bot_id": bot_id}, json=body_of(body, fields)
        )

    # -- search ----------------------------------------------------------------------------

    async def search(
        self,
        query: str,
        *,
        kb_ids: Sequence[str] | None = None,
        top_k: int = 5,
        retrieval_mode: RetrievalMode | None = None,
        score_threshold: float | None = None,
        max_context_tokens: int | None = None,
        session_id: str | None = None,
        turn_id: str | None = None,
    ) -> KnowledgeSearchResponse:
        """Passages for `query` that the token's holder may read: a person's across their
        tenant's active KBs (or those of `kb_ids`, by id or code); a bot's within its own
        KBs and settings (`top_k` at most 10, no `retrieval_mode`)."""
        json = params_of(
            query=query,
            kb_ids=list(kb_ids) if kb_ids is not None else None,
            top_k=top_k,
            retrieval_mode=retrieval_mode,
            score_threshold=score_threshold,
            max_context_tokens=max_context_tokens,
            session_id=session_id,
            turn_id=turn_id,
        )
        return await self._model(KnowledgeSearchResponse, "search", json=json)

    async def internal_search(self, body: Body = None, **fields: Any) -> SearchResponse:
        """The agent runtime's search contract (needs `internal_secret`): a bot's search
        (`bot_id`, `session_id`, `query`, ...) or the tenant form (`tenant_id`, `kb_ids`,
        `query`, ...), with the answer's timings."""
        return await self._model(SearchResponse, "internal_search", json=body_of(body, fields))

    # -- tokens and people -----------------------------------------------------------------

    async def list_tokens(self) -> list[TokenInfo]:
        """The tenant's tokens, without their secrets."""
        return (await self._model(TokenList, "list_tokens")).items

    async def create_token(self, body: TokenCreate | Body = None, **fields: Any) -> TokenOut:
        """Issues a token (`name`, `role`: admin or user, `user_id` for a user); its `token`
        is shown this once."""
        return await self._model(TokenOut, "create_token", json=body_of(body, fields))

    async def revoke_token(self, token_id: str) -> None:
        """Revokes a token."""
        await self._send("revoke_token", {"token_id": token_id})

    async def list_users(self) -> list[User]:
        """The tenant's people."""
        return (await self._model(UserList, "list_users")).items

    async def put_user(self, user_id: str, body: UserIn | Body = None, **fields: Any) -> User:
        """Creates or changes a person (`display_name`)."""
        return await self._model(User, "put_user", {"user_id": user_id}, json=body_of(body, fields))

    async def list_audiences(self) -> list[Audience]:
        """The tenant's audiences (groups of people an item can be shared with)."""
        return (await self._model(AudienceList, "list_audiences")).items

    async def put_audience(
        self, tag: str, body: AudienceIn | Body = None, **fields: Any
    ) -> Audience:
        """Creates or changes an audience (`description`)."""
        return await self._model(Audience, "put_audience", {"tag": tag}, json=body_of(body, fields))

    async def delete_audience(self, tag: str) -> None:
        """Deletes an audience."""
        await self._send("delete_audience", {"tag": tag})

    async def put_audience_members(
        self, tag: str, body: AudienceMembersIn | Body = None, **fields: Any
    ) -> Audience:
        """Makes an audience's members exactly `user_ids`."""
        return await self._model(
            Audience, "put_audience_members", {"tag": tag}, json=body_of(body, fields)
        )

    # -- wiki pages ------------------------------------------------------------------------

    async def list_wiki_pages(self) -> WikiPageList:
        """The wiki pages the token's holder may read."""
        return await self._model(WikiPageList, "list_wiki_pages")

    async def write_wiki_page(self, body: WikiPageIn | Body = None, **fields: Any) -> WikiPageOut:
        """Writes a page or a new version of it (`kb_id`, `topic`, `title`, `content`)."""
        return await self._model(WikiPageOut, "write_wiki_page", json=body_of(body, fields))

    async def read_wiki_page(self, topic: str) -> WikiPageOut:
        """One wiki page."""
        return await self._model(WikiPageOut, "read_wiki_page", {"topic": topic})

    async def delete_wiki_page(self, topic: str) -> None:
        """Deletes a wiki page (its owner or an admin)."""
        await self._send("delete_wiki_page", {"topic": topic})

    # -- operations ------------------------------------------------------------------------

    async def list_audit_entries(
        self, *, page_size: int = DEFAULT_PAGE_SIZE
    ) -> AsyncIterator[AuditEntry]:
        """The tenant's audit log, newest first, fetched a page at a time."""
        before: str | None = None
        while True:
            params = params_of(limit=page_size, before=before)
            page = await self._model(AuditPage, "list_audit_entries", params=params)
            for entry in page.items:
                yield entry
            if len(page.items) < page_size:
                return
            before = page.items[-1].at.isoformat()

    async def list_dead_letters(
        self,
        *,
        stage: str | None = None,
        include_redriven: bool = False,
        page_size: int = DEFAULT_PAGE_SIZE,
    ) -> AsyncIterator[DeadLetterEntry]:
        """Work the pipeline gave up on (the tenant's), newest first, a page at a time."""
        before: str | None = None
        while True:
            params = params_of(
                stage=stage,
                include_redriven="true" if include_redriven else None,
                limit=page_size,
                before=before,
            )
            page = await self._model(DeadLetterPage, "list_dead_letters", params=params)
            for letter in page.items:
                yield letter
            if len(page.items) < page_size:
                return
            before = page.items[-1].at.isoformat()

    async def redrive_dead_letters(self, *, stage: str | None = None) -> RedriveAllOut:
        """Sends every dead letter (of `stage`, if given) through its stage again."""
        return await self._model(
            RedriveAllOut, "redrive_dead_letters", params=params_of(stage=stage)
        )

    async def redrive_dead_letter(self, letter_id: str) -> RedriveOut:
        """Sends one dead letter through its stage again."""
        return await self._model(RedriveOut, "redrive_dead_letter", {"letter_id": letter_id})

    # -- crawl jobs ------------------------------------------------------------------------

    async def list_crawl_jobs(self, kb: str, *, limit: int | None = None) -> list[CrawlJob]:
        """The KB's crawl jobs, newest first."""
        params = params_of(limit=limit)
        return (
            await self._model(CrawlJobList, "list_crawl_jobs", {"kb_id": kb}, params=params)
        ).items

    async def start_crawl(
        self, kb: str, body: CrawlJobCreate | Body = None, **fields: Any
    ) -> CrawlJobQueued:
        """Starts crawling `urls` (or fetching `file_urls`) into the KB."""
        return await self._model(
            CrawlJobQueued, "start_crawl", {"kb_id": kb}, json=body_of(body, fields)
        )

    async def get_crawl_job(self, job_id: str) -> CrawlJob:
        """One crawl job, with its counts."""
        return await self._model(CrawlJob, "get_crawl_job", {"job_id": job_id})

    async def cancel_crawl_job(self, job_id: str) -> CrawlJob:
        """Cancels a crawl job that is still running."""
        return await self._model(CrawlJob, "cancel_crawl_job", {"job_id": job_id})

    # -- generations of the vector store ------------------------------------------------------

    async def list_generations(self) -> list[GenerationOut]:
        """The vector store's generations, one per embedding model, oldest first, with a
        build's progress."""
        return (await self._model(GenerationsOut, "list_generations")).items

    async def get_generation(self, number: int) -> GenerationOut:
        """One generation, with its progress."""
        return await self._model(GenerationOut, "get_generation", {"number": str(number)})

    async def start_generation(
        self, body: ModelIdentity | Body = None, **fields: Any
    ) -> GenerationOut:
        """Starts building a generation for another embedding model (`provider`, `model`,
        `dimensions`; the deployment's admin token): searches switch to it when it holds
        every chunk."""
        return await self._model(GenerationOut, "start_generation", json=body_of(body, fields))

    async def cancel_generation(self, number: int) -> GenerationOut:
        """Stops building a generation; the live one serves on."""
        return await self._model(GenerationOut, "cancel_generation", {"number": str(number)})

    async def drop_generation(self, number: int) -> GenerationOut:
        """Drops a retired generation's store now."""
        return await self._model(GenerationOut, "drop_generation", {"number": str(number)})

    # -- backups ---------------------------------------------------------------------------

    async def create_backup(
        self, destination: str | Path, *, scope: Literal["tenant", "deployment"] = "tenant"
    ) -> Path:
        """Takes a snapshot (the caller's tenant, or the whole deployment with its admin
        token) and streams its tar into `destination` (written whole or not at all)."""
        path = Path(destination)
        partial = path.with_name(f".{path.name}.partial")
        response = await self._send(
            "create_backup", params={"scope": scope}, timeout=LONG_TIMEOUT_S, stream=True
        )
        try:
            with partial.open("wb") as out:
                async for block in response.aiter_bytes():
                    out.write(block)
            partial.replace(path)
        except httpx.TransportError as exc:
            raise _connection_error(exc, self.base_url) from exc
        finally:
            await response.aclose()
            partial.unlink(missing_ok=True)
        return path

    async def restore_backup(
        self, archive: str | Path, *, scope: Literal["tenant", "deployment"] = "tenant"
    ) -> RestoreOut:
        """Restores a snapshot's tar (from `create_backup`)."""
        name, content, opened = _file_part(Path(archive), "snapshot.tar")
        try:
            return await self._model(
                RestoreOut,
                "restore_backup",
                params={"scope": scope},
                files={"file": (name, content, "application/x-tar")},
                timeout=LONG_TIMEOUT_S,
            )
        finally:
            if opened is not None:
                opened.close()


def _connection_error(exc: httpx.TransportError, base_url: str) -> APIConnectionError:
    if isinstance(exc, httpx.TimeoutException):
        return APITimeoutError(f"the API at {base_url} did not answer in time")
    return APIConnectionError(f"cannot reach the API at {base_url}: {exc}")


def _file_part(file: FileSource, filename: str | None) -> tuple[str, Any, IO[bytes] | None]:
    """A multipart file part's name and content, and the file this opened (to close)."""
    if isinstance(file, str | Path):
        path = Path(file)
        opened = path.open("rb")
        return filename or path.name, opened, opened
    if isinstance(file, bytes):
        if not filename:
            raise ValueError("upload_file needs a filename for bytes")
        return filename, file, None
    name = filename or Path(str(getattr(file, "name", ""))).name
    if not name:
        raise ValueError("upload_file needs a filename for a file object without a name")
    return name, file, None


def _rewind(files: Mapping[str, Any] | None) -> None:
    """Puts each file part back at its start, so that a retry sends it whole."""
    for part in (files or {}).values():
        content = part[1]
        if hasattr(content, "seek"):
            content.seek(0)


def _form_value(value: Any) -> str:
    """A governance field as a form field: lists comma-separated."""
    if isinstance(value, list | tuple):
        return ",".join(str(item) for item in value)
    return str(value)
