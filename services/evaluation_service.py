"""Per-KB retrieval evaluation: an admin's questions run through every retrieval mode.

Each case names what a good answer holds: document ids of the KB, or text snippets. A hit
covers an expected document when it comes from it (or lists it among the copies folded into it,
`also_in`), and an expected snippet when its text contains the snippet (case, Unicode forms and
spacing ignored). Hits are the search service's own answers (merged neighbours, folded copies),
top 10, no score threshold. Per case, with R expected items and hits ranked from 1:

- recall@k: expected items covered by the top k hits, over R;
- reciprocal rank: 1 / the rank of the first hit covering any expected item (0 if none in 10);
- nDCG@10: a hit gains 1 when it covers an expected item no earlier hit covered; the sum of
  gain / log2(rank + 1) over the ideal, min(R, 10) gains at ranks 1, 2, ...

and each figure is the mean over the cases. The configuration a bot should use is the best by
nDCG@10, then MRR, then recall@k, among the dense and hybrid ones (bots do not search sparse);
the bots' default wins a tie.

Applying the best is offered only when it is a significant gain over the configuration the
target searches with now: compared case by case by nDCG@10 with a sign-flip randomisation test
(`core.paired`, p < 0.05), the rule the quality benchmark calls a gain by. A best that is not
one is reported, not applied; any measured configuration can still be applied by name.
"""

from __future__ import annotations

import math
import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass

from core.errors import Conflict, InvalidRequest
from core.paired import compare
from core.retrieval import WEIGHTED_FUSIONS, FusionMethod, RetrievalMode
from infra.mongo.document_repository import DocumentRepository
from infra.mongo.evaluation_repository import EvaluationRepository
from infra.mongo.knowledge_base_repository import KnowledgeBaseRepository
from schemas.bots import BotUpdate, KnowledgeConfig, KnowledgePatch
from schemas.domain import KbStatus, RetrievalConfig, utcnow
from schemas.evaluation import (
    Applied,
    ApplyToBot,
    ApplyToKb,
    ConfigResult,
    Evaluation,
    EvaluationCase,
    EvaluationRequest,
    Gain,
    Miss,
    Returned,
    Scores,
    new_evaluation_id,
)
from schemas.search import SearchHit, TenantSearchRequest
from services.bot_service import BotService
from services.knowledge_base_service import KnowledgeBaseService
from services.search.search_service import SearchService

# The service's configuration for searches that set none: hybrid, convex, its weight chosen
# per query (the bots' default too).
DEFAULT = RetrievalConfig(retrieval_mode=RetrievalMode.HYBRID, fusion=FusionMethod.CONVEX)
# The configurations tried: the default first so that it wins ties, hybrid with each fusion
# (convex at a few weights, RRF at a few k, the score fusions with the weight per query), then
# each retriever alone; and the KB's own default retrieval if it is none of these.
CONFIGS: tuple[RetrievalConfig, ...] = (
    DEFAULT,
    *(
        RetrievalConfig(
            retrieval_mode=RetrievalMode.HYBRID, fusion=FusionMethod.CONVEX, dense_weight=weight
        )
        for weight in (0.5, 0.3, 0.7)
    ),
    *(
        RetrievalConfig(retrieval_mode=RetrievalMode.HYBRID, fusion=FusionMethod.RRF, rrf_k=k)
        for k in (60, 20, 5)
    ),
    *(
        RetrievalConfig(retrieval_mode=RetrievalMode.HYBRID, fusion=method)
        for method in (FusionMethod.DBSF, FusionMethod.ZSCORE, FusionMethod.GATED)
    ),
    RetrievalConfig(retrieval_mode=RetrievalMode.DENSE),
    RetrievalConfig(retrieval_mode=RetrievalMode.SPARSE),
)
DEPTH = 10
RETURNED_SHOWN = 3
TEXT_SHOWN = 300

_SPACE = re.compile(r"\s+")


def _normal(text: str) -> str:
    return _SPACE.sub(" ", unicodedata.normalize("NFKC", text).casefold()).strip()


@dataclass(frozen=True)
class Expectation:
    """What one case expects: documents and snippets (normalised)."""

    items: tuple[str, ...]
    documents: frozenset[str]

    def covered_by(self, hit: SearchHit) -> set[str]:
        """The expected items a hit covers."""
        found = {hit.document_id, *(copy.document_id for copy in hit.also_in)}
        text = _normal(hit.chunk_text)
        return {
            item
            for item in self.items
            if (item in found if item in self.documents else _normal(item) in text)
        }


@dataclass(frozen=True)
class CaseScores:
    """One case's figures."""

    recall_at_k: float
    recall_at_10: float
    reciprocal_rank: float
    ndcg_at_10: float
    missing: list[str]


