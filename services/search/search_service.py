"""The search service: the access guard, the answer cache, retrieval and result shaping.

One uncached search, step by step (`services.search.clock` times each):

1. access: who may search what, from the process's memory (`services.freshness_service`): the
   bot's access, the tenant's KBs, the KBs' revisions for the answer's cache key;
2. limit and cache: an answer this process holds in memory is returned at once, while its lease
   says it has every change (`FreshnessService.answer`; not counted against the rate). Else one
   round trip to Redis (`infra.redis.search_cache.SearchCache.probe`) counts the search against
   its rate and looks up the answer and the query vector, and says whether this process is
   behind on changes (then it waits for them and plans again);
3. embedding: the query's vector from the model, unless it was cached;
4. ranking: one call to the store ranks the candidates with the fields folding needs, and fusion
   orders them (`services.search.retrieval`);
5. shaping: versions, neighbours and copies decide the passages, without reading a text;
6. fetch: one read brings the chosen passages' texts (and, for a passage the dense ranking did
   not bring, a second one its vector, for its rationale's cosine); the answer's body is made
   once;
7. writes: the answer and the query vector are cached, and the retrieval event sent, after the
   answer (queued, never waited for).

A cached answer is returned as the bytes it was stored as, with its timings added, and held in
memory for the next time.
"""

from __future__ import annotations

import json
import time
from collections.abc import Awaitable, Callable, Iterator, Sequence
from dataclasses import dataclass, replace
from functools import cached_property
from typing import Literal, Protocol

import numpy as np
from numpy.typing import NDArray

from core.errors import RateLimited
from core.filters import SearchScope
from core.governance import Reader
from core.retrieval import FusionMethod, RetrievalMode
from infra.mongo.knowledge_base_repository import KnowledgeBaseRepository
from infra.process.metrics import SEARCH_CACHE, SEARCH_LATENCY, SEARCH_REQUESTS, TENANT_REQUESTS
from infra.redis.rate_limits import RateLimiter
from infra.redis.search_cache import Limit, Probe, Remembered, SearchCache, result_key
from infra.settings.search import SearchSettings
from infra.vectorstore.base import StoredChunk
from schemas.domain import KbStatus, Principal, RetrievalConfig, chunk_id
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
from services.freshness_service import FreshnessService, Kind
from services.policy_service import PolicyService
from services.search.access import AccessGuard
from services.search.clock import Clock
from services.search.fusion import FusionParams
from services.search.retrieval import Candidate, Ranked, Retriever, query_terms
from services.search.retrieval_events import RetrievalEvents
from services.search.shaping import (
    Passage,
    Piece,
    assemble,
    newest_versions,
    text_of,
    within_budget,
)

# How a cached answer is stored (its cache key says it): its body without its metrics.
ANSWER_FORMAT = "body-v2"
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


@dataclass(frozen=True)
class TenantKbs:
    """A tenant's KBs as people's searches see them: the active ones, oldest first, with their
    codes and default retrievals."""

    active: tuple[str, ...]
    by_code: dict[str, str]
    defaults: dict[str, RetrievalConfig | None]

    def named(self, refs: list[str]) -> list[str]:
        """The active KBs these ids or codes name, in order (others are dropped)."""
        return self.active_of(
            [ref if ref.startswith("kb_") else self.by_code.get(ref, "") for ref in refs]
        )

    def active_of(self, kb_ids: list[str]) -> list[str]:
        """Those of these KB ids that are active, in order, once each."""
        active = set(self.active)
        return [kb_id for kb_id in dict.fromkeys(kb_ids) if kb_id in active]


