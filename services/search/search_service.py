"""The search service: the access guard, the answer cache, retrieval and result shaping."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Literal

from core.errors import RateLimited
from core.filters import SearchScope
from core.governance import Reader
from infra.knowledge_base_repository import KnowledgeBaseRepository
from infra.metrics import SEARCH_CACHE, SEARCH_LATENCY, SEARCH_REQUESTS, TENANT_REQUESTS
from infra.rate_limits import RateLimiter
from infra.search_cache import SearchCache, result_key
from infra.settings import SearchSettings
from infra.vectorstore.base import RetrievalMode
from schemas.events import ChunksRetrieved, RetrievedChunk
from schemas.search import (
    AlsoIn,
    BotSearchRequest,
    CacheHits,
    KnowledgeSearchRequest,
    SearchHit,
    SearchMetrics,
    SearchResponse,
    TenantSearchRequest,
)
from services.freshness_service import FreshnessService
from services.governance_service import PolicyService
from services.search.access import AccessGuard
from services.search.clock import Clock
from services.search.fusion import FusionMethod, FusionParams
from services.search.retrieval import Candidate, Retriever
from services.search.retrieval_events import Defer, RetrievalEvents
from services.search.shaping import Passage, assemble, newest_versions, within_budget

# Where a search came from, as its retrieval event says.
Channel = Literal["bot", "people", "mcp"]


@dataclass(frozen=True)
class Plan:
    """A search, decided: where, what, how many, how sure."""

    tenant_id: str
    kb_ids: list[str]
    # Who searches: only chunks one of these principals may read are looked at.
    reader: Reader
    query: str
    mode: RetrievalMode
    top_k: int
    threshold: float
    fusion: FusionParams
    max_context_tokens: int | None
    fallback_message: str | None
    # What else the answer depends on, for its cache key (the bot and its revision).
    identity: tuple[str, ...]
    # Who searched in which conversation, for the retrieval event (none without a session
    # or turn).
    channel: Channel = "bot"
    bot_id: str | None = None
    user_id: str | None = None
    session_id: str | None = None
    turn_id: str | None = None


class SearchService:
    """Answers the agent runtime's searches, and admin tooling's."""

    def __init__(
        self,
        guard: AccessGuard,
        kbs: KnowledgeBaseRepository,
        retriever: Retriever,
        cache: SearchCache,
        freshness: FreshnessService,
        policy: PolicyService,
        events: RetrievalEvents,
        settings: SearchSettings,
        limits: RateLimiter | None = None,
        searches_per_second: int = 200,
    ) -> None:
        self._limits = limits
        self._searches_per_second = searches_per_second
        self._policy = policy
        self._events = events
        self._guard = guard
        self._kbs = kbs
        self._retriever = retriever
        self._cache = cache
        self._freshness = freshness
        self._settings = settings

    def _fusion(self, method: str, dense_weight: float | None, rrf_k: int) -> FusionParams:
        """A search's fusion; without a dense weight, one is chosen per query."""
        settings = self._settings
        return FusionParams(
            method=FusionMethod(method),
            dense_weight=dense_weight,
            rrf_k=rrf_k,
            lead_ratio=settings.lead_ratio,
            lead_gap=settings.lead_gap,
            rare_max=settings.rare_term_documents,
            question_dense_weight=settings.question_dense_weight,
            exact_dense_weight=settings.exact_dense_weight,
            plain_dense_weight=settings.plain_dense_weight,
        )

    async def search_bot(
        self, request: BotSearchRequest, defer: Defer | None = None, channel: Channel = "bot"
    ) -> SearchResponse:
        """A bot's search, within its attached, active KBs: of what `user_id` may read, or
        without one, of what the whole tenant may read. With `defer`, what it retrieved is
        announced after the answer."""
        clock = Clock()
        with clock.step("access"):
            access, cached_access = await self._guard.for_bot(request.bot_id)
            knowledge = access.knowledge
            strict = knowledge.strict if request.strict is None else request.strict
            reader = (
                Reader.tenant_wide()
                if request.user_id is None
                else await self._policy.user(access.tenant_id, request.user_id)
            )
        plan = Plan(
            tenant_id=access.tenant_id,
            kb_ids=access.allowed(request.kb_ids),
            reader=reader,
            query=request.query.strip(),
            mode=RetrievalMode(knowledge.retrieval_mode),
            top_k=request.top_k or knowledge.top_k,
            threshold=(
                knowledge.score_threshold
                if request.score_threshold is None
                else request.score_threshold
            ),
            fusion=self._fusion(knowledge.fusion, knowledge.dense_weight, knowledge.rrf_k),
            max_context_tokens=request.max_context_tokens or knowledge.max_context_tokens,
            fallback_message=knowledge.fallback_message if strict else None,
            identity=("bot", access.bot_id, str(access.revision)),
            channel=channel,
            bot_id=access.bot_id,
            user_id=request.user_id,
            session_id=request.session_id,
            turn_id=request.turn_id,
        )
        return await self._answer(plan, clock, CacheHits(access=cached_access), defer)

    async def search_reader(
        self,
        tenant_id: str,
        reader: Reader,
        request: KnowledgeSearchRequest,
        defer: Defer | None = None,
        channel: Channel = "people",
    ) -> SearchResponse:
        """A person's search over their tenant's active KBs (those named, if any), of what
        they may read. With `defer` and a session or turn, what it retrieved is announced
        after the answer."""
        clock = Clock()
        if request.kb_ids is None:
            kb_ids = await self._kbs.all_active_ids(tenant_id)
        else:
            named = await self._kbs.ids_of(tenant_id, request.kb_ids)
            kb_ids = await self._kbs.active_ids(tenant_id, named)
        threshold = request.score_threshold
        # The searched KBs' default retrieval (an evaluation's configuration applied to them)
        # when they all have the same one, else the service's; a mode the request names wins.
        defaults = await self._kbs.default_retrievals(tenant_id, kb_ids)
        shared = defaults[0] if defaults and all(d == defaults[0] for d in defaults) else None
        plan = Plan(
            tenant_id=tenant_id,
            kb_ids=kb_ids,
            reader=reader,
            query=request.query.strip(),
            mode=RetrievalMode(
                request.retrieval_mode or ("hybrid" if shared is None else shared.retrieval_mode)
            ),
            top_k=request.top_k,
            threshold=self._settings.people_score_threshold if threshold is None else threshold,
            fusion=(
                self._fusion("convex", None, 60)
                if shared is None or shared.fusion is None
                else self._fusion(
                    shared.fusion,
                    shared.dense_weight,
                    shared.rrf_k or 60,
                )
            ),
            max_context_tokens=request.max_context_tokens,
            fallback_message=None,
            identity=("reader", tenant_id),
            channel=channel,
            user_id=reader.user_id,
            session_id=request.session_id,
            turn_id=request.turn_id,
        )
        return await self._answer(plan, clock, CacheHits(), defer)

    async def search_tenant(self, request: TenantSearchRequest) -> SearchResponse:
        """Admin tooling's search over a tenant's requested, active KBs (as an admin)."""
        clock = Clock()
        plan = Plan(
            tenant_id=request.tenant_id,
            kb_ids=await self._kbs.active_ids(request.tenant_id, request.kb_ids),
            reader=Reader.administrator(),
            query=request.query.strip(),
            mode=RetrievalMode(request.retrieval_mode),
            top_k=request.top_k,
            threshold=request.score_threshold,
            fusion=self._fusion(request.fusion, request.dense_weight, request.rrf_k),
            max_context_tokens=request.max_context_tokens,
            fallback_message=None,
            identity=("tenant", request.tenant_id),
        )
        return await self._answer(plan, clock, CacheHits())

    async def _answer(
        self, plan: Plan, clock: Clock, hits: CacheHits, defer: Defer | None = None
    ) -> SearchResponse:
        try:
            response = await self._within_rate(plan, clock, hits)
        except Exception:
            SEARCH_REQUESTS.labels("error").inc()
            raise
        finally:
            SEARCH_LATENCY.observe(time.perf_counter() - clock.started)
        SEARCH_REQUESTS.labels("hits" if response.hits else "empty").inc()
        TENANT_REQUESTS.labels(plan.tenant_id, "search").inc()
        for layer, hit in response.metrics.cache.model_dump().items():
            SEARCH_CACHE.labels(layer, "hit" if hit else "miss").inc()
        if defer is not None and (plan.session_id or plan.turn_id):
            event = ChunksRetrieved(
                tenant_id=plan.tenant_id,
                bot_id=plan.bot_id,
                user_id=plan.user_id,
                session_id=plan.session_id,
                turn_id=plan.turn_id,
                channel=plan.channel,
                query=plan.query,
                retrieval_mode=plan.mode.value,
                chunks=[RetrievedChunk.of(hit) for hit in response.hits],
                latency_ms=response.metrics.total_ms,
                cached=response.metrics.cache.result,
            )
            defer(lambda: self._events.announce(event))
        return response

    async def _within_rate(self, plan: Plan, clock: Clock, hits: CacheHits) -> SearchResponse:
        """Over its rate (per bot, person, or tenant form), a search is answered from the
        cache if it can be, else refused with when to try again."""
        if self._limits is None:
            return await self._cached_or_fresh(plan, clock, hits)
        with clock.step("limit"):
            retry = await self._limits.hit(
                "search", _rate_subject(plan), self._searches_per_second, window_s=1
            )
        if not retry:
            return await self._cached_or_fresh(plan, clock, hits)
        cached, _ = await self._cached(plan, clock, hits) if plan.kb_ids else (None, None)
        if cached is None:
            raise RateLimited("searches", retry)
        return cached

    async def _cached(
        self, plan: Plan, clock: Clock, hits: CacheHits
    ) -> tuple[SearchResponse | None, str | None]:
        """The cached answer, if any, and the cache key (None: not cacheable)."""
        with clock.step("cache"):
            key = await self._result_key(plan)
            if key is None:
                return None, None
            body = await self._cache.get_result(key)
        if body is None:
            return None, key
        with clock.step("shaping"):
            response = SearchResponse.model_validate_json(body)
        hits.result = True
        response.metrics = clock.metrics(hits)
        return response, key

    async def _cached_or_fresh(self, plan: Plan, clock: Clock, hits: CacheHits) -> SearchResponse:
        if not plan.kb_ids:
            return self._finish(plan, [], clock, hits)
        cached, key = await self._cached(plan, clock, hits)
        if cached is not None:
            return cached
        with clock.step("embedding"):
            query = await self._retriever.embed(plan.query)
        hits.embedding = query.cached
        scope = SearchScope(plan.tenant_id, tuple(plan.kb_ids), plan.reader.key)
        # Copies and neighbours fold together, so the candidates may hold fewer than top_k
        # distinct passages: then deeper candidates are fetched, up to the retrievers' depth.
        limit = plan.top_k * self._settings.oversample
        found = None
        while True:
            found = await self._retriever.retrieve(
                scope,
                plan.query,
                query.vector,
                mode=plan.mode,
                limit=limit,
                threshold=plan.threshold,
                fusion=plan.fusion,
                previous=found,
                clock=clock,
            )
            with clock.step("shaping"):
                passages = self._distinct(plan, found.candidates)
            if len(passages) >= plan.top_k or not found.more or limit >= self._settings.depth:
                break
            limit = min(limit * 3, self._settings.depth)
        response = self._finish(plan, passages, clock, hits)
        if key is not None:
            with clock.step("writes"):
                stored = response.model_copy(update={"metrics": SearchMetrics()})
                await self._cache.set_result(
                    key, stored.model_dump_json().encode(), found=bool(response.hits)
                )
            response.metrics = clock.metrics(hits)
        return response

    async def _result_key(self, plan: Plan) -> str | None:
        """The answer's cache key, or None if the KBs' revisions are not known."""
        revisions = await self._freshness.revisions(plan.kb_ids)
        if revisions is None:
            return None
        return result_key(
            [
                *plan.identity,
                plan.reader.key,
                sorted(zip(plan.kb_ids, revisions, strict=True)),
                plan.query,
                plan.mode.value,
                plan.top_k,
                plan.threshold,
                plan.fusion.method.value,
                plan.fusion.dense_weight,
                plan.fusion.rrf_k,
                plan.max_context_tokens,
                plan.fallback_message,
            ]
        )

    def _distinct(self, plan: Plan, candidates: list[Candidate]) -> list[Passage]:
        """The best distinct passages of the candidates: newest versions only, neighbours
        merged, copies folded; at most top_k."""
        newest = {id(chunk) for chunk in newest_versions([c.chunk for c in candidates])}
        passages = [
            Passage(
                payload=c.chunk.payload,
                text=c.chunk.payload.chunk_text,
                score=c.score,
                first_index=c.chunk.payload.chunk_index,
                last_index=c.chunk.payload.chunk_index,
                start=c.chunk.payload.start,
                end=c.chunk.payload.end,
                rationale=c.rationale,
                rank=rank,
            )
            for rank, c in enumerate(candidates)
            if id(c.chunk) in newest
        ]
        return assemble(
            passages,
            plan.top_k,
            copy_threshold=self._settings.duplicate_threshold,
            max_chunks=self._settings.merge_max_chunks,
        )

    def _finish(
        self,
        plan: Plan,
        passages: list[Passage],
        clock: Clock,
        cache: CacheHits,
    ) -> SearchResponse:
        with clock.step("shaping"):
            hits = [_hit(passage) for passage in within_budget(passages, plan.max_context_tokens)]
            response = SearchResponse(
                hits=hits, fallback_message=plan.fallback_message if not hits else None
            )
        response.metrics = clock.metrics(cache)
        return response


def _hit(passage: Passage) -> SearchHit:
    payload = passage.payload
    merged = passage.last_index > passage.first_index
    rationale = passage.rationale
    if merged:
        rationale += f"; chunks {passage.first_index}-{passage.last_index} merged"
    return SearchHit(
        score=round(passage.score, 6),
        chunk_text=passage.text,
        document_id=payload.document_id,
        document_title=payload.title,
        source_name=payload.source_name,
        kb_id=payload.kb_id,
        chunk_index=passage.first_index,
        page=payload.page,
        heading_path=list(payload.heading_path),
        url=payload.url or None,
        indexed_at=payload.indexed_at,
        retrieval_rationale=rationale,
        also_in=[AlsoIn(**vars(source)) for source in passage.also_in],
    )


def _rate_subject(plan: Plan) -> str:
    """Whose rate a search counts against: the bot's, the person's, or the tenant form's."""
    if plan.bot_id:
        return f"bot:{plan.bot_id}"
    if plan.user_id:
        return f"user:{plan.tenant_id}:{plan.user_id}"
    return f"tenant:{plan.tenant_id}"
