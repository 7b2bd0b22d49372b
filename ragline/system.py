"""The composition root: the one place that builds Ragline from its settings.

Every process (the API, the MCP server, each worker, the token CLI, the benchmarks) opens a
`System` and takes what it needs as plain, typed attributes, built on first use
(`cached_property`) and closed in reverse order when the process's exit stack unwinds. The two
that take a slow start are opened once first: the live generation's embedding model (`await
open_embedder()`; after that, `encoders` holds it) and the vector store (`await
open_vector_store()`, then `store`). Repositories
are `xxx_repo` (`infra/mongo/xxx_repository.py`), services `xxx_service`
(`services/<area>_service.py`); the rule and the layout are in docs/layout.md. The HTTP layer
and the MCP server read their services through `api.state.Services`, which this class
satisfies.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from contextlib import AsyncExitStack
from functools import cached_property

from faststream.kafka import KafkaBroker
from pymongo import AsyncMongoClient

from core.governance import Reader
from core.sparse import SparseEncoder
from infra.context.base import ContextProvider
from infra.context.factory import build_context_provider
from infra.embedding.base import Embedder
from infra.embedding.encoders import Encoders
from infra.kafka.client import kafka_publisher, kafka_sender
from infra.mongo.audience_repository import AudienceRepository
from infra.mongo.audit_repository import AuditRepository
from infra.mongo.blob_store import BlobStore
from infra.mongo.bot_repository import BotRepository
from infra.mongo.broker_epoch import BrokerEpoch
from infra.mongo.client import Database, MongoDoc, connect
from infra.mongo.context_cache import ContextCache
from infra.mongo.crawl_repository import CrawlRepository
from infra.mongo.dead_letter_repository import DeadLetterRepository
from infra.mongo.document_repository import DocumentRepository
from infra.mongo.embedding_cache import EmbeddingCache
from infra.mongo.evaluation_repository import EvaluationRepository
from infra.mongo.generation_repository import GenerationRepository
from infra.mongo.knowledge_base_repository import KnowledgeBaseRepository
from infra.mongo.lifecycle import DocumentLifecycle
from infra.mongo.outbox import EventSender, Outbox
from infra.mongo.snapshot import MongoSnapshot
from infra.mongo.token_repository import TokenRepository
from infra.mongo.user_repository import UserRepository
from infra.redis.rate_limits import RateLimiter
from infra.redis.search_cache import SearchCache, connect_redis
from infra.settings import Settings
from infra.vectorstore.base import VectorStore
from infra.vectorstore.factory import open_generation_store
from infra.vectorstore.generational import GenerationalStore
from schemas.events import Event, Publish, Send
from schemas.index_generations import IndexGeneration
from services.agent_tool_service import AgentToolService
from services.backup_service import BackupService
from services.bot_service import BotService
from services.crawl_service import CrawlJobService
from services.dead_letter_service import DeadLetterService
from services.document_service import DocumentService
from services.evaluation_service import EvaluationService, Evaluator
from services.freshness_service import FreshnessService
from services.generations.generation_service import GenerationService
from services.generations.migration import Migrator
from services.generations.models import FilledModels
from services.generations.watch import GenerationWatch
from services.governance_service import GovernanceService
from services.intake_service import IntakeService
from services.knowledge_base_service import KnowledgeBaseService
from services.people_service import PeopleService
from services.policy_service import PolicyService
from services.recovery_service import ReconcilerService
from services.relay_service import RelayService
from services.removal_service import RemovalService, retire_document
from services.search.access import AccessGuard
from services.search.retrieval import Feedback, Retriever
from services.search.retrieval_events import RetrievalEvents
from services.search.retrievers import Retrievers
from services.search.search_service import SearchService
from services.sync_service import SyncService
from services.token_service import TokenService
from services.wiki_service import WikiService


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
        self._store: GenerationalStore | None = None

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
            await kafka_publisher(self.broker, self.settings.kafka.publish_timeout_s)(events)

        return publish

    @cached_property
    def send(self) -> Send:
        """Sends one encoded message through the process's broker (looked up when used)."""

        async def send(topic: str, key: bytes, value: bytes) -> None:
            await kafka_sender(self.broker, self.settings.kafka.publish_timeout_s)(
                topic, key, value
            )

        return send

    @cached_property
    def outbox(self) -> Outbox:
        """Pipeline events waiting for Kafka."""
        return Outbox(self.db)

    @cached_property
    def broker_epoch(self) -> BrokerEpoch:
        """Which life of the Kafka broker the pipeline is in."""
        return BrokerEpoch(self.db)

    @cached_property
    def events(self) -> EventSender:
        """Sends outbox entries at once (the relay sends what Kafka refused)."""
        sender = EventSender(self.outbox, self.send, self.settings.kafka.send_timeout_s)
        self.on_close(sender.forgotten)
        return sender

    async def open_embedder(self) -> Embedder:
        """Loads the live generation's embedding model (once), whatever model the settings
        name (`services.generations.watch`). On a deployment with no generation yet, the
        configured model is loaded first (its vector size checked against the settings) and
        recorded as the first generation's."""
        if self._embedder is None:
            if not self.generation_watch.started and await self.generation_repo.kept() is None:
                await self.encoders.get(self.settings.embedding.identity)
            view = await self.generation_watch.start()
            self._embedder = await self.encoders.get(view.live.model)
        return self._embedder

    async def open_vector_store(self) -> GenerationalStore:
        """Opens the vector store, every generation's (once; with the embedded engine only
        one process may)."""
        if self._store is None:
            await self.generation_watch.start()
            settings = self.settings

            async def open_store(generation: IndexGeneration) -> VectorStore:
                return await open_generation_store(settings, generation)

            store = GenerationalStore(self.generation_watch, open_store)
            await store.ensure_collection()
            self._stack.push_async_callback(store.close)
            self._store = store
        return self._store

    @cached_property
    def generation_repo(self) -> GenerationRepository:
        """The vector store's generations, one per embedding model."""
        return GenerationRepository(self.mongo, self.db)

    @cached_property
    def generation_watch(self) -> GenerationWatch:
        """This process's view of the generations (`open_embedder` or `open_vector_store`
        starts it)."""
        generations = self.settings.generations
        return GenerationWatch(
            self.generation_repo,
            self.settings.embedding.identity,
            generations.refresh_s,
            generations.valid_s,
        )

    @cached_property
    def encoders(self) -> Encoders:
        """The embedding models this process holds, one per model."""
        encoders = Encoders(self.settings.embedding, self.settings.run_dir)
        self._stack.callback(encoders.release, (), 0.0)
        return encoders

    @cached_property
    def filled_models(self) -> FilledModels:
        """The models new chunks are embedded with (the live generation's, and a building
        one's)."""
        return FilledModels(self.generation_watch, self.encoders)

    @property
    def store(self) -> GenerationalStore:
        """The vector store (`open_vector_store` first)."""
        if self._store is None:
            raise RuntimeError("the vector store is used before it was opened")
        return self._store

    @cached_property
    def context_provider(self) -> ContextProvider | None:
        """The language model that writes chunk contexts, if one is configured."""
        provider = build_context_provider(self.settings.contextual)
        if provider is not None:
            self._stack.push_async_callback(provider.close)
        return provider

    # --- repositories -------------------------------------------------------------------------

    @cached_property
    def document_repo(self) -> DocumentRepository:
        """Documents and their pipeline status."""
        return DocumentRepository(self.db, self.settings.ingest.parse_error_max_chars)

    @cached_property
    def knowledge_base_repo(self) -> KnowledgeBaseRepository:
        """Knowledge-base records."""
        return KnowledgeBaseRepository(self.db)

    @cached_property
    def bot_repo(self) -> BotRepository:
        """Bot records."""
        return BotRepository(self.db)

    @cached_property
    def token_repo(self) -> TokenRepository:
        """API tokens (and the bootstrap admin token of the settings)."""
        return TokenRepository(
            self.db, self.settings.admin_token.get_secret_value(), self.settings.bootstrap_tenant
        )

    @cached_property
    def user_repo(self) -> UserRepository:
        """The tenants' users."""
        return UserRepository(self.db)

    @cached_property
    def audience_repo(self) -> AudienceRepository:
        """The tenants' audiences and their members."""
        return AudienceRepository(self.db)

    @cached_property
    def dead_letter_repo(self) -> DeadLetterRepository:
        """Messages stages gave up on."""
        return DeadLetterRepository(self.db)

    @cached_property
    def crawl_repo(self) -> CrawlRepository:
        """Crawl jobs, their frontiers and page states."""
        return CrawlRepository(self.mongo, self.db, self.outbox)

    @cached_property
    def audit_repo(self) -> AuditRepository:
        """Who did what through the API."""
        return AuditRepository(self.db)

    @cached_property
    def evaluation_repo(self) -> EvaluationRepository:
        """Retrieval evaluations run."""
        return EvaluationRepository(self.db)

    @cached_property
    def blobs(self) -> BlobStore:
        """Originals and extracted text."""
        return BlobStore(self.db, self.settings.ingest.carried_original_max_bytes)

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
    def freshness_service(self) -> FreshnessService:
        """The owner of KB revisions, bots' access and tenants' KBs as searches see them."""
        freshness = FreshnessService(
            self.search_cache,
            self.knowledge_base_repo,
            self.bot_repo,
            ttl_s=self.settings.search.access_ttl_s,
            answer_bytes=self.settings.search.hot_answers_mb * 2**20,
        )
        self._stack.push_async_callback(freshness.close)
        return freshness

    @cached_property
    def policy_service(self) -> PolicyService:
        """Who a caller is as a reader; who owns and may read what is added."""
        return PolicyService(self.user_repo, self.audience_repo, self.freshness_service)

    @cached_property
    def governance_service(self) -> GovernanceService:
        """Changes of items' ownership and visibility (vector store included)."""
        return GovernanceService(
            self.policy_service,
            self.document_repo,
            self.knowledge_base_repo,
            self.store,
            self.freshness_service,
        )

    @cached_property
    def token_service(self) -> TokenService:
        """Issuing, listing and revoking API tokens."""
        return TokenService(self.token_repo, self.user_repo, self.bot_repo, self.freshness_service)

    @cached_property
    def people_service(self) -> PeopleService:
        """Users and audiences."""
        return PeopleService(self.user_repo, self.audience_repo, self.freshness_service)

    @cached_property
    def wiki_service(self) -> WikiService:
        """Wiki pages."""
        return WikiService(
            self.document_repo,
            self.knowledge_base_repo,
            self.intake_service,
            self.removal_service,
            self.blobs,
        )

    @cached_property
    def intake_service(self) -> IntakeService:
        """Uploads, texts and records into the pipeline."""
        return IntakeService(
            self.document_repo,
            self.knowledge_base_repo,
            self.lifecycle,
            self.blobs,
            self.events,
            self.policy_service,
            self.settings.ingest.max_upload_bytes,
            self.rate_limiter,
            self.settings.limits.uploads_per_minute,
        )

    @cached_property
    def removal_service(self) -> RemovalService:
        """Deletes documents and KBs (from the vector store first)."""
        return RemovalService(
            self.document_repo,
            self.knowledge_base_repo,
            self.lifecycle,
            self.blobs,
            self.store,
            self.freshness_service,
        )

    @cached_property
    def sync_service(self) -> SyncService:
        """Full syncs of a source (connectors, crawls), deleting what they drop at once."""
        return SyncService(
            self.intake_service, self.document_repo, self.removal_service.delete_document
        )

    @cached_property
    def retiring_sync_service(self) -> SyncService:
        """Full syncs in a process without the vector store: what they drop is retired, and
        the API process finishes the deletes (`RemovalService.sweep`)."""

        async def retire(tenant_id: str, kb_id: str, document_id: str, reader: Reader) -> None:
            await retire_document(self.document_repo, tenant_id, kb_id, document_id, reader)

        return SyncService(self.intake_service, self.document_repo, retire)

    @cached_property
    def crawl_job_service(self) -> CrawlJobService:
        """Starts, lists and cancels crawls."""
        return CrawlJobService(
            self.crawl_repo, self.knowledge_base_repo, self.events, self.settings.crawl
        )

    @cached_property
    def knowledge_base_service(self) -> KnowledgeBaseService:
        """KB administration."""
        return KnowledgeBaseService(
            self.knowledge_base_repo, self.removal_service, self.freshness_service
        )

    @cached_property
    def bot_service(self) -> BotService:
        """Bot administration."""
        return BotService(self.bot_repo, self.knowledge_base_repo, self.freshness_service)

    @cached_property
    def document_service(self) -> DocumentService:
        """What admins see of documents."""
        return DocumentService(
            self.document_repo,
            self.knowledge_base_repo,
            self.store,
            self.blobs,
            self.settings.ingest.stall_after_s,
        )

    @cached_property
    def search_service(self) -> SearchService:
        """Search: access guard, answer cache, hybrid retrieval, result shaping."""
        search = self.settings.search
        feedback = Feedback(
            search.feedback_chunks, search.feedback_min_chunks, search.feedback_weight
        )

        def retriever(embedder: Embedder, store: VectorStore) -> Retriever:
            return Retriever(embedder, store, SparseEncoder(), search.depth, feedback=feedback)

        retrievers = Retrievers(self.store, self.encoders, retriever)
        self._stack.push_async_callback(retrievers.close)
        return SearchService(
            self.access_guard,
            self.knowledge_base_repo,
            retrievers,
            self.search_cache,
            self.freshness_service,
            self.policy_service,
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
        events = RetrievalEvents(self.send)
        self._stack.push_async_callback(events.close)
        return events

    @cached_property
    def access_guard(self) -> AccessGuard:
        """Which KBs a bot may search (through the access cache)."""
        return AccessGuard(self.bot_repo, self.knowledge_base_repo, self.freshness_service)

    @cached_property
    def agent_tool_service(self) -> AgentToolService:
        """The tools agents call (MCP, function calling)."""
        return AgentToolService(
            self.search_service,
            self.access_guard,
            self.policy_service,
            self.knowledge_base_repo,
            self.wiki_service,
        )

    @cached_property
    def evaluation_service(self) -> EvaluationService:
        """Retrieval evaluations of a KB."""
        return EvaluationService(
            self.knowledge_base_repo,
            self.document_repo,
            Evaluator(self.search_service),
            self.evaluation_repo,
            self.bot_service,
            self.knowledge_base_service,
        )

    @cached_property
    def dead_letter_service(self) -> DeadLetterService:
        """Lists and re-drives dead letters."""
        return DeadLetterService(self.dead_letter_repo, self.intake_service, self.events)

    @cached_property
    def backup_service(self) -> BackupService:
        """Snapshots of a tenant or the deployment, and their restores (vector store included)."""
        return BackupService(
            MongoSnapshot(self.mongo, self.db), self.store, self.lifecycle, self.events
        )

    @cached_property
    def generation_service(self) -> GenerationService:
        """The vector store's generations as admins see and change them."""
        return GenerationService(self.generation_repo, self.encoders)

    @cached_property
    def migrator(self) -> Migrator:
        """Builds a generation for another embedding model (in the process that writes the
        vector store: the index stage's)."""
        return Migrator(
            self.generation_repo,
            self.store,
            self.encoders,
            self.settings.generations,
        )

    @cached_property
    def relay_service(self) -> RelayService:
        """Sends the outbox's events that their writer could not send."""
        relay = self.settings.relay
        return RelayService(self.outbox, self.send, relay.batch, relay.send_after_s)

    @cached_property
    def reconciler_service(self) -> ReconcilerService:
        """Re-drives documents that stopped moving."""
        return ReconcilerService(
            self.document_repo,
            self.lifecycle,
            self.events,
            self.settings.ingest.stall_after_s,
            self.settings.relay.max_redrives,
            self.settings.relay.max_uncounted_redrives,
        )
