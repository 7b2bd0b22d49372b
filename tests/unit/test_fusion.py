"""Hybrid fusion of the dense and sparse rankings (pure logic)."""

from __future__ import annotations

import math

import pytest

from core.retrieval import FusionMethod
from infra.vectorstore.base import Rankings
from services.search.fusion import (
    FusionParams,
    QueryKind,
    dense_weight_for,
    for_query,
    fuse,
    query_kind,
)

CONVEX = FusionParams(method=FusionMethod.CONVEX, dense_weight=0.5)
RRF = FusionParams(method=FusionMethod.RRF, rrf_k=60)


def _order(rankings: Rankings, params: FusionParams) -> list[str]:
    return [f.point_id for f in fuse(rankings, params)]


def test_convex_fusion_adds_scores_scaled_by_each_retrievers_best() -> None:
    rankings = Rankings(
        dense=[("both", 0.80), ("dense_only", 0.78), ("middle", 0.60)],
        sparse=[("both", 10.0), ("middle", 9.0), ("sparse_only", 8.0)],
    )
    fused = {f.point_id: f for f in fuse(rankings, CONVEX)}
    assert fused["both"].score == pytest.approx(1.0)
    assert fused["middle"].score == pytest.approx(0.5 * 0.60 / 0.80 + 0.5 * 0.9)
    assert fused["dense_only"].score == pytest.approx(0.5 * 0.78 / 0.80)
    assert fused["sparse_only"].score == pytest.approx(0.5 * 0.8)
    assert _order(rankings, CONVEX) == ["both", "middle", "dense_only", "sparse_only"]
    assert (fused["middle"].dense_rank, fused["middle"].sparse_rank) == (2, 1)
    assert fused["dense_only"].sparse_rank is None
    weighted = FusionParams(method=FusionMethod.CONVEX, dense_weight=0.9)
    assert _order(rankings, weighted)[:2] == ["both", "dense_only"]


def test_a_keyword_match_far_ahead_of_the_rest_is_not_buried() -> None:
    # The exact code is only in one chunk: BM25 puts it first by far, dense does not see it.
    # Chunks that are middling in both rankings would outscore it under either fusion alone.
    middling = [f"middling_{i}" for i in range(10)]
    rankings = Rankings(
        dense=[(point, 0.7 - i * 0.01) for i, point in enumerate(middling)],
        sparse=[("code", 18.4), *[(point, 10.4 - i * 0.2) for i, point in enumerate(middling)]],
    )
    for params in (CONVEX, RRF):
        fused = fuse(rankings, params)
        assert fused[0].point_id == "code"
        assert fused[0].lead == "keyword"
        assert fused[0].score == 1.0
        assert fused[0].dense_rank is None


def test_the_only_chunk_with_a_query_term_leads() -> None:
    rankings = Rankings(dense=[("a", 0.5), ("b", 0.49)], sparse=[("rare", 3.0)])
    assert _order(rankings, CONVEX)[0] == "rare"


def test_a_semantic_match_far_ahead_of_the_rest_is_not_buried() -> None:
    rankings = Rankings(
        dense=[("meaning", 0.71), ("x", 0.55), ("y", 0.54)],
        sparse=[("x", 5.0), ("y", 4.9), ("z", 4.8)],
    )
    fused = fuse(rankings, RRF)
    assert fused[0].point_id == "meaning"
    assert fused[0].lead == "semantic"


def test_close_races_are_left_to_the_fusion() -> None:
    rankings = Rankings(
        dense=[("a", 0.70), ("b", 0.66), ("c", 0.65)],
        sparse=[("c", 10.0), ("b", 9.0), ("a", 1.0)],
    )
    fused = fuse(rankings, CONVEX)
    assert all(f.lead is None for f in fused)
    assert [f.point_id for f in fused] == ["c", "b", "a"]


def test_rrf_scales_first_in_both_to_one() -> None:
    rankings = Rankings(dense=[("a", 0.9), ("b", 0.8)], sparse=[("a", 3.0), ("b", 2.9)])
    fused = {f.point_id: f.score for f in fuse(rankings, RRF)}
    assert fused["a"] == pytest.approx(1.0)
    assert fused["b"] == pytest.approx((2 / 62) / (2 / 61))


def test_empty_rankings_fuse_to_nothing() -> None:
    assert fuse(Rankings([], []), CONVEX) == []
    assert _order(Rankings([("a", 0.3)], []), CONVEX) == ["a"]


