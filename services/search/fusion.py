"""Hybrid fusion: one ranking from the dense and the sparse retrievers' rankings (convex,
reciprocal-rank, distribution-based, z-score or rare-term-gated fusion), with strong signals
(rare exact identifiers, a retriever's clear winner) placed first. Pure: no I/O. How and why:
docs/concepts/search.md."""

from __future__ import annotations

import re
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from enum import StrEnum

from core.retrieval import FusionMethod
from core.sparse import content_words, identifier_terms
from infra.vectorstore.base import Rankings

# Words in straight or typographic double quotes: the asker wants those very words.
_QUOTED = re.compile(r'["\u201c][^"\u201d]+["\u201d]')
# How a question in English starts (or it has a question mark).
_ASKING = frozenset(
    """how what why which where when who whom whose can could does do did is are should would
    will may must shall was were has have any""".split()
)
_FIRST_WORD = re.compile(r"\w+")


@dataclass(frozen=True)
class FusionParams:
    """The knobs of a fusion."""

    method: FusionMethod = FusionMethod.CONVEX
    # None: chosen per query, from the weights below (`dense_weight_for`).
    dense_weight: float | None = None
    rrf_k: int = 60
    # The per-query weights, by `QueryKind`.
    question_dense_weight: float = 0.5
    exact_dense_weight: float = 0.5
    plain_dense_weight: float = 0.5
    lead_ratio: float = 1.5
    lead_gap: float = 0.1
    # Documents, at most, whose chunks hold a rare term; and the chunks probed per term (a
    # probe that finds that many cannot tell, and its term does not count as rare).
    rare_max: int = 3
    probe_limit: int = 32
    # Gated fusion: the keyword ranking joins when its best score per query term reaches this
    # (BM25 score); `query_terms` is the query's count of distinct content words (`for_query`).
    rare_gate: float = 3.0
    query_terms: int = 0


@dataclass(frozen=True)
class Fused:
    """A chunk's place in the fused ranking, and what each retriever made of it."""

    point_id: str
    score: float
    dense_rank: int | None
    sparse_rank: int | None
    sparse_score: float | None
    # Why it was placed first, if it was: "identifier" (it holds the query's rare identifiers),
    # "keyword" or "semantic" (that retriever's clear winner).
    lead: str | None = None


class QueryKind(StrEnum):
    """What a query asks for, as far as its words tell."""

    # It names an identifier (a flag, a code, a path) or quotes words: those very words.
    EXACT = "exact"
    # A question, in the asker's own words rather than the documents' ("how do I keep a
    # package from being upgraded?").
    QUESTION = "question"
    # Anything else: keywords, a title, a description ("copy files and directories").
    PLAIN = "plain"


def query_kind(query: str) -> QueryKind:
    """The kind of a query."""
    if _QUOTED.search(query) or identifier_terms(query):
        return QueryKind.EXACT
    first = _FIRST_WORD.search(query.lower())
    if "?" in query or (first is not None and first.group(0) in _ASKING):
        return QueryKind.QUESTION
    return QueryKind.PLAIN


def dense_weight_for(query: str, params: FusionParams) -> float:
    """The convex fusion's dense weight for a query: the one set, else by the query's kind."""
    if params.dense_weight is not None:
        return params.dense_weight
    return {
        QueryKind.EXACT: params.exact_dense_weight,
        QueryKind.QUESTION: params.question_dense_weight,
        QueryKind.PLAIN: params.plain_dense_weight,
    }[query_kind(query)]


def for_query(query: str, params: FusionParams) -> FusionParams:
    """The parameters with the dense weight this query gets, and for gated fusion its count of
    terms (the only fusion that reads it: no other search pays for counting)."""
    gated = params.method is FusionMethod.GATED
    return replace(
        params,
        dense_weight=dense_weight_for(query, params),
        query_terms=len(set(content_words(query))) if gated else 0,
    )


def fuse(rankings: Rankings, params: FusionParams) -> list[Fused]:
    """The fused ranking, best first (`dense_weight` unset counts as 0.5: see `for_query`)."""
    dense_rank = {point: rank for rank, (point, _) in enumerate(rankings.dense)}
    sparse_rank = {point: rank for rank, (point, _) in enumerate(rankings.sparse)}
    sparse_score = dict(rankings.sparse)
    scores = _scores(rankings, params)
    leads = dict.fromkeys(_holding_rare_identifiers(rankings, params), "identifier")
    for point, why in _leads(rankings, params).items():
        leads.setdefault(point, why)
    points = list(dict.fromkeys([*leads, *(p for p, _ in rankings.dense), *scores]))
    for point in leads:
        scores[point] = 1.0
    lead_order = {point: order for order, point in enumerate(leads)}
    ordered = sorted(points, key=lambda p: (lead_order.get(p, len(leads)), -scores[p]))
    return [
        Fused(
            point_id=point,
            score=round(scores[point], 6),
            dense_rank=dense_rank.get(point),
            sparse_rank=sparse_rank.get(point),
            sparse_score=sparse_score.get(point),
            lead=leads.get(point),
        )
        for point in ordered
    ]


