"""LlamaIndex's retriever of Ragline: `RaglineRetriever`. It needs the `llama-index` extra
(`pip install 'ragline-client[llama-index]'`); the client alone imports nothing of
LlamaIndex, and importing this module without it raises an `ImportError` that says what to
install."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from ragline_client._async.client import AsyncRagline, RetrievalMode
from ragline_client._sync.client import Ragline
from ragline_client.hits import hit_metadata, passage_id
from ragline_client.models import KnowledgeSearchResponse

try:
    from llama_index.core.callbacks import CallbackManager
    from llama_index.core.retrievers import BaseRetriever
    from llama_index.core.schema import (
        NodeRelationship,
        NodeWithScore,
        QueryBundle,
        RelatedNodeInfo,
        TextNode,
    )
except ModuleNotFoundError as missing:
    if (missing.name or "").partition(".")[0] != "llama_index":
        raise
    raise ImportError(
        "ragline_client.llama_index needs LlamaIndex (llama-index-core), which is not "
        "installed: pip install 'ragline-client[llama-index]'"
    ) from missing

# The metadata a model is shown with the passage; the ids, score and place are for code.
_SHOWN_TO_MODELS = frozenset({"title", "citation", "url"})
_RETRIEVAL_MODES = frozenset({"dense", "sparse", "hybrid"})


class RaglineRetriever(BaseRetriever):
    """Ragline's search as a LlamaIndex retriever: the `k` passages that best answer a query,
    among what the client's token may read, as scored text nodes, best first.

    What may be found is the token's: a person's token searches what that person may read
    in their tenant (the KBs of `kb_ids`, by id or code, else all of them); a bot's token
    searches the bot's own KBs with the bot's settings (`k` at most 10, no
    `retrieval_mode`). A refusal raises the client's typed error:
    `ragline_client.AuthenticationError` for a bad token, `ragline_client.InvalidRequestError`
    for a setting the API does not accept.

    Each result is a `NodeWithScore` whose `score` is the search's (0 to 1) and whose node is
    a `TextNode`: its text is the passage, its id `"{document_id}:{chunk_index}"` (a passage
    found by two searches has one id), its source (`ref_doc_id`) the document, and its
    `metadata` holds:

    - `document_id` and `kb_id`: the document and knowledge base the passage is from;
    - `title`, `citation` (ready to show under an answer), `heading_path` (a list, empty
      when the passage is under no heading), `page` and `url` (None when the document has
      none) and `chunk_index` (the passage's place in its document);
    - `score` (0 to 1) and `retrieval_rationale` (why the search kept it).

    Of the metadata, a model is shown `title`, `citation` and `url` (when there is one) with
    the passage (`MetadataMode.LLM`); the rest are for code. The retriever uses none of
    LlamaIndex's tokenizers, NLTK data or models, so it downloads nothing.

    `retrieve` and `aretrieve` both work with a `Ragline` (sync) client: `aretrieve` runs its
    call in a worker thread, so the event loop is never blocked. An `AsyncRagline` client
    serves `aretrieve` only: `retrieve` raises `RuntimeError`, since the client's connections
    belong to the event loop that opened them and a loop made for one call would leave them
    unusable; use a `Ragline` client in sync code.

    Args:
        client: A `Ragline` or `AsyncRagline`, whose token decides what may be found.
        k: How many passages to return at most (the search's `top_k`; a bot's token allows
            10).
        kb_ids: The knowledge bases to search, by id or code; None: every one the token may
            read (a bot's: its own).
        retrieval_mode: `dense`, `sparse` or `hybrid`; None: the KBs' default (a bot's token
            must leave it None: a bot searches in its own mode).
        score_threshold: Least cosine similarity of a passage, 0 to 1 (exact keyword matches
            are kept in hybrid mode); None: the deployment's default for a person, the bot's
            own for a bot.
        callback_manager: LlamaIndex's callback manager of the retriever's events (a new
            one when None).
        verbose: LlamaIndex's verbose flag.

    Each setting is an attribute of the same name, read at every search.

    Example:
        ```python
        from ragline_client import Ragline
        from ragline_client.llama_index import RaglineRetriever

        ragline = Ragline(base_url="http://127.0.0.1:8000", token="rl_...")
        retriever = RaglineRetriever(client=ragline, k=4, kb_ids=["handbook"])
        for found in retriever.retrieve("how long do refunds take?"):
            print(found.score, found.node.metadata["citation"], found.node.get_content())
        ```
    """

    def __init__(
        self,
        client: Ragline | AsyncRagline,
        k: int = 5,
        *,
        kb_ids: Sequence[str] | None = None,
        retrieval_mode: RetrievalMode | None = None,
        score_threshold: float | None = None,
        callback_manager: CallbackManager | None = None,
        verbose: bool = False,
    ) -> None:
        if not isinstance(client, Ragline | AsyncRagline):
            raise TypeError(f"client must be a Ragline or an AsyncRagline, not {client!r}")
        if isinstance(k, bool) or not isinstance(k, int) or k < 1:
            raise ValueError(f"k must be a whole number of at least 1, not {k!r}")
        if isinstance(kb_ids, str):
            raise TypeError(f"kb_ids is a list of KB ids or codes, not one string: [{kb_ids!r}]")
        if retrieval_mode is not None and retrieval_mode not in _RETRIEVAL_MODES:
            raise ValueError(
                f"retrieval_mode must be dense, sparse, hybrid or None, not {retrieval_mode!r}"
            )
        if score_threshold is not None and not 0 <= score_threshold <= 1:
            raise ValueError(f"score_threshold must be between 0 and 1, not {score_threshold!r}")
        super().__init__(callback_manager=callback_manager, verbose=verbose)
        self.client = client
        self.k = k
        self.kb_ids = list(kb_ids) if kb_ids is not None else None
        self.retrieval_mode = retrieval_mode
        self.score_threshold = score_threshold

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        """The passages for the query, searched with the sync client."""
        client = self.client
        if isinstance(client, AsyncRagline):
            raise RuntimeError(
                "this RaglineRetriever has an AsyncRagline client, which searches only from "
                "async code: call `await retriever.aretrieve(query)`, or give the retriever a "
                "Ragline (sync) client to call `retriever.retrieve(query)`"
            )
        response = client.search(
            query_bundle.query_str,
            kb_ids=self.kb_ids,
            top_k=self.k,
            retrieval_mode=self.retrieval_mode,
            score_threshold=self.score_threshold,
        )
        return _nodes_of(response)

    async def _aretrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        """The passages for the query: awaited with the async client, or the sync client's
        call run in a worker thread."""
        client = self.client
        if isinstance(client, AsyncRagline):
            response = await client.search(
                query_bundle.query_str,
                kb_ids=self.kb_ids,
                top_k=self.k,
                retrieval_mode=self.retrieval_mode,
                score_threshold=self.score_threshold,
            )
        else:
            response = await asyncio.to_thread(
                client.search,
                query_bundle.query_str,
                kb_ids=self.kb_ids,
                top_k=self.k,
                retrieval_mode=self.retrieval_mode,
                score_threshold=self.score_threshold,
            )
        return _nodes_of(response)


def _nodes_of(response: KnowledgeSearchResponse) -> list[NodeWithScore]:
    """A search's results as scored text nodes, best first."""
    found: list[NodeWithScore] = []
    for hit in response.results:
        metadata = hit_metadata(hit)
        # What a model is not shown: the keys for code, and those the passage has no value of.
        hidden = [
            key for key, value in metadata.items() if key not in _SHOWN_TO_MODELS or value is None
        ]
        node = TextNode(
            id_=passage_id(hit),
            text=hit.content,
            metadata=metadata,
            excluded_llm_metadata_keys=hidden,
            excluded_embed_metadata_keys=hidden,
            relationships={NodeRelationship.SOURCE: RelatedNodeInfo(node_id=hit.source)},
        )
        found.append(NodeWithScore(node=node, score=hit.score))
    return found


__all__ = ["RaglineRetriever"]