def test_chunks_holding_every_rare_identifier_come_first() -> None:
    # "--no-hardlinks": the flag is held by one chunk, its word "hardlink" by many; the
    # hardlink(1) page is closer in meaning and in BM25 not far behind.
    flag, word = 101, 202
    rankings = Rankings(
        dense=[("hardlink_1", 0.63), ("hardlink_2", 0.56), ("git_clone", 0.20)],
        sparse=[("git_clone", 15.0), ("hardlink_2", 10.9), ("hardlink_1", 10.3)],
        holding={
            flag: [("git_clone", "git")],
            word: [(p, p) for p in ("hardlink_1", "hardlink_2", "git_clone", "x", "y")],
        },
    )
    without = fuse(Rankings(rankings.dense, rankings.sparse), CONVEX)
    assert without[0].point_id == "hardlink_1"
    fused = fuse(rankings, CONVEX)
    assert fused[0].point_id == "git_clone"
    assert (fused[0].lead, fused[0].score) == ("identifier", 1.0)
    # A term held by more documents than `rare_max` is not rare: no promotion for it alone.
    common = Rankings(rankings.dense, rankings.sparse, {word: rankings.holding[word]})
    assert fuse(common, CONVEX)[0].point_id == "hardlink_1"


def test_every_rare_identifier_must_be_held() -> None:
    rankings = Rankings(
        dense=[("a", 0.6), ("b", 0.59), ("c", 0.58)],
        sparse=[("c", 5.0), ("b", 4.9), ("a", 4.8)],
        holding={1: [("a", "A"), ("b", "B")], 2: [("b", "B")], 3: []},
    )
    fused = fuse(rankings, CONVEX)
    assert [(f.point_id, f.lead) for f in fused][:2] == [("b", "identifier"), ("c", None)]


def test_rarity_counts_documents_not_chunks() -> None:
    # A code in a document's title is in the context prefix of all its chunks: five chunks of
    # one document hold it, and it is still rare.
    code = 7
    title_chunks = [(f"title_{i}", "doc_title") for i in range(5)]
    rankings = Rankings(
        dense=[("near", 0.52), ("title_3", 0.40)],
        sparse=[("near", 6.0), ("title_3", 5.9)],
        holding={code: title_chunks},
    )
    fused = fuse(rankings, CONVEX)
    assert fused[0].point_id == "title_3"
    assert fused[0].lead == "identifier"
    # Four documents hold it: common.
    spread = [(f"c{i}", f"doc{i % 4}") for i in range(5)]
    common = fuse(Rankings(rankings.dense, rankings.sparse, {code: spread}), CONVEX)
    assert common[0].point_id == "near"
    assert all(f.lead != "identifier" for f in common)


def test_a_probe_that_fills_its_limit_does_not_count_as_rare() -> None:
    # The probe found as many chunks as it may: more documents may hold the term.
    params = FusionParams(dense_weight=0.5, probe_limit=4)
    full = [(f"c{i}", "one_doc") for i in range(4)]
    rankings = Rankings([("x", 0.5), ("c1", 0.4)], [("x", 3.0), ("c1", 2.9)], {9: full})
    assert fuse(rankings, params)[0].point_id == "x"
    partial = Rankings(rankings.dense, rankings.sparse, {9: full[:3]})
    assert fuse(partial, params)[0].point_id == "c1"


PER_QUERY = FusionParams(question_dense_weight=0.8, exact_dense_weight=0.3, plain_dense_weight=0.5)


@pytest.mark.parametrize(
    ("query", "kind", "weight"),
    [
        # A question, asked in the asker's own words, leans on meaning.
        ("how do I stop a package from being upgraded", QueryKind.QUESTION, 0.8),
        ("Which package owns this file?", QueryKind.QUESTION, 0.8),
        ("my laptop forgets the wifi password after a reboot?", QueryKind.QUESTION, 0.8),
        # Identifiers and quoted words lean on the words themselves, question or not.
        ("what does --no-hardlinks do", QueryKind.EXACT, 0.3),
        ("error XJ-4471 on start", QueryKind.EXACT, 0.3),
        ("where is /etc/gai.conf read", QueryKind.EXACT, 0.3),
        ('pages that say "holding back"', QueryKind.EXACT, 0.3),
        ("pages that say \u201cholding back\u201d", QueryKind.EXACT, 0.3),
        # Keywords, titles and descriptions (in the documents' words, often): balanced.
        ("apt pinning", QueryKind.PLAIN, 0.5),
        ("copy files and directories", QueryKind.PLAIN, 0.5),
        ("Debian package management", QueryKind.PLAIN, 0.5),
    ],
)
def test_the_dense_weight_follows_the_kind_of_query(
    query: str, kind: QueryKind, weight: float
) -> None:
    assert query_kind(query) is kind
    assert dense_weight_for(query, PER_QUERY) == weight


