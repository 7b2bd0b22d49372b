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
"""

from __future__ import annotations

import math
import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass

from core.errors import Conflict
from infra.documents import DocumentRepository
from infra.evaluations import EvaluationRepository
from infra.knowledge_bases import KnowledgeBaseRepository
from schemas.domain import KbStatus, utcnow
from schemas.evaluation import (
    ConfigResult,
    Evaluation,
    EvaluationCase,
    EvaluationRequest,
    Miss,
    RetrievalConfig,
    Returned,
    Scores,
    new_evaluation_id,
)
from schemas.search import SearchHit, TenantSearchRequest
from services.search.service import SearchService

# The configurations tried: hybrid with either fusion at a few weights, the bots' default
# (convex, 0.5) first so that it wins ties, then each retriever alone.
CONFIGS: tuple[RetrievalConfig, ...] = (
    *(
        RetrievalConfig(retrieval_mode="hybrid", fusion="convex", dense_weight=weight)
        for weight in (0.5, 0.3, 0.7)
    ),
    *(RetrievalConfig(retrieval_mode="hybrid", fusion="rrf", rrf_k=k) for k in (60, 20, 5)),
    RetrievalConfig(retrieval_mode="dense"),
    RetrievalConfig(retrieval_mode="sparse"),
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
    ) -> list[ConfigResult]:
        """Every configuration's figures and misses; `documents` are the expected items that
        are document ids of the KB."""
        expectations = [
            Expectation(tuple(case.expected), documents & set(case.expected)) for case in cases
        ]
        results = []
        for config in CONFIGS:
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
            results.append(ConfigResult(config=config, scores=mean_scores(scored), misses=misses))
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
            fusion=config.fusion or "convex",
            dense_weight=config.dense_weight if config.dense_weight is not None else 0.5,
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
    usable = [r for r in results if r.config.retrieval_mode != "sparse"]
    return max(usable, key=_rank_key)


def _returned(hit: SearchHit) -> Returned:
    return Returned(
        document_id=hit.document_id,
        document_title=hit.document_title,
        score=hit.score,
        text=hit.chunk_text[:TEXT_SHOWN],
    )


class Evaluations:
    """The use-case: evaluate a KB, keep the result, show it again."""

    def __init__(
        self,
        kbs: KnowledgeBaseRepository,
        documents: DocumentRepository,
        evaluator: Evaluator,
        store: EvaluationRepository,
    ) -> None:
        self._kbs = kbs
        self._documents = documents
        self._evaluator = evaluator
        self._store = store

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
        results = await self._evaluator.run(
            tenant_id, kb_id, request.cases, request.k, frozenset(documents)
        )
        best = best_for_bots(results)
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
