"""The composition root: the one place that builds Ragline from its settings.

Every process (the API, each stage worker, the token CLI, the benchmarks) opens a `System` and
takes what it needs from it: clients, repositories and services are built on first use, once
per process, and closed in reverse order when the process's exit stack unwinds. Nothing else
constructs a client or wires a service, so a new entry point (an MCP server, a CLI) is a few
lines over the same objects.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from contextlib import AsyncExitStack
from functools import cached_property

from faststream.kafka import KafkaBroker
from pymongo import AsyncMongoClient

from core.errors import PermanentError
from core.governance import Reader
from infra.audiences import AudienceRepository
from infra.blob_store import BlobStore
from infra.bots import BotRepository
from infra.context.base import ContextProvider
from infra.context.cache import ContextCache
from infra.context.factory import build_context_provider
from infra.crawl import CrawlRepository
from infra.dead_letters import DeadLetterRepository
from infra.documents import DocumentRepository
from infra.embedding.base import Embedder
from infra.embedding.factory import build_embedder
from infra.embedding_cache import EmbeddingCache
from infra.evaluations import EvaluationRepository
from infra.fetcher import Fetcher
from infra.kafka import kafka_publisher, kafka_sender
from infra.knowledge_bases import KnowledgeBaseRepository
from infra.lifecycle import DocumentLifecycle
from infra.mongo import Database, MongoDoc, connect
from infra.outbox import EventSender, Outbox
from infra.rate_limits import RateLimiter
from infra.search_cache import SearchCache, connect_redis
from infra.settings import Settings
from infra.sparse import SparseEncoder
from infra.tokens import TokenRepository
from infra.users import UserRepository
from infra.vectorstore.base import VectorStore
from infra.vectorstore.factory import open_vector_store
from schemas.events import Event, Publish, Send
from services.agent_tools import AgentTools
from services.bots import BotService
from services.crawl import Crawler, CrawlJobs
from services.dead_letters import DeadLetters
from services.documents import DocumentQueries
from services.evaluation import Evaluations, Evaluator
from services.freshness import SearchFreshness
from services.governance import ItemGovernance, ItemPolicy
from services.intake import Intake
from services.knowledge_bases import KnowledgeBaseService
from services.people import PeopleService, TokenService
from services.removal import Removal, retire_document
from services.search.access import AccessGuard
from services.search.events import RetrievalEvents
from services.search.retrieval import Feedback, Retriever
from services.search.service import SearchService
from services.sync import SourceSync
from services.wiki import WikiService


class System:
    """Ragline's objects for one process, built on first use and closed with `stack`.

    `broker` is the process's Kafka broker (publishing needs one); the process starts it.
    """

    def __init__(
        self, settings: Settings, stack: AsyncExitStack, broker: KafkaBroker | None = None
    ) -> None:
        self.settings = settings
        self._stack = stack
        self._broker = broker
        self._embedder: Embedder | None = None
        self._store: VectorStore | None = None
        self._context_provider: ContextProvider | None = None
        self._context_provider_built = False

    def on_close(self, close: Callable[[], Awaitable[object]]) -> None:
        """Runs `close` when the process's exit stack unwinds (with the clients, in reverse
        order of registration)."""
        self._stack.push_async_callback(close)

    # --- clients ------------------------------------------------------------------------------

    @cached_property
    def mongo(self) -> AsyncMongoClient[MongoDoc]:
        """The MongoDB client."""
        client = connect(self.settings.mongo)
        self._stack.push_async_callback(client.close)
        return client

    @cached_property
    def db(self) -> Database:
        """Ragline's database."""
        return self.mongo[self.settings.mongo.database]

    @cached_property
    def search_cache(self) -> SearchCache:
        """The Redis caches of search."""
        cache = SearchCache(connect_redis(self.settings.redis), self.settings.search)
        self._stack.push_async_callback(cache.close)
        return cache

    @property
    def broker(self) -> KafkaBroker:
        """The process's Kafka broker."""
        if self._broker is None:
            raise RuntimeError("this process was opened without a Kafka broker")
        return self._broker

    @cached_property
    def publish(self) -> Publish:
        """Publishes pipeline events through the process's broker (looked up when used, so a
        process without one can still build services that never publish)."""

        async def publish(events: Sequence[Event]) -> None:
            await kafka_publisher(self.broker)(events)

        return publish

    @cached_property
    def send(self) -> Send:
        """Sends one encoded message through the process's broker (looked up when used)."""

        async def send(topic: str, key: bytes, value: bytes) -> None:
            await kafka_sender(self.broker)(topic, key, value)

        return send

    @cached_property
    def outbox(self) -> Outbox:
        """Pipeline events waiting for Kafka."""
        return Outbox(self.db)

    @cached_property
    def events(self) -> EventSender:
        """Sends outbox entries at once (the relay sends what Kafka refused)."""
        return EventSender(self.outbox, self.send, self.settings.kafka.send_timeout_s)

    @cached_property
    def dead_letter_records(self) -> DeadLetterRepository:
        """Messages stages gave up on."""
        return DeadLetterRepository(self.db)

    @cached_property
    def dead_letters(self) -> DeadLetters:
        """Lists and re-drives dead letters."""
        return DeadLetters(self.dead_letter_records, self.intake, self.events)

    async def open_embedder(self) -> Embedder:
        """Loads the embedding model (once; its dimensions checked against the settings)."""
        if self._embedder is None:
            embedder = await asyncio.to_thread(
                build_embedder, self.settings.embedding, self.settings.run_dir
            )
            if embedder.dimensions != self.settings.embedding.dimensions:
                raise PermanentError(
                    f"the embedding model makes {embedder.dimensions}-dimensional vectors; set "
                    f"RAGLINE_EMBEDDING__DIMENSIONS={embedder.dimensions}"
                )
            self._embedder = embedder
        return self._embedder

    async def open_vector_store(self) -> VectorStore:
        """Opens the vector store (once; with the embedded engine only one process may)."""
        if self._store is None:
            store = await open_vector_store(self.settings)
            self._stack.push_async_callback(store.close)
            self._store = store
        return self._store

    @property
    def embedder(self) -> Embedder:
        """The embedding model (`open_embedder` first)."""
        if self._embedder is None:
            raise RuntimeError("the embedding model is used before it was loaded")
        return self._embedder

    @property
    def store(self) -> VectorStore:
        """The vector store (`open_vector_store` first)."""
        if self._store is None:
            raise RuntimeError("the vector store is used before it was opened")
        return self._store

    def context_provider(self) -> ContextProvider | None:
        """The language model that writes chunk contexts, if one is configured."""
        if not self._context_provider_built:
            self._context_provider = build_context_provider(self.settings.contextual)
            if self._context_provider is not None:
                self._stack.push_async_callback(self._context_provider.close)
            self._context_provider_built = True
        return self._context_provider

    # --- repositories -------------------------------------------------------------------------

    @cached_property
    def documents(self) -> DocumentRepository:
        """Documents and their pipeline status."""
        return DocumentRepository(self.db, self.settings.ingest.parse_error_max_chars)

    @cached_property
    def kbs(self) -> KnowledgeBaseRepository:
        """Knowledge-base records."""
        return KnowledgeBaseRepository(self.db)

    @cached_property
    def bots(self) -> BotRepository:
        """Bot records."""
        return BotRepository(self.db)

    @cached_property
    def tokens(self) -> TokenRepository:
        """API tokens (and the bootstrap admin token of the settings)."""
        return TokenRepository(
            self.db, self.settings.admin_token.get_secret_value(), self.settings.bootstrap_tenant
        )

    @cached_property
    def users(self) -> UserRepository:
        """The tenants' users."""
        return UserRepository(self.db)

    @cached_property
    def audiences(self) -> AudienceRepository:
        """The tenants' audiences and their members."""
        return AudienceRepository(self.db)

    @cached_property
    def blobs(self) -> BlobStore:
        """Originals and extracted text."""
        return BlobStore(self.db)

    @cached_property
    def lifecycle(self) -> DocumentLifecycle:
        """Changes spanning a document, its KB's counts and its version line."""
        return DocumentLifecycle(self.mongo, self.db, self.outbox)

    @cached_property
    def embedding_cache(self) -> EmbeddingCache:
        """Chunk vectors already computed, by model and text."""
        return EmbeddingCache(self.db)

    @cached_property
    def context_cache(self) -> ContextCache:
        """Chunk contexts already written, by provider and text."""
        return ContextCache(self.db)

    # --- services -----------------------------------------------------------------------------

    @cached_property
    def freshness(self) -> SearchFreshness:
        """The owner of KB revisions and bots' cached access."""
        return SearchFreshness(self.search_cache, self.kbs, self.bots)

    @cached_property
    def policy(self) -> ItemPolicy:
        """Who a caller is as a reader; who owns and may read what is added."""
        return ItemPolicy(self.users, self.audiences)

    @cached_property
    def item_governance(self) -> ItemGovernance:
        """Changes of items' ownership and visibility (vector store included)."""
        return ItemGovernance(self.policy, self.documents, self.kbs, self.store, self.freshness)

    @cached_property
    def token_service(self) -> TokenService:
        """Issuing, listing and revoking API tokens."""
        return TokenService(self.tokens, self.users, self.bots)

    @cached_property
    def people(self) -> PeopleService:
        """Users and audiences."""
        return PeopleService(self.users, self.audiences)

    @cached_property
    def wiki(self) -> WikiService:
        """Wiki pages."""
        return WikiService(self.documents, self.kbs, self.intake, self.removal, self.blobs)

    @cached_property
    def intake(self) -> Intake:
        """Uploads, texts and records into the pipeline."""
        return Intake(
            self.documents,
            self.kbs,
            self.lifecycle,
            self.blobs,
            self.events,
            self.freshness,
            self.policy,
            self.settings.ingest.max_upload_bytes,
            self.rate_limiter,
            self.settings.limits.uploads_per_minute,
        )

    @cached_property
    def removal(self) -> Removal:
        """Deletes documents and KBs (from the vector store first)."""
        return Removal(
            self.documents, self.kbs, self.lifecycle, self.blobs, self.store, self.freshness
        )

    @cached_property
    def source_sync(self) -> SourceSync:
        """Full syncs of a source (connectors, crawls), deleting what they drop at once."""
        return SourceSync(self.intake, self.documents, self.removal.delete_document)

    @cached_property
    def retiring_source_sync(self) -> SourceSync:
        """Full syncs in a process without the vector store: what they drop is retired, and
        the API process finishes the deletes (`Removal.sweep`)."""

        async def retire(tenant_id: str, kb_id: str, document_id: str, reader: Reader) -> None:
            await retire_document(self.documents, tenant_id, kb_id, document_id, reader)

        return SourceSync(self.intake, self.documents, retire)

    @cached_property
    def crawl_jobs_repository(self) -> CrawlRepository:
        """Crawl jobs, their frontiers and page states."""
        return CrawlRepository(self.mongo, self.db, self.outbox)

    @cached_property
    def crawl_jobs(self) -> CrawlJobs:
        """Starts, lists and cancels crawls."""
        return CrawlJobs(self.crawl_jobs_repository, self.kbs, self.events, self.settings.crawl)

    def open_crawler(self) -> Crawler:
        """The crawl worker's logic, with an HTTP client closed with the process."""
        fetcher = Fetcher(self.settings.crawl)
        self._stack.push_async_callback(fetcher.close)
        return Crawler(
            self.crawl_jobs_repository,
            self.documents,
            self.intake,
            self.blobs,
            self.retiring_source_sync,
            fetcher,
            self.events,
        )

    @cached_property
    def knowledge_bases(self) -> KnowledgeBaseService:
        """KB administration."""
        return KnowledgeBaseService(self.kbs, self.removal, self.freshness)

    @cached_property
    def bot_admin(self) -> BotService:
        """Bot administration."""
        return BotService(self.bots, self.kbs, self.freshness)

    @cached_property
    def document_queries(self) -> DocumentQueries:
        """What admins see of documents."""
        return DocumentQueries(
            self.documents, self.kbs, self.store, self.blobs, self.settings.ingest.stall_after_s
        )

    @cached_property
    def search(self) -> SearchService:
        """Search: access guard, answer cache, hybrid retrieval, result shaping."""
        search = self.settings.search
        retriever = Retriever(
            self.embedder,
            self.store,
            self.search_cache,
            SparseEncoder(),
            search.depth,
            feedback=Feedback(
                search.feedback_chunks, search.feedback_min_chunks, search.feedback_weight
            ),
        )
        return SearchService(
            self.access_guard,
            self.kbs,
            retriever,
            self.search_cache,
            self.freshness,
            self.policy,
            self.retrieval_events,
            self.settings.search,
            self.rate_limiter,
            self.settings.limits.searches_per_second,
        )

    @cached_property
    def rate_limiter(self) -> RateLimiter:
        """Request rates counted in Redis (shared by every API process)."""
        client = connect_redis(self.settings.redis)
        self._stack.push_async_callback(client.aclose)
        return RateLimiter(client)

    @cached_property
    def retrieval_events(self) -> RetrievalEvents:
        """Announces what searches of a session retrieved (through the process's broker)."""
        return RetrievalEvents(self.send)

    @cached_property
    def access_guard(self) -> AccessGuard:
        """Which KBs a bot may search (through the access cache)."""
        return AccessGuard(self.bots, self.kbs, self.freshness)

    @cached_property
    def agent_tools(self) -> AgentTools:
        """The tools agents call (MCP, function calling)."""
        return AgentTools(self.search, self.access_guard, self.policy, self.kbs, self.wiki)

    @cached_property
    def evaluations(self) -> Evaluations:
        """Retrieval evaluations of a KB."""
        return Evaluations(
            self.kbs,
            self.documents,
            Evaluator(self.search),
            EvaluationRepository(self.db),
            self.bot_admin,
            self.knowledge_bases,
        )