def score_case(covered: Sequence[set[str]], expected: Sequence[str], k: int) -> CaseScores:
    """The figures of one ranking: `covered[i]` is what the hit at rank i + 1 covers."""
    seen: set[str] = set()
    found_by_k: set[str] = set()
    first: int | None = None
    dcg = 0.0
    for rank, items in enumerate(covered[:DEPTH], start=1):
        new = items - seen
        if items and first is None:
            first = rank
        if new:
            dcg += 1 / math.log2(rank + 1)
        seen |= items
        if rank <= k:
            found_by_k |= items
    total = len(set(expected))
    ideal = sum(1 / math.log2(rank + 1) for rank in range(1, min(total, DEPTH) + 1))
    return CaseScores(
        recall_at_k=len(found_by_k) / total,
        recall_at_10=len(seen) / total,
        reciprocal_rank=1 / first if first else 0.0,
        ndcg_at_10=dcg / ideal,
        missing=[item for item in dict.fromkeys(expected) if item not in found_by_k],
    )


def mean_scores(cases: Sequence[CaseScores]) -> Scores:
    """The mean figures over the cases."""
    count = len(cases)
    return Scores(
        recall_at_k=round(sum(c.recall_at_k for c in cases) / count, 4),
        recall_at_10=round(sum(c.recall_at_10 for c in cases) / count, 4),
        mrr=round(sum(c.reciprocal_rank for c in cases) / count, 4),
        ndcg_at_10=round(sum(c.ndcg_at_10 for c in cases) / count, 4),
    )


def _rank_key(result: ConfigResult) -> tuple[float, float, float]:
    scores = result.scores
    return (scores.ndcg_at_10, scores.mrr, scores.recall_at_k)


class Evaluator:
    """Runs an admin's cases against one KB in every configuration."""

    def __init__(self, search: SearchService) -> None:
        self._search = search

    async def run(
        self,
        tenant_id: str,
        kb_id: str,
        cases: Sequence[EvaluationCase],
        k: int,
        documents: frozenset[str],
        current: RetrievalConfig = DEFAULT,
    ) -> list[ConfigResult]:
        """Every configuration's figures and misses (`CONFIGS`, and `current` if it is none of
        them); `documents` are the expected items that are document ids of the KB."""
        expectations = [
            Expectation(tuple(case.expected), documents & set(case.expected)) for case in cases
        ]
        configs = list(CONFIGS)
        if not any(_same(config, current) for config in configs):
            configs.append(current)
        results = []
        for config in configs:
            scored: list[CaseScores] = []
            misses: list[Miss] = []
            for case, expectation in zip(cases, expectations, strict=True):
                hits = await self._hits(tenant_id, kb_id, case.query, config)
                scores = score_case([expectation.covered_by(hit) for hit in hits], case.expected, k)
                scored.append(scores)
                if scores.missing:
                    misses.append(
                        Miss(
                            query=case.query,
                            missing=scores.missing,
                            returned=[_returned(hit) for hit in hits[:RETURNED_SHOWN]],
                        )
                    )
            results.append(
                ConfigResult(
                    config=config,
                    scores=mean_scores(scored),
                    misses=misses,
                    per_case=[round(c.ndcg_at_10, 4) for c in scored],
                )
            )
        return results

    async def _hits(
        self, tenant_id: str, kb_id: str, query: str, config: RetrievalConfig
    ) -> list[SearchHit]:
        request = TenantSearchRequest(
            tenant_id=tenant_id,
            kb_ids=[kb_id],
            query=query,
            top_k=DEPTH,
            score_threshold=0.0,
            retrieval_mode=config.retrieval_mode,
            fusion=config.fusion or FusionMethod.CONVEX,
            dense_weight=config.dense_weight,
            rrf_k=config.rrf_k or 60,
        )
        return (await self._search.search_tenant(request)).hits


def best_of_each_mode(results: Sequence[ConfigResult]) -> dict[str, ConfigResult]:
    """The best configuration of each retrieval mode."""
    best: dict[str, ConfigResult] = {}
    for result in results:
        mode = result.config.retrieval_mode
        if mode not in best or _rank_key(result) > _rank_key(best[mode]):
            best[mode] = result
    return best


def best_for_bots(results: Sequence[ConfigResult]) -> ConfigResult:
    """The best configuration a bot can use (dense or hybrid); the first wins ties."""
    usable = [r for r in results if r.config.retrieval_mode != RetrievalMode.SPARSE]
    return max(usable, key=_rank_key)


