"""A small synchronous client of the Ragline HTTP API; every failure is a typed error."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import httpx

from ragline_cli.config import Config
from ragline_cli.errors import ApiError, ApiUnreachable, RateLimited, UnreadableFile, api_error
from ragline_cli.models import (
    ApiModel,
    Applied,
    Document,
    DocumentPage,
    Evaluation,
    IssuedToken,
    KnowledgeBase,
    Restored,
    SearchResult,
    TokenInfo,
    UnexpectedAnswer,
)

USER_AGENT = "ragline-cli/0.1.0"
# How long one request may wait out 429s (as Retry-After says) before giving up.
RATE_LIMIT_WAIT_S = 120.0
PAGE_SIZE = 200
# A backup or restore: the API bounds its own work (`api.bulk_request_timeout_s`).
BACKUP_TIMEOUT_S = 600.0

Model = TypeVar("Model", bound=ApiModel)


@dataclass(frozen=True)
class Upload:
    """What the API did with an uploaded file: a new document (202) or the document that
    already holds these bytes (200)."""

    document: Document
    already_there: bool


def _detail(response: httpx.Response) -> str:
    """The API's error message (`detail`), or the start of whatever else came back."""
    try:
        body = response.json()
    except ValueError:
        body = None
    if isinstance(body, dict) and isinstance(body.get("detail"), str):
        return str(body["detail"])
    if isinstance(body, dict) and body.get("detail") is not None:
        return json.dumps(body["detail"])
    text = " ".join(response.text.split())
    return text[:300] or response.reason_phrase or "no message"


def _retry_after(response: httpx.Response) -> float:
    try:
        return max(0.5, float(response.headers.get("retry-after", "1")))
    except ValueError:
        return 1.0


def _parse(model: type[Model], data: Any, what: str) -> Model:
    try:
        return model.from_json(data)
    except UnexpectedAnswer as exc:
        raise ApiError(200, f"unexpected answer to {what}: {exc}") from exc