class Answer:
    """A search's answer: its body as JSON (everything but its metrics) and its metrics. Its
    hits are read from the body only when asked for: an answer from the cache is returned as
    the bytes it was stored as."""

    def __init__(
        self, body: bytes, metrics: SearchMetrics, response: SearchResponse | None = None
    ) -> None:
        self.body = body
        self.metrics = metrics
        if response is not None:
            self.__dict__["response"] = response

    @cached_property
    def response(self) -> SearchResponse:
        """The answer as a model (its metrics included)."""
        response = SearchResponse.model_validate_json(self.body)
        response.metrics = self.metrics
        return response

    @property
    def hits(self) -> list[SearchHit]:
        """The passages found, best first."""
        return self.response.hits

    @property
    def fallback_message(self) -> str | None:
        """What a strict bot should say when nothing was found."""
        return self.response.fallback_message

    def retrieved(self) -> list[RetrievedChunk]:
        """The chunks the answer names, as its retrieval event lists them (read from the body
        of an answer from the cache without validating its hits again)."""
        if "response" in self.__dict__:
            return [RetrievedChunk.of(hit) for hit in self.response.hits]
        hits = json.loads(self.body)["hits"]
        return [
            RetrievedChunk(
                chunk_id=chunk_id(hit["document_id"], hit["chunk_index"]),
                document_id=hit["document_id"],
                kb_id=hit["kb_id"],
                score=hit["score"],
            )
            for hit in hits
        ]

    def json(self) -> bytes:
        """The whole answer as JSON: the body with the metrics added."""
        metrics = self.metrics.model_dump_json().encode()
        return self.body[:-1] + b',"metrics":' + metrics + b"}"


# Plans a search, given the freshness epoch it begins with.
Planner = Callable[[int], Awaitable[tuple[Plan, CacheHits]]]


class RetrieverSource(Protocol):
    """The live generation's retriever (`services.search.retrievers.Retrievers`)."""

    async def live(self) -> tuple[int, Retriever]:
        """The live generation's number and its retriever."""
        ...


