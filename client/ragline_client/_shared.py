"""What the sync and async clients share: every operation of the API (method and path), the
retry policy, and reading answers into models. No I/O."""

from __future__ import annotations

import random
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, TypeVar
from urllib.parse import quote

import httpx
from pydantic import BaseModel, TypeAdapter, ValidationError

from ragline_client.errors import RetryableStatusError, unreadable

ModelT = TypeVar("ModelT", bound=BaseModel)

USER_AGENT = "ragline-client/0.1.0"
DEFAULT_TIMEOUT_S = 60.0
# Uploads, syncs, evaluations, backups and restores: the API bounds their work itself.
LONG_TIMEOUT_S = 900.0
DEFAULT_PAGE_SIZE = 100
# The statuses a document ends in: it is searchable (indexed) or will not be (failed).
FINAL_STATUSES = frozenset({"indexed", "failed"})
# Idempotent methods: sent again when the connection broke or timed out mid-request. Others
# only when the request never left (the connection could not be made).
IDEMPOTENT = frozenset({"GET", "PUT", "DELETE", "HEAD", "OPTIONS"})


@dataclass(frozen=True)
class Operation:
    """One operation of the API: its HTTP method and path template."""

    method: str
    path: str


# Every operation of the API, by the client method that calls it (the test suite checks this
# table against the served OpenAPI schema, and that both clients have every method).
OPERATIONS: dict[str, Operation] = {
    "health": Operation("GET", "/healthz"),
    "readiness": Operation("GET", "/readyz"),
    "metrics": Operation("GET", "/metrics"),
    # knowledge bases
    "list_knowledge_bases": Operation("GET", "/api/v1/knowledge-bases"),
    "create_knowledge_base": Operation("POST", "/api/v1/knowledge-bases"),
    "get_knowledge_base": Operation("GET", "/api/v1/knowledge-bases/{kb_id}"),
    "update_knowledge_base": Operation("PATCH", "/api/v1/knowledge-bases/{kb_id}"),
    "delete_knowledge_base": Operation("DELETE", "/api/v1/knowledge-bases/{kb_id}"),
    # documents
    "list_documents": Operation("GET", "/api/v1/knowledge-bases/{kb_id}/documents"),
    "upload_file": Operation("POST", "/api/v1/knowledge-bases/{kb_id}/documents"),
    "add_text": Operation("POST", "/api/v1/knowledge-bases/{kb_id}/documents/text"),
    "add_records": Operation("POST", "/api/v1/knowledge-bases/{kb_id}/documents/batch"),
    "sync_source": Operation("POST", "/api/v1/knowledge-bases/{kb_id}/documents/sync"),
    "get_document": Operation("GET", "/api/v1/knowledge-bases/{kb_id}/documents/{document_id}"),
    "replace_record": Operation("PUT", "/api/v1/knowledge-bases/{kb_id}/documents/{document_id}"),
    "update_document": Operation(
        "PATCH", "/api/v1/knowledge-bases/{kb_id}/documents/{document_id}"
    ),
    "delete_document": Operation(
        "DELETE", "/api/v1/knowledge-bases/{kb_id}/documents/{document_id}"
    ),
    "get_document_content": Operation(
        "GET", "/api/v1/knowledge-bases/{kb_id}/documents/{document_id}/content"
    ),
    "list_document_chunks": Operation(
        "GET", "/api/v1/knowledge-bases/{kb_id}/documents/{document_id}/chunks"
    ),
    "reindex_document": Operation(
        "POST", "/api/v1/knowledge-bases/{kb_id}/documents/{document_id}/reindex"
    ),
    # evaluations
    "list_evaluations": Operation("GET", "/api/v1/knowledge-bases/{kb_id}/evaluations"),
    "evaluate": Operation("POST", "/api/v1/knowledge-bases/{kb_id}/evaluations"),
    "get_evaluation": Operation(
        "GET", "/api/v1/knowledge-bases/{kb_id}/evaluations/{evaluation_id}"
    ),
    "apply_evaluation": Operation(
        "POST", "/api/v1/knowledge-bases/{kb_id}/evaluations/{evaluation_id}/apply"
    ),
    # bots
    "list_bots": Operation("GET", "/api/v1/bots"),
    "create_bot": Operation("POST", "/api/v1/bots"),
    "get_bot": Operation("GET", "/api/v1/bots/{bot_id}"),
    "update_bot": Operation("PATCH", "/api/v1/bots/{bot_id}"),
    "delete_bot": Operation("DELETE", "/api/v1/bots/{bot_id}"),
    "list_bot_tokens": Operation("GET", "/api/v1/bots/{bot_id}/tokens"),
    "create_bot_token": Operation("POST", "/api/v1/bots/{bot_id}/tokens"),
    "revoke_bot_token": Operation("DELETE", "/api/v1/bots/{bot_id}/tokens/{token_id}"),
    "get_bot_tools": Operation("GET", "/api/v1/bots/{bot_id}/tools"),
    "search_as_bot": Operation("POST", "/api/v1/bots/{bot_id}/search"),
    # search
    "search": Operation("POST", "/api/v1/knowledge/search"),
    "internal_search": Operation("POST", "/api/v1/internal/knowledge/search"),
    # tokens and people
    "list_tokens": Operation("GET", "/api/v1/tokens"),
    "create_token": Operation("POST", "/api/v1/tokens"),
    "revoke_token": Operation("DELETE", "/api/v1/tokens/{token_id}"),
    "list_users": Operation("GET", "/api/v1/users"),
    "put_user": Operation("PUT", "/api/v1/users/{user_id}"),
    "list_audiences": Operation("GET", "/api/v1/audiences"),
    "put_audience": Operation("PUT", "/api/v1/audiences/{tag}"),
    "delete_audience": Operation("DELETE", "/api/v1/audiences/{tag}"),
    "put_audience_members": Operation("PUT", "/api/v1/audiences/{tag}/members"),
    # wiki pages
    "list_wiki_pages": Operation("GET", "/api/v1/knowledge/wiki"),
    "write_wiki_page": Operation("POST", "/api/v1/knowledge/wiki"),
    "read_wiki_page": Operation("GET", "/api/v1/knowledge/wiki/{topic}"),
    "delete_wiki_page": Operation("DELETE", "/api/v1/knowledge/wiki/{topic}"),
    # operations
    "list_audit_entries": Operation("GET", "/api/v1/audit"),
    "list_dead_letters": Operation("GET", "/api/v1/dead-letters"),
    "redrive_dead_letters": Operation("POST", "/api/v1/dead-letters/redrive"),
    "redrive_dead_letter": Operation("POST", "/api/v1/dead-letters/{letter_id}/redrive"),
    # crawl jobs
    "list_crawl_jobs": Operation("GET", "/api/v1/knowledge-bases/{kb_id}/crawl-jobs"),
    "start_crawl": Operation("POST", "/api/v1/knowledge-bases/{kb_id}/crawl-jobs"),
    "get_crawl_job": Operation("GET", "/api/v1/crawl-jobs/{job_id}"),
    "cancel_crawl_job": Operation("POST", "/api/v1/crawl-jobs/{job_id}/cancel"),
    # backups
    "create_backup": Operation("POST", "/api/v1/backups"),
    "restore_backup": Operation("POST", "/api/v1/restores"),
    # the vector store's generations (one per embedding model)
    "list_generations": Operation("GET", "/api/v1/generations"),
    "start_generation": Operation("POST", "/api/v1/generations"),
    "get_generation": Operation("GET", "/api/v1/generations/{number}"),
    "cancel_generation": Operation("POST", "/api/v1/generations/{number}/cancel"),
    "drop_generation": Operation("POST", "/api/v1/generations/{number}/drop"),
}