def _scores(rankings: Rankings, params: FusionParams) -> dict[str, float]:
    """Every ranked point's fused score, 1.0 at best."""
    weight = 0.5 if params.dense_weight is None else params.dense_weight
    match params.method:
        case FusionMethod.RRF:
            return _rrf(rankings, params.rrf_k)
        case FusionMethod.DBSF:
            return _weighted(rankings, weight, _three_sigma, absent_lowest=False)
        case FusionMethod.ZSCORE:
            return _scaled_to_best(_weighted(rankings, weight, _standardised, absent_lowest=True))
        case FusionMethod.GATED:
            best = rankings.sparse[0][1] if rankings.sparse else 0.0
            opened = best >= params.rare_gate * max(params.query_terms, 1)
            return _convex(rankings, weight if opened else 1.0)
        case _:
            return _convex(rankings, weight)


def _convex(rankings: Rankings, dense_weight: float) -> dict[str, float]:
    scores: dict[str, float] = {}
    for ranking, weight in ((rankings.dense, dense_weight), (rankings.sparse, 1 - dense_weight)):
        best = max((score for _, score in ranking), default=0.0)
        if best <= 0:
            continue
        for point, score in ranking:
            scores[point] = scores.get(point, 0.0) + weight * max(score, 0.0) / best
    for point, _ in (*rankings.dense, *rankings.sparse):
        scores.setdefault(point, 0.0)
    return scores


def _three_sigma(scores: Sequence[float]) -> list[float]:
    """Distribution-based scaling: (score - (mean - 3 sd)) / (6 sd), within 0..1; a ranking
    whose scores do not spread scales to 1.0."""
    if len(scores) < 2 or (deviation := statistics.pstdev(scores)) == 0:
        return [1.0] * len(scores)
    low = statistics.fmean(scores) - 3 * deviation
    return [min(max((score - low) / (6 * deviation), 0.0), 1.0) for score in scores]


def _standardised(scores: Sequence[float]) -> list[float]:
    """z-scores; a ranking whose scores do not spread is all 0."""
    if len(scores) < 2 or (deviation := statistics.pstdev(scores)) == 0:
        return [0.0] * len(scores)
    middle = statistics.fmean(scores)
    return [(score - middle) / deviation for score in scores]


def _weighted(
    rankings: Rankings,
    dense_weight: float,
    scale: Callable[[Sequence[float]], list[float]],
    *,
    absent_lowest: bool,
) -> dict[str, float]:
    """Each retriever's scores scaled, weighted and summed; a point one retriever did not rank
    gets 0 from it, or with `absent_lowest` that retriever's lowest scaled score."""
    parts: list[tuple[dict[str, float], float]] = []
    for ranking, weight in ((rankings.dense, dense_weight), (rankings.sparse, 1 - dense_weight)):
        if ranking:
            scaled = scale([score for _, score in ranking])
            parts.append((dict(zip((p for p, _ in ranking), scaled, strict=True)), weight))
    floors = [min(scaled.values()) if absent_lowest else 0.0 for scaled, _ in parts]
    points = {point for scaled, _ in parts for point in scaled}
    return {
        point: sum(
            weight * scaled.get(point, floor)
            for (scaled, weight), floor in zip(parts, floors, strict=True)
        )
        for point in points
    }


def _scaled_to_best(scores: dict[str, float]) -> dict[str, float]:
    """Scores moved into 0..1, the best at 1.0 (min-max); all 1.0 if they are all equal."""
    if not scores:
        return scores
    low, high = min(scores.values()), max(scores.values())
    if high == low:
        return dict.fromkeys(scores, 1.0)
    return {point: (score - low) / (high - low) for point, score in scores.items()}


def _rrf(rankings: Rankings, k: int) -> dict[str, float]:
    lists = [ranking for ranking in (rankings.dense, rankings.sparse) if ranking]
    best = len(lists) / (k + 1) if lists else 1.0
    scores: dict[str, float] = {}
    for ranking in lists:
        for rank, (point, _) in enumerate(ranking, start=1):
            scores[point] = scores.get(point, 0.0) + 1 / (k + rank) / best
    return scores


def _holding_rare_identifiers(rankings: Rankings, params: FusionParams) -> list[str]:
    """The chunks holding every probed term that is rare (held by chunks of 1..`rare_max`
    documents, all of them found), in sparse-ranking order; none if no probed term is rare."""
    rare = [
        {point for point, _ in held}
        for held in rankings.holding.values()
        if held
        and len(held) < params.probe_limit
        and len({document for _, document in held}) <= params.rare_max
    ]
    if not rare:
        return []
    every = set.intersection(*rare)
    order = {point: rank for rank, (point, _) in enumerate(rankings.sparse)}
    return sorted(every, key=lambda point: order.get(point, len(order)))


def _leads(rankings: Rankings, params: FusionParams) -> dict[str, str]:
    """Each retriever's clear winner, if it has one, by the retriever that picked it."""
    leads: dict[str, str] = {}
    sparse = rankings.sparse
    if len(sparse) == 1 or (len(sparse) > 1 and sparse[0][1] >= params.lead_ratio * sparse[1][1]):
        leads[sparse[0][0]] = "keyword"
    dense = rankings.dense
    if len(dense) > 1 and dense[0][1] - dense[1][1] >= params.lead_gap:
        leads.setdefault(dense[0][0], "semantic")
    return leads