def test_a_dense_weight_that_is_set_is_used_for_every_query() -> None:
    params = FusionParams(dense_weight=0.6, question_dense_weight=0.9, exact_dense_weight=0.1)
    assert dense_weight_for("how do I stop a package from being upgraded", params) == 0.6
    assert dense_weight_for("--no-hardlinks", params) == 0.6


# Close races (no lead) where the methods disagree: "steady" is second in both rankings, "spike"
# first in the sparse one by a little and nowhere in the dense one.
RACE = Rankings(
    dense=[("top", 0.80), ("steady", 0.79), ("low", 0.70), ("lowest", 0.69)],
    sparse=[("spike", 9.5), ("steady", 9.0), ("top", 4.0), ("far", 1.0)],
)


def test_dbsf_scales_each_ranking_by_its_mean_and_three_deviations() -> None:
    params = FusionParams(method=FusionMethod.DBSF, dense_weight=0.5)
    fused = {f.point_id: f.score for f in fuse(RACE, params)}

    def scaled(scores: list[float], score: float) -> float:
        mean = sum(scores) / len(scores)
        deviation = math.sqrt(sum((s - mean) ** 2 for s in scores) / len(scores))
        return (score - (mean - 3 * deviation)) / (6 * deviation)

    dense, sparse = [0.80, 0.79, 0.70, 0.69], [9.5, 9.0, 4.0, 1.0]
    assert fused["steady"] == pytest.approx(
        0.5 * scaled(dense, 0.79) + 0.5 * scaled(sparse, 9.0), abs=1e-6
    )
    # A point one retriever did not rank gets nothing from it (as Qdrant's DBSF).
    assert fused["spike"] == pytest.approx(0.5 * scaled(sparse, 9.5), abs=1e-6)
    assert _order(RACE, params)[0] == "steady"


def test_zscore_standardises_each_ranking_and_puts_the_best_at_one() -> None:
    params = FusionParams(method=FusionMethod.ZSCORE, dense_weight=0.5)
    fused = fuse(RACE, params)
    assert fused[0].point_id == "steady"
    assert fused[0].score == 1.0
    assert min(f.score for f in fused) == 0.0
    # Weighted towards the semantic side, its own best comes first.
    semantic = FusionParams(method=FusionMethod.ZSCORE, dense_weight=0.9)
    assert _order(RACE, semantic)[0] == "top"


def test_gated_fusion_is_the_semantic_ranking_unless_the_query_holds_rare_terms() -> None:
    # The keyword best, 9.5, over three query terms: 3.17 a term.
    closed = FusionParams(method=FusionMethod.GATED, dense_weight=0.5, rare_gate=3.5, query_terms=3)
    assert _order(RACE, closed)[:4] == ["top", "steady", "low", "lowest"]
    opened = FusionParams(method=FusionMethod.GATED, dense_weight=0.5, rare_gate=3.0, query_terms=3)
    convex = FusionParams(method=FusionMethod.CONVEX, dense_weight=0.5)
    assert _order(RACE, opened) == _order(RACE, convex)


def test_the_gate_counts_a_querys_distinct_content_words() -> None:
    gated = FusionParams(method=FusionMethod.GATED)
    assert for_query("Rotating the rotated logs of nginx", gated).query_terms == 3
    assert for_query("Rotating the rotated logs of nginx", FusionParams()).query_terms == 0


@pytest.mark.parametrize("method", [FusionMethod.DBSF, FusionMethod.ZSCORE])
def test_score_fusions_take_rankings_without_spread_or_one_side(method: FusionMethod) -> None:
    params = FusionParams(method=method, dense_weight=0.5)
    flat = Rankings(dense=[("a", 0.5), ("b", 0.5)], sparse=[])
    assert {f.point_id for f in fuse(flat, params)} == {"a", "b"}
    assert fuse(Rankings(dense=[], sparse=[]), params) == []