def url_of(operation: str, path_params: Mapping[str, str]) -> tuple[str, str]:
    """The operation's method and its path with `path_params` filled in (each quoted whole)."""
    found = OPERATIONS[operation]
    quoted = {name: quote(str(value), safe="") for name, value in path_params.items()}
    return found.method, found.path.format(**quoted)


def body_of(body: BaseModel | Mapping[str, Any] | None, fields: Mapping[str, Any]) -> Any:
    """A request's JSON body: `body` (a model, as its set fields, or a mapping) with `fields`
    over it; models anywhere inside are their set fields too. Nothing is checked here: the
    API answers invalid input with a 422 that names each field
    (`InvalidRequestError.field_errors`)."""
    merged = dict(_plain(body) or {})
    merged.update(_plain(dict(fields)))
    return merged


def _plain(value: Any) -> Any:
    """`value` as JSON data, each model as the fields that were set on it."""
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json", exclude_unset=True, by_alias=True)
    if isinstance(value, Mapping):
        return {key: _plain(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(item) for item in value]
    return value


def params_of(**values: Any) -> dict[str, Any]:
    """Query parameters without the ones left out (None)."""
    return {name: value for name, value in values.items() if value is not None}


def parse(model: type[ModelT], response: httpx.Response, what: str) -> ModelT:
    """The answer's JSON read into `model` (`UnexpectedResponseError` if it is not that)."""
    try:
        return model.model_validate_json(response.content)
    except ValidationError as exc:
        raise unreadable(response, what, exc) from exc


def parse_list(model: type[ModelT], response: httpx.Response, what: str) -> list[ModelT]:
    """The answer's JSON list, each item read into `model`."""
    try:
        return TypeAdapter(list[model]).validate_json(response.content)  # type: ignore[valid-type]
    except ValidationError as exc:
        raise unreadable(response, what, exc) from exc


@dataclass(frozen=True)
class RetryPolicy:
    """How often, and after how long, a request is sent again: after a 429 or 503 (waiting
    what `Retry-After` says, at most `max_wait_s`) and after a connection error (backing off
    exponentially with jitter)."""

    max_retries: int = 2
    max_wait_s: float = 60.0
    backoff_s: float = 0.5
    max_backoff_s: float = 8.0

    def after_status(self, error: RetryableStatusError, attempt: int) -> float | None:
        """Seconds to wait before sending again after this refusal, or None to give up."""
        if attempt >= self.max_retries or error.retry_after_s > self.max_wait_s:
            return None
        return max(error.retry_after_s, self.backoff(attempt))

    def after_transport_error(
        self, method: str, error: httpx.TransportError, attempt: int
    ) -> float | None:
        """Seconds to wait before sending again after no answer came, or None to give up:
        a request that may have reached the server is sent again only if it is idempotent."""
        if attempt >= self.max_retries:
            return None
        if method not in IDEMPOTENT and not isinstance(error, httpx.ConnectError):
            return None
        return self.backoff(attempt)

    def backoff(self, attempt: int) -> float:
        """The wait before retry `attempt` + 1: exponential, capped, with full jitter."""
        ceiling = min(self.max_backoff_s, self.backoff_s * 2**attempt)
        return random.uniform(ceiling / 2, ceiling)  # noqa: S311 - jitter, not a secret
