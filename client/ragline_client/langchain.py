"""LangChain's retriever of Ragline: `RaglineRetriever`. It needs the `langchain` extra
(`pip install 'ragline-client[langchain]'`); the client alone imports nothing of LangChain,
and importing this module without it raises an `ImportError` that says what to install."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pydantic import ConfigDict, Field

from ragline_client._async.client import AsyncRagline, RetrievalMode
from ragline_client._sync.client import Ragline
from ragline_client.hits import hit_metadata, passage_id
from ragline_client.models import KnowledgeSearchResponse

try:
    from langchain_core.callbacks import (
        AsyncCallbackManagerForRetrieverRun,
        CallbackManagerForRetrieverRun,
    )
    from langchain_core.documents import Document
    from langchain_core.retrievers import BaseRetriever
    from langchain_core.runnables.config import run_in_executor
except ModuleNotFoundError as missing:
    if (missing.name or "").partition(".")[0] != "langchain_core":
        raise
    raise ImportError(
        "ragline_client.langchain needs LangChain (langchain-core), which is not installed: "
        "pip install 'ragline-client[langchain]'"
    ) from missing

# What a call may set for itself (`retriever.invoke(query, k=2)`), over the retriever's fields.
_CALL_OPTIONS = ("k", "kb_ids", "retrieval_mode", "score_threshold")
# Keyword arguments of LangChain's own that `invoke` also hands to the retriever.
_LANGCHAIN_KWARGS = frozenset({"verbose"})


class RaglineRetriever(BaseRetriever):
    """Ragline's search as a LangChain retriever: the `k` passages that best answer a query,
    among what the client's token may read, as LangChain `Document`s, best first.

    What may be found is the token's: a person's token searches what that person may read
    in their tenant (the KBs of `kb_ids`, by id or code, else all of them); a bot's token
    searches the bot's own KBs with the bot's settings (`k` at most 10, no
    `retrieval_mode`). A refusal raises the client's typed error:
    `ragline_client.AuthenticationError` for a bad token, `ragline_client.InvalidRequestError`
    for a setting the API does not accept.

    Each document's `page_content` is the passage, its `id` is
    `"{document_id}:{chunk_index}"`, and its `metadata` holds:

    - `document_id` and `kb_id`: the document and knowledge base the passage is from;
    - `title`, `citation` (ready to show under an answer), `heading_path` (a list, empty
      when the passage is under no heading), `page` and `url` (None when the document has
      none) and `chunk_index` (the passage's place in its document);
    - `score` (0 to 1) and `retrieval_rationale` (why the search kept it).

    `k`, `kb_ids`, `retrieval_mode` and `score_threshold` may also be given to one call, over
    the retriever's own (`retriever.invoke(query, k=2, kb_ids=["faq"])`); any other argument
    is a `TypeError`.

    `invoke` and `ainvoke` both work with a `Ragline` (sync) client: `ainvoke` runs its call
    in a worker thread, so the event loop is never blocked. An `AsyncRagline` client serves
    `ainvoke` only: `invoke` raises `RuntimeError`, since the client's connections belong to
    the event loop that opened them and a loop made for one call would leave them unusable;
    use a `Ragline` client in sync code.

    Example:
        ```python
        from ragline_client import Ragline
        from ragline_client.langchain import RaglineRetriever

        ragline = Ragline(base_url="http://127.0.0.1:8000", token="rl_...")
        retriever = RaglineRetriever(client=ragline, k=4, kb_ids=["handbook"])
        for document in retriever.invoke("how long do refunds take?"):
            print(document.metadata["citation"], document.page_content)
        ```
    """

    model_config = ConfigDict(extra="forbid")

    client: Ragline | AsyncRagline
    """The client that searches: its token decides what may be found."""
    k: int = Field(default=5, ge=1)
    """How many passages to return at most (the search's `top_k`; a bot's token allows 10)."""
    kb_ids: list[str] | None = None
    """The knowledge bases to search, by id or code; None: every one the token may read (a
    bot's: its own)."""
    retrieval_mode: RetrievalMode | None = None
    """`dense`, `sparse` or `hybrid`; None: the KBs' default (a bot's token must leave it
    None: a bot searches in its own mode)."""
    score_threshold: float | None = Field(default=None, ge=0, le=1)
    """Least cosine similarity of a passage (0 to 1; exact keyword matches are kept in hybrid
    mode); None: the deployment's default for a person, the bot's own for a bot."""

    def _get_relevant_documents(
        self,
        query: str,
        *,
        run_manager: CallbackManagerForRetrieverRun,
        k: int | None = None,
        kb_ids: Sequence[str] | None = None,
        retrieval_mode: RetrievalMode | None = None,
        score_threshold: float | None = None,
        **kwargs: Any,
    ) -> list[Document]:
        """The passages for `query`, searched with the sync client; the arguments given
        override the retriever's fields for this call."""
        _refuse_unknown(kwargs)
        client = self.client
        if isinstance(client, AsyncRagline):
            raise RuntimeError(
                "this RaglineRetriever has an AsyncRagline client, which searches only from "
                "async code: call `await retriever.ainvoke(query)`, or give the retriever a "
                "Ragline (sync) client to call `retriever.invoke(query)`"
            )
        kb_ids = self._kb_ids(kb_ids)
        response = client.search(
            query,
            kb_ids=kb_ids,
            top_k=self.k if k is None else k,
            retrieval_mode=retrieval_mode or self.retrieval_mode,
            score_threshold=self.score_threshold if score_threshold is None else score_threshold,
        )
        return _documents_of(response)

    async def _aget_relevant_documents(
        self,
        query: str,
        *,
        run_manager: AsyncCallbackManagerForRetrieverRun,
        k: int | None = None,
        kb_ids: Sequence[str] | None = None,
        retrieval_mode: RetrievalMode | None = None,
        score_threshold: float | None = None,
        **kwargs: Any,
    ) -> list[Document]:
        """The passages for `query`: awaited with the async client, or the sync client's
        call run in a worker thread; the arguments given override the retriever's fields for
        this call."""
        _refuse_unknown(kwargs)
        client = self.client
        kb_ids = self._kb_ids(kb_ids)
        top_k = self.k if k is None else k
        mode = retrieval_mode or self.retrieval_mode
        threshold = self.score_threshold if score_threshold is None else score_threshold
        if isinstance(client, AsyncRagline):
            response = await client.search(
                query, kb_ids=kb_ids, top_k=top_k, retrieval_mode=mode, score_threshold=threshold
            )
        else:
            response = await run_in_executor(
                None,
                client.search,
                query,
                kb_ids=kb_ids,
                top_k=top_k,
                retrieval_mode=mode,
                score_threshold=threshold,
            )
        return _documents_of(response)

    def _kb_ids(self, given: Sequence[str] | None) -> list[str] | None:
        if isinstance(given, str):
            raise TypeError(f"kb_ids is a list of KB ids or codes, not one string: [{given!r}]")
        return list(given) if given is not None else self.kb_ids


def _documents_of(response: KnowledgeSearchResponse) -> list[Document]:
    """A search's results as LangChain documents, best first: the passage as `page_content`,
    where it is from and how it was found as `metadata` (see `metadata_of`), and
    `"{document_id}:{chunk_index}"` as `id`."""
    return [
        Document(
            id=passage_id(hit),
            page_content=hit.content,
            metadata=hit_metadata(hit),
        )
        for hit in response.results
    ]


def _refuse_unknown(kwargs: dict[str, Any]) -> None:
    unknown = sorted(set(kwargs) - _LANGCHAIN_KWARGS)
    if unknown:
        raise TypeError(
            f"RaglineRetriever does not take {', '.join(unknown)}; a call may set "
            f"{', '.join(_CALL_OPTIONS)}"
        )


__all__ = ["RaglineRetriever"]
