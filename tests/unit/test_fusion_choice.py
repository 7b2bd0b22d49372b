"""Choosing a fusion across corpora from per-question figures (pure logic; instant)."""

from __future__ import annotations

import pytest

from benchmarks.fusion_choice import best_variant, cross_validated


def _scores(ndcg: float, recall4: float | None = None) -> dict[str, float]:
    return {"ndcg10": ndcg, "recall4": ndcg if recall4 is None else recall4}


# Two corpora: on "a" the rank fusion is better, on "b" the score fusion, by more.
PER_QUERY = {
    "dense": {"a1": _scores(0.5), "a2": _scores(0.5), "b1": _scores(0.4), "b2": _scores(0.4)},
    "hybrid_rrf60": {
        "a1": _scores(0.9),
        "a2": _scores(0.7),
        "b1": _scores(0.3),
        "b2": _scores(0.3),
    },
    "hybrid_dbsf": {"a1": _scores(0.6), "a2": _scores(0.6), "b1": _scores(0.9), "b2": _scores(0.9)},
}
CORPUS = {"a1": "a", "a2": "a", "b1": "b", "b2": "b"}
HYBRIDS = ["hybrid_rrf60", "hybrid_dbsf"]


def test_the_best_variant_is_the_best_mean_ndcg_on_the_questions_given() -> None:
    assert best_variant(PER_QUERY, HYBRIDS, ["a1", "a2"]) == "hybrid_rrf60"
    assert best_variant(PER_QUERY, HYBRIDS, ["b1", "b2"]) == "hybrid_dbsf"
    assert best_variant(PER_QUERY, HYBRIDS, list(CORPUS)) == "hybrid_dbsf"


def test_a_tie_goes_to_recall_at_4_then_to_the_first_asked() -> None:
    tied = {
        "x": {"q": {"ndcg10": 0.5, "recall4": 0.4}},
        "y": {"q": {"ndcg10": 0.5, "recall4": 0.6}},
        "z": {"q": {"ndcg10": 0.5, "recall4": 0.6}},
    }
    assert best_variant(tied, ["x", "y", "z"], ["q"]) == "y"
    assert best_variant(tied, ["z", "y"], ["q"]) == "z"


def test_each_corpus_is_scored_by_a_choice_made_without_it() -> None:
    folds = {
        fold.held_out: fold for fold in cross_validated(PER_QUERY, HYBRIDS, CORPUS, ["ndcg10"])
    }
    # Held out "a", the choice made on "b" is DBSF, which does worse on "a" than RRF would.
    assert folds["a"].chosen == "hybrid_dbsf"
    assert folds["a"].figures == {"ndcg10": pytest.approx(0.6)}
    assert folds["a"].dense == {"ndcg10": pytest.approx(0.5)}
    assert folds["b"].chosen == "hybrid_rrf60"
    assert folds["b"].figures == {"ndcg10": pytest.approx(0.3)}
    assert folds["b"].as_json() == {
        "held_out": "b", "chosen": "hybrid_rrf60", "ndcg10": 0.3, "dense_ndcg10": 0.4,
    }  # fmt: skip


def test_choosing_needs_variants_questions_and_two_corpora() -> None:
    with pytest.raises(ValueError, match="no variants"):
        best_variant(PER_QUERY, [], ["a1"])
    with pytest.raises(ValueError, match="no questions"):
        best_variant(PER_QUERY, HYBRIDS, [])
    with pytest.raises(ValueError, match="two corpora"):
        cross_validated(PER_QUERY, HYBRIDS, {"a1": "a"}, ["ndcg10"])