class Client:
    """Calls the API at the configured URL with the configured bearer token."""

    def __init__(
        self,
        config: Config,
        *,
        timeout_s: float = 60.0,
        rate_limit_wait_s: float = RATE_LIMIT_WAIT_S,
        on_wait: Callable[[str, float], None] = lambda detail, wait_s: None,
    ) -> None:
        self.config = config
        self._rate_limit_wait_s = rate_limit_wait_s
        self._on_wait = on_wait
        self._http = httpx.Client(
            base_url=config.url.value,
            timeout=timeout_s,
            headers={
                "Authorization": f"Bearer {config.token.value}",
                "User-Agent": USER_AGENT,
            },
        )

    def close(self) -> None:
        """Closes the connection pool."""
        self._http.close()

    def _request(
        self,
        method: str,
        path: str,
        *,
        json_body: Any = None,
        params: dict[str, Any] | None = None,
        upload: tuple[str, Path] | None = None,
        timeout_s: float | None = None,
    ) -> httpx.Response:
        """Sends a request, waiting out 429s as the API says (for `rate_limit_wait_s` in all);
        raises the typed error of any other error status or of no answer."""
        waited_s = 0.0
        while True:
            with ExitStack() as files:
                extra: dict[str, Any] = {}
                if upload is not None:
                    name, local = upload
                    try:
                        handle = files.enter_context(local.open("rb"))
                    except OSError as exc:
                        raise UnreadableFile(f"cannot read {local}: {exc.strerror}") from exc
                    extra["files"] = {"file": (name, handle, "application/octet-stream")}
                if timeout_s is not None:
                    extra["timeout"] = timeout_s
                try:
                    response = self._http.request(
                        method, path, json=json_body, params=params, **extra
                    )
                except httpx.TimeoutException as exc:
                    raise ApiUnreachable(
                        f"the API at {self.config.url.value} did not answer in time"
                    ) from exc
                except httpx.HTTPError as exc:
                    raise ApiUnreachable(
                        f"cannot reach the API at {self.config.url.value}: {exc}"
                    ) from exc
            if response.status_code == 429:
                wait_s = _retry_after(response)
                if waited_s + wait_s <= self._rate_limit_wait_s:
                    self._on_wait(_detail(response), wait_s)
                    time.sleep(wait_s)
                    waited_s += wait_s
                    continue
                raise RateLimited(429, _detail(response), wait_s)
            if response.status_code >= 400:
                raise api_error(response.status_code, _detail(response))
            return response

    def _download(self, path: str, dest: Path, *, params: dict[str, Any], timeout_s: float) -> None:
        """POSTs to `path` and streams the answer's body into `dest` (no 429 waits: a backup
        is not rate-limited)."""
        try:
            with self._http.stream("POST", path, params=params, timeout=timeout_s) as response:
                if response.status_code >= 400:
                    response.read()
                    raise api_error(response.status_code, _detail(response))
                with dest.open("wb") as out:
                    for block in response.iter_bytes():
                        out.write(block)
        except httpx.TimeoutException as exc:
            raise ApiUnreachable(
                f"the API at {self.config.url.value} did not answer in time"
            ) from exc
        except httpx.HTTPError as exc:
            raise ApiUnreachable(f"cannot reach the API at {self.config.url.value}: {exc}") from exc

    def _json(self, method: str, path: str, **kwargs: Any) -> Any:
        response = self._request(method, path, **kwargs)
        try:
            return response.json()
        except ValueError as exc:
            raise ApiError(
                response.status_code, f"the answer to {method} {path} is not JSON: is this Ragline?"
            ) from exc

    def _model(self, model: type[Model], method: str, path: str, **kwargs: Any) -> Model:
        return _parse(model, self._json(method, path, **kwargs), f"{method} {path}")

    def _models(self, model: type[Model], method: str, path: str, key: str) -> list[Model]:
        body = self._json(method, path)
        items = body.get(key) if isinstance(body, dict) else None
        if not isinstance(items, list):
            raise ApiError(200, f"unexpected answer to {method} {path}: no {key!r} list")
        return [_parse(model, item, f"{method} {path}") for item in items]

    # Knowledge bases

    def create_kb(self, body: dict[str, Any]) -> KnowledgeBase:
        """Creates a knowledge base."""
        return self._model(KnowledgeBase, "POST", "/api/v1/knowledge-bases", json_body=body)

    def list_kbs(self) -> list[KnowledgeBase]:
        """The tenant's knowledge bases, newest first."""
        return self._models(KnowledgeBase, "GET", "/api/v1/knowledge-bases", "items")

    def kb(self, kb: str) -> KnowledgeBase:
        """One knowledge base, by id or code."""
        return self._model(KnowledgeBase, "GET", f"/api/v1/knowledge-bases/{kb}")

    # Documents

    def documents_page(
        self, kb: str, *, status: str | None = None, limit: int = PAGE_SIZE, cursor: str | None
    ) -> DocumentPage:
        """One page of the KB's documents, newest first."""
        params: dict[str, Any] = {"limit": limit}
        if status:
            params["status"] = status
        if cursor:
            params["cursor"] = cursor
        path = f"/api/v1/knowledge-bases/{kb}/documents"
        return self._model(DocumentPage, "GET", path, params=params)

    def documents(self, kb: str, *, status: str | None = None) -> Iterator[Document]:
        """Every document of the KB the token may see, newest first, page by page."""
        cursor: str | None = None
        while True:
            page = self.documents_page(kb, status=status, cursor=cursor)
            yield from page.items
            if not page.next_cursor:
                return
            cursor = page.next_cursor

    def document(self, kb: str, document_id: str) -> Document:
        """One document with its status."""
        return self._model(Document, "GET", f"/api/v1/knowledge-bases/{kb}/documents/{document_id}")

    def upload(self, kb: str, path: Path, name: str) -> Upload:
        """Uploads a file under `name`."""
        url = f"/api/v1/knowledge-bases/{kb}/documents"
        response = self._request("POST", url, upload=(name, path), timeout_s=300)
        try:
            body = response.json()
        except ValueError as exc:
            raise ApiError(response.status_code, f"the answer to POST {url} is not JSON") from exc
        document = _parse(Document, body, f"POST {url}")
        return Upload(document, already_there=response.status_code == 200)

    def reindex(self, kb: str, document_id: str) -> Document:
        """Runs the pipeline again on a document's stored original."""
        path = f"/api/v1/knowledge-bases/{kb}/documents/{document_id}/reindex"
        return self._model(Document, "POST", path)

    # Search, tokens, evaluations

    def search(self, body: dict[str, Any]) -> list[SearchResult]:
        """A person's search with this token."""
        answer = self._json("POST", "/api/v1/knowledge/search", json_body=body)
        results = answer.get("results") if isinstance(answer, dict) else None
        if not isinstance(results, list):
            raise ApiError(200, "unexpected answer to the search: no results list")
        return [_parse(SearchResult, result, "the search") for result in results]

    def issue_token(self, body: dict[str, Any]) -> IssuedToken:
        """Issues a token of the caller's tenant."""
        return self._model(IssuedToken, "POST", "/api/v1/tokens", json_body=body)

    def tokens(self) -> list[TokenInfo]:
        """The tenant's tokens, without secrets."""
        return self._models(TokenInfo, "GET", "/api/v1/tokens", "items")

    def revoke_token(self, token_id: str) -> None:
        """Revokes a token."""
        self._request("DELETE", f"/api/v1/tokens/{token_id}")

    def backup(self, scope: str, dest: Path) -> None:
        """Takes a snapshot (`tenant` or `deployment`) and writes its tar to `dest`."""
        self._download("/api/v1/backups", dest, params={"scope": scope}, timeout_s=BACKUP_TIMEOUT_S)

    def restore(self, scope: str, archive: Path) -> Restored:
        """Sends a snapshot's tar to be restored (`tenant` or `deployment`)."""
        return self._model(
            Restored,
            "POST",
            "/api/v1/restores",
            params={"scope": scope},
            upload=("snapshot.tar", archive),
            timeout_s=BACKUP_TIMEOUT_S,
        )

    def evaluate(self, kb: str, body: dict[str, Any]) -> Evaluation:
        """Runs an evaluation of the KB (every case in every mode: it may take a while)."""
        path = f"/api/v1/knowledge-bases/{kb}/evaluations"
        return self._model(Evaluation, "POST", path, json_body=body, timeout_s=900)

    def apply_evaluation(self, kb: str, evaluation_id: str, body: dict[str, Any]) -> Applied:
        """Applies a configuration the evaluation measured to a bot or as the KB's default."""
        path = f"/api/v1/knowledge-bases/{kb}/evaluations/{evaluation_id}/apply"
        return self._model(Applied, "POST", path, json_body=body)