class SearchService:
    """Answers the agent runtime's searches, people's, and admin tooling's."""

    def __init__(
        self,
        guard: AccessGuard,
        kbs: KnowledgeBaseRepository,
        retrievers: RetrieverSource,
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
        self._retrievers = retrievers
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
            rare_gate=settings.rare_term_gate,
            question_dense_weight=settings.question_dense_weight,
            exact_dense_weight=settings.exact_dense_weight,
            plain_dense_weight=settings.plain_dense_weight,
        )

    async def search_bot(
        self,
        request: BotSearchRequest,
        channel: Channel = "bot",
        announce: bool = True,
        caller: Principal | None = None,
    ) -> Answer:
        """A bot's search, within its attached, active KBs: of what `user_id` may read, or
        without one, of what the whole tenant may read. With `announce` (and a session or
        turn), what it retrieved is announced after the answer. `caller`: the token's
        principal it was asked with (refused once its token is revoked)."""

        async def plan(since: int) -> tuple[Plan, CacheHits]:
            if caller is not None:
                self._freshness.check_token(caller)
            access, held = await self._guard.for_bot(request.bot_id, since)
            knowledge = access.knowledge
            strict = knowledge.strict if request.strict is None else request.strict
            reader = (
                Reader.tenant_wide()
                if request.user_id is None
                else await self._policy.user(access.tenant_id, request.user_id)
            )
            threshold = request.score_threshold
            fusion = self._fusion(knowledge.fusion, knowledge.dense_weight, knowledge.rrf_k)
            return Plan(
                tenant_id=access.tenant_id,
                kb_ids=access.allowed(request.kb_ids),
                reader=reader,
                query=request.query.strip(),
                mode=RetrievalMode(knowledge.retrieval_mode),
                top_k=request.top_k or knowledge.top_k,
                threshold=knowledge.score_threshold if threshold is None else threshold,
                fusion=fusion,
                max_context_tokens=request.max_context_tokens or knowledge.max_context_tokens,
                fallback_message=knowledge.fallback_message if strict else None,
                identity=("bot", access.bot_id, str(access.revision)),
                channel=channel,
                bot_id=access.bot_id,
                user_id=request.user_id,
                session_id=request.session_id,
                turn_id=request.turn_id,
            ), CacheHits(access=held)

        return await self._answer(plan, announce)

    async def search_reader(
        self,
        tenant_id: str,
        reader: Reader,
        request: KnowledgeSearchRequest,
        channel: Channel = "people",
        announce: bool = True,
        caller: Principal | None = None,
    ) -> Answer:
        """A person's search over their tenant's active KBs (those named, if any), of what
        they may read. With `announce` and a session or turn, what it retrieved is announced
        after the answer. `caller`: the token's principal it was asked with (refused once its
        token is revoked)."""

        async def plan(since: int) -> tuple[Plan, CacheHits]:
            if caller is not None:
                self._freshness.check_token(caller)
            tenant, held = await self._tenant_kbs(tenant_id, since)
            kb_ids = list(tenant.active) if request.kb_ids is None else tenant.named(request.kb_ids)
            threshold = request.score_threshold
            # The searched KBs' default retrieval (an evaluation's configuration applied to
            # them) when they all have the same one, else the service's; a mode the request
            # names wins.
            defaults = [tenant.defaults.get(kb_id) for kb_id in kb_ids]
            shared = defaults[0] if defaults and all(d == defaults[0] for d in defaults) else None
            mode = request.retrieval_mode or ("hybrid" if shared is None else shared.retrieval_mode)
            return Plan(
                tenant_id=tenant_id,
                kb_ids=kb_ids,
                reader=reader,
                query=request.query.strip(),
                mode=RetrievalMode(mode),
                top_k=request.top_k,
                threshold=self._settings.people_score_threshold if threshold is None else threshold,
                fusion=(
                    self._fusion("convex", None, 60)
                    if shared is None or shared.fusion is None
                    else self._fusion(shared.fusion, shared.dense_weight, shared.rrf_k or 60)
                ),
                max_context_tokens=request.max_context_tokens,
                fallback_message=None,
                identity=("reader", tenant_id),
                channel=channel,
                user_id=reader.user_id,
                session_id=request.session_id,
                turn_id=request.turn_id,
            ), CacheHits(access=held)

        return await self._answer(plan, announce)

    async def search_tenant(self, request: TenantSearchRequest) -> Answer:
        """Admin tooling's search over a tenant's requested, active KBs (as an admin)."""

        async def plan(since: int) -> tuple[Plan, CacheHits]:
            tenant, held = await self._tenant_kbs(request.tenant_id, since)
            return Plan(
                tenant_id=request.tenant_id,
                kb_ids=tenant.active_of(request.kb_ids),
                reader=Reader.administrator(),
                query=request.query.strip(),
                mode=RetrievalMode(request.retrieval_mode),
                top_k=request.top_k,
                threshold=request.score_threshold,
                fusion=self._fusion(request.fusion, request.dense_weight, request.rrf_k),
                max_context_tokens=request.max_context_tokens,
                fallback_message=None,
                identity=("tenant", request.tenant_id),
            ), CacheHits(access=held)

        return await self._answer(plan, announce=False)

    async def learn_tenant(self, tenant_id: str) -> None:
        """Holds the tenant's KBs in memory before its people's first search."""
        await self._tenant_kbs(tenant_id, self._freshness.epoch)

    async def _tenant_kbs(self, tenant_id: str, since: int) -> tuple[TenantKbs, bool]:
        """The tenant's KBs, held in memory or read (and held), and whether they were held."""
        held = self._freshness.held(Kind.TENANT_KBS, tenant_id)
        if isinstance(held, TenantKbs):
            return held, True
        kbs = sorted(await self._kbs.list_all(tenant_id), key=lambda kb: kb.created_at)
        active = [kb for kb in kbs if kb.status is KbStatus.ACTIVE]
        tenant = TenantKbs(
            active=tuple(kb.id for kb in active),
            by_code={kb.code: kb.id for kb in kbs if kb.code},
            defaults={kb.id: kb.default_retrieval for kb in active},
        )
        self._freshness.hold(Kind.TENANT_KBS, tenant_id, tenant, since)
        return tenant, False

    # --- one search -------------------------------------------------------------------------

    async def _answer(self, planner: Planner, announce: bool) -> Answer:
        clock = Clock()
        try:
            answer, plan = await self._searched(planner, clock)
        except Exception:
            SEARCH_REQUESTS.labels("error").inc()
            raise
        finally:
            SEARCH_LATENCY.observe(time.perf_counter() - clock.started)
        cache = answer.metrics.cache
        SEARCH_REQUESTS.labels("empty" if _found_nothing(answer.body) else "hits").inc()
        TENANT_REQUESTS.labels(plan.tenant_id, "search").inc()
        for layer, hit in (("access", cache.access), ("embedding", cache.embedding)):
            SEARCH_CACHE.labels(layer, "hit" if hit else "miss").inc()
        SEARCH_CACHE.labels("result", "hit" if cache.result else "miss").inc()
        if announce and (plan.session_id or plan.turn_id):
            with clock.step("writes"):
                self._events.announce(lambda: _event(plan, answer))
            answer.metrics = clock.metrics(cache)
        return answer

    async def _searched(self, planner: Planner, clock: Clock) -> tuple[Answer, Plan]:
        """The answer, from the cache or found, and the plan it answers. The search keeps the
        live generation's retriever it starts with (`services.search.retrievers`), so its
        query is embedded by the model that made the vectors it is ranked against."""
        since = self._freshness.epoch
        with clock.step("access"):
            generation, retriever = await self._retrievers.live()
            clock.generation = generation
            plan, hits = await planner(since)
            key = await self._result_key(plan, since, generation) if plan.kb_ids else None
        if key is not None:
            with clock.step("cache"):
                held = self._freshness.answer(key, since)
            SEARCH_CACHE.labels("memory", "miss" if held is None else "hit").inc()
            if held is not None:
                hits.result = True
                return Answer(held, clock.metrics(hits)), plan
        with clock.step("cache"):
            probe = await self._probe(plan, key, retriever)
            if not await self._freshness.settle(probe.seq, since):
                # A change reached this process meanwhile: plan again with it.
                since = self._freshness.epoch
                plan, hits = await planner(since)
                again = await self._result_key(plan, since, generation) if plan.kb_ids else None
                if again != key:
                    key = again
                    found = await self._cache.probe(key, None, retriever.model_id, plan.query)
                    probe = replace(probe, answer=found.answer)
        if probe.answer is not None:
            hits.result = True
            if key is not None:
                self._freshness.keep_answer(key, probe.answer)
            return Answer(probe.answer, clock.metrics(hits)), plan
        if probe.retry_after_s:
            raise RateLimited("searches", probe.retry_after_s)
        return await self._found(plan, key, probe, hits, clock, retriever), plan

    async def _probe(self, plan: Plan, key: str | None, retriever: Retriever) -> Probe:
        """The search's one round trip before answering."""
        limit = None
        if self._limits is not None:
            window = self._limits.window("search", _rate_subject(plan), 1)
            limit = Limit(window, self._searches_per_second)
        return await self._cache.probe(key, limit, retriever.model_id, plan.query)

    async def _found(
        self,
        plan: Plan,
        key: str | None,
        probe: Probe,
        hits: CacheHits,
        clock: Clock,
        retriever: Retriever,
    ) -> Answer:
        """A search the cache could not answer."""
        if not plan.kb_ids:
            return self._finish(plan, [], [], np.zeros(0, dtype=np.float32), clock, hits)
        vector = probe.vector
        fresh = None
        if vector is None or vector.shape != (retriever.dimensions,):
            with clock.step("embedding"):
                vector = fresh = await retriever.embed(plan.query)
        else:
            hits.embedding = True
        scope = SearchScope(plan.tenant_id, tuple(plan.kb_ids), plan.reader.key)
        with clock.step("ranking"):
            ranked = await retriever.rank(
                scope,
                plan.query,
                vector,
                mode=plan.mode,
                threshold=plan.threshold,
                fusion=plan.fusion,
            )
        passages, candidates = await self._distinct(plan, scope, ranked, vector, clock, retriever)
        with clock.step("fetch"):
            # The cosines the shown passages' rationales give and the ranking did not bring.
            ranks = sorted({passage.rank for passage in passages})
            shown = await retriever.with_cosines(scope, [candidates[r] for r in ranks], vector)
            for rank, candidate in zip(ranks, shown, strict=True):
                candidates[rank] = candidate
        answer = self._finish(plan, passages, candidates, vector, clock, hits)
        with clock.step("writes"):
            if key is not None:
                self._freshness.keep_answer(key, answer.body)
            self._cache.remember(
                Remembered(
                    answer_key=key,
                    body=answer.body,
                    found=bool(answer.response.hits),
                    model_id=retriever.model_id,
                    query=plan.query,
                    vector=fresh,
                )
            )
        answer.metrics = clock.metrics(hits)
        return answer

    async def _result_key(self, plan: Plan, since: int, generation: int) -> str | None:
        """The answer's cache key (the generation ranked against is part of it: a switch
        retires the answers of the one before), or None if the KBs' revisions are not
        known."""
        revisions = await self._freshness.revisions(plan.kb_ids, since)
        if revisions is None:
            return None
        return result_key(
            [
                ANSWER_FORMAT,
                generation,
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

    async def _distinct(
        self,
        plan: Plan,
        scope: SearchScope,
        ranked: Ranked,
        vector: NDArray[np.float32],
        clock: Clock,
        retriever: Retriever,
    ) -> tuple[list[Passage], list[Candidate]]:
        """The best distinct passages of the ranking: newest versions only, neighbours merged,
        copies folded; at most top_k; and the candidates they are made of. The first chunks of
        the ranking, as many as hold `top_k * oversample` sure to pass, are read and looked at;
        if they fold into fewer than top_k passages, the rest of the ranking (up to `depth`) is
        read too, once."""
        settings = self._settings
        stored: dict[str, StoredChunk | None] = {}
        window = ranked.window(plan.top_k * settings.oversample, settings.depth)
        while True:
            with clock.step("fetch"):
                await retriever.read(scope, ranked, window, stored)
            with clock.step("shaping"):
                candidates = ranked.candidates(window, stored, vector)
                passages = assemble(
                    newest_versions(_pieces(candidates)),
                    plan.top_k,
                    copy_threshold=settings.duplicate_threshold,
                    max_chunks=settings.merge_max_chunks,
                )
            deeper = max(window, settings.depth)
            if len(passages) >= plan.top_k or window >= len(ranked.order) or deeper == window:
                return passages, candidates
            window = deeper

    def _finish(
        self,
        plan: Plan,
        passages: list[Passage],
        candidates: list[Candidate],
        vector: NDArray[np.float32],
        clock: Clock,
        cache: CacheHits,
    ) -> Answer:
        with clock.step("shaping"):
            texts = [text_of(passage) for passage in passages]
            kept = within_budget(texts, plan.max_context_tokens)
            terms = query_terms(plan.query)
            hits = [
                _hit(passage, text, candidates[passage.rank].rationale(terms, vector))
                for passage, text in zip(passages, kept, strict=False)
            ]
            response = SearchResponse(
                hits=hits, fallback_message=plan.fallback_message if not hits else None
            )
            body = response.model_dump_json(exclude={"metrics"}).encode()
        return Answer(body, clock.metrics(cache), response)


def _pieces(candidates: Sequence[Candidate]) -> Iterator[Piece]:
    for rank, candidate in enumerate(candidates):
        yield Piece(candidate.point_id, candidate.chunk.payload, candidate.score, rank)


def _hit(passage: Passage, text: str, rationale: str) -> SearchHit:
    payload = passage.pieces[0].payload
    merged = passage.last_index > passage.first_index
    if merged:
        rationale += f"; chunks {passage.first_index}-{passage.last_index} merged"
    return SearchHit(
        score=round(passage.score, 6),
        chunk_text=text,
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


def _event(plan: Plan, answer: Answer) -> ChunksRetrieved:
    """The retrieval event of a search (built after the answer)."""
    return ChunksRetrieved(
        tenant_id=plan.tenant_id,
        bot_id=plan.bot_id,
        user_id=plan.user_id,
        session_id=plan.session_id,
        turn_id=plan.turn_id,
        channel=plan.channel,
        query=plan.query,
        retrieval_mode=plan.mode.value,
        chunks=answer.retrieved(),
        latency_ms=answer.metrics.total_ms,
        cached=answer.metrics.cache.result,
    )


def _found_nothing(body: bytes) -> bool:
    """Whether an answer's body holds no hit (without reading the rest of it)."""
    return body.startswith(b'{"hits":[]')


def _rate_subject(plan: Plan) -> str:
    """Whose rate a search counts against: the bot's, the person's, or the tenant form's."""
    if plan.bot_id:
        return f"bot:{plan.bot_id}"
    if plan.user_id:
        return f"user:{plan.tenant_id}:{plan.user_id}"
    return f"tenant:{plan.tenant_id}"