def _same(a: RetrievalConfig, b: RetrievalConfig) -> bool:
    """Whether two configurations search alike: the fusion's settings count for hybrid only,
    and of them only the fusion's own (a convex weight, an RRF k)."""

    def key(c: RetrievalConfig) -> tuple[object, ...]:
        if c.retrieval_mode != RetrievalMode.HYBRID:
            return (c.retrieval_mode,)
        return ("hybrid", c.fusion, c.rrf_k if c.fusion == FusionMethod.RRF else c.dense_weight)

    return key(a) == key(b)


def result_of(evaluation: Evaluation, wanted: RetrievalConfig) -> ConfigResult | None:
    """The evaluation's result for a configuration, if it measured it."""
    return next((r for r in evaluation.tried if _same(r.config, wanted)), None)


def measured(evaluation: Evaluation, wanted: RetrievalConfig | None) -> ConfigResult:
    """The evaluation's result for a configuration it measured (None: its best);
    `InvalidRequest` naming what it measured for any other."""
    wanted = evaluation.best if wanted is None else wanted
    result = result_of(evaluation, wanted)
    if result is not None:
        return result
    tried = "; ".join(result.config.label for result in evaluation.tried)
    raise InvalidRequest(
        f"config: evaluation {evaluation.id!r} did not measure {wanted.label}; it measured: {tried}"
    )


def gain(best: ConfigResult, other: ConfigResult) -> Gain | None:
    """The best configuration against another, case by case by nDCG@10 (None: the results
    hold no per-case figures)."""
    if not best.per_case or len(best.per_case) != len(other.per_case):
        return None
    paired = compare(
        {str(i): v for i, v in enumerate(best.per_case)},
        {str(i): v for i, v in enumerate(other.per_case)},
    )
    return Gain(
        over=other.config,
        wins=paired.wins,
        losses=paired.losses,
        ties=paired.ties,
        difference=round(paired.difference, 4),
        interval=(round(paired.interval[0], 4), round(paired.interval[1], 4)),
        p_value=round(paired.p_value, 4),
        significant=paired.significant,
    )


def is_offered(found: Gain | None) -> bool:
    """Whether applying the best is offered: a significant gain, and a positive one."""
    return found is not None and found.significant and found.difference > 0


def best_over(evaluation: Evaluation, current: RetrievalConfig, target: str) -> ConfigResult:
    """The evaluation's best, when it is a significant gain over `current` (the target's
    configuration now); `Conflict` saying why it is not applied otherwise."""
    best = measured(evaluation, None)
    other = result_of(evaluation, current)
    if other is None:
        raise Conflict(
            f"config: evaluation {evaluation.id!r} did not measure {target}'s current "
            f"configuration ({current.label}), so whether its best ({best.config.label}) is "
            "better cannot be told; name the configuration to apply (config)"
        )
    found = gain(best, other)
    if found is None:
        raise Conflict(
            f"config: evaluation {evaluation.id!r} keeps no per-case figures (it is older than "
            "them), so whether its best is a significant gain cannot be told; run it again, or "
            "name the configuration to apply (config)"
        )
    if not is_offered(found):
        same = _same(best.config, current)
        raise Conflict(
            f"config: the evaluation's best, {best.config.label}, "
            + (
                f"is already {target}'s configuration"
                if same
                else f"is not a significant gain over {target}'s current {current.label} on "
                f"this KB's {found.wins + found.losses + found.ties} cases (nDCG@10 "
                f"{found.difference:+.4f}, {found.wins} better, {found.losses} worse, "
                f"p = {found.p_value:.2f})"
            )
            + "; nothing was applied. Name a configuration (config) to apply it anyway"
        )
    return best


def bot_retrieval(knowledge: KnowledgeConfig) -> RetrievalConfig:
    """A bot's retrieval settings as a configuration."""
    return RetrievalConfig(
        retrieval_mode=knowledge.retrieval_mode,
        fusion=knowledge.fusion,
        dense_weight=knowledge.dense_weight,
        rrf_k=knowledge.rrf_k,
    )


def _returned(hit: SearchHit) -> Returned:
    return Returned(
        document_id=hit.document_id,
        document_title=hit.document_title,
        score=hit.score,
        text=hit.chunk_text[:TEXT_SHOWN],
    )


class EvaluationService:
    """The use-case: evaluate a KB, keep the result, show it again, apply a configuration it
    measured to a bot or as the KB's default."""

    def __init__(
        self,
        kbs: KnowledgeBaseRepository,
        documents: DocumentRepository,
        evaluator: Evaluator,
        store: EvaluationRepository,
        bots: BotService,
        kb_admin: KnowledgeBaseService,
    ) -> None:
        self._kbs = kbs
        self._documents = documents
        self._evaluator = evaluator
        self._store = store
        self._bots = bots
        self._kb_admin = kb_admin

    async def evaluate(self, tenant_id: str, kb_id: str, request: EvaluationRequest) -> Evaluation:
        """Runs the cases in every configuration and stores the outcome."""
        kb = await self._kbs.get(tenant_id, kb_id)
        if kb.status is not KbStatus.ACTIVE:
            raise Conflict(
                f"knowledge base {kb_id!r} is {kb.status.value}; only an active one "
                "can be searched, so evaluated"
            )
        named = {item for case in request.cases for item in case.expected}
        documents = await self._documents.existing_ids(tenant_id, kb_id, named)
        current = kb.default_retrieval or DEFAULT
        results = await self._evaluator.run(
            tenant_id, kb_id, request.cases, request.k, frozenset(documents), current
        )
        best = best_for_bots(results)
        over = next(r for r in results if _same(r.config, current))
        found = gain(best, over)
        evaluation = Evaluation(
            id=new_evaluation_id(),
            tenant_id=tenant_id,
            kb_id=kb_id,
            created_at=utcnow(),
            k=request.k,
            case_count=len(request.cases),
            modes=best_of_each_mode(results),
            tried=[r.model_copy(update={"misses": []}) for r in results],
            best=best.config,
            best_scores=best.scores,
            current=current,
            gain=found,
            offered=is_offered(found),
        )
        await self._store.save(evaluation)
        return evaluation

    async def get(self, tenant_id: str, kb_id: str, evaluation_id: str) -> Evaluation:
        """A stored evaluation of the tenant's KB."""
        return await self._store.get(tenant_id, kb_id, evaluation_id)

    async def list_recent(self, tenant_id: str, kb_id: str, limit: int) -> list[Evaluation]:
        """The KB's evaluations, newest first."""
        await self._kbs.get(tenant_id, kb_id)
        return await self._store.list_recent(tenant_id, kb_id, limit)

    async def apply(
        self, tenant_id: str, kb_id: str, evaluation_id: str, request: ApplyToBot | ApplyToKb
    ) -> Applied:
        """Writes a configuration the evaluation measured (its best unless the request names
        one) to a bot's knowledge settings, or as the KB's default retrieval. The best is
        written only when it is a significant gain over the target's current configuration
        (`Conflict` saying why not otherwise). A bot must have the KB attached (`Conflict`)
        and cannot take a sparse configuration (`InvalidRequest`)."""
        evaluation = await self._store.get(tenant_id, kb_id, evaluation_id)
        if isinstance(request, ApplyToBot):
            return await self._apply_to_bot(evaluation, request)
        before = (await self._kb_admin.get(tenant_id, kb_id)).default_retrieval
        chosen = (
            best_over(evaluation, before or DEFAULT, "the knowledge base")
            if request.config is None
            else measured(evaluation, request.config)
        )
        kb = await self._kb_admin.update(
            tenant_id, kb_id, {"default_retrieval": chosen.config.model_dump()}
        )
        assert kb.default_retrieval is not None
        return Applied(
            evaluation_id=evaluation.id,
            kb_id=kb_id,
            target="kb",
            config=chosen.config,
            scores=chosen.scores,
            before=before,
            after=kb.default_retrieval,
        )

    async def _apply_to_bot(self, evaluation: Evaluation, request: ApplyToBot) -> Applied:
        tenant_id, kb_id = evaluation.tenant_id, evaluation.kb_id
        bot = await self._bots.get(tenant_id, request.bot_id)
        if kb_id not in bot.knowledge.kb_ids:
            raise Conflict(
                f"bot {bot.id!r} does not have knowledge base {kb_id!r} attached, so this "
                "evaluation says nothing of its searches; attach the KB to it first "
                "(knowledge.kb_ids)"
            )
        chosen = (
            best_over(evaluation, bot_retrieval(bot.knowledge), f"bot {bot.id!r}")
            if request.config is None
            else measured(evaluation, request.config)
        )
        config = chosen.config
        if config.retrieval_mode == RetrievalMode.SPARSE:
            raise InvalidRequest(
                f"config: bots do not search sparse, so {config.label} cannot be applied to "
                "a bot; choose a dense or hybrid configuration, or apply it to the knowledge "
                'base (target "kb")'
            )
        # The configuration's settings; those it leaves unset (a dense one's fusion) stay, but
        # a weighted fusion without a weight is the weight chosen per query.
        settings = config.model_dump(exclude_none=True)
        if config.fusion in WEIGHTED_FUSIONS and config.dense_weight is None:
            settings["dense_weight"] = None
        patch = KnowledgePatch.model_validate(settings)
        updated = await self._bots.update(tenant_id, bot.id, BotUpdate(knowledge=patch))
        return Applied(
            evaluation_id=evaluation.id,
            kb_id=kb_id,
            target="bot",
            bot_id=bot.id,
            config=config,
            scores=chosen.scores,
            before=bot_retrieval(bot.knowledge),
            after=bot_retrieval(updated.knowledge),
        )
