"""Choosing a fusion by cross-validation across corpora, from the quality benchmark's per-question
figures (pure logic).

A fusion (a hybrid variant the benchmark asked: `hybrid`, `hybrid_rrf60`, `hybrid_dbsf0.7`, ...)
is chosen by its mean nDCG@10 over the questions it is chosen on (then recall@4, then the order
the variants were asked in). Two uses:

- `cross_validated`: each corpus in turn is held out, the fusion is chosen on the others and
  scored on it, so every corpus's figure comes from a choice that never saw it: how well the
  choosing itself carries over to new documents;
- `best_variant` on the tuning part's questions alone: the choice, reported on the test part.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass

PerQuery = Mapping[str, Mapping[str, Mapping[str, float]]]


def _mean(values: Sequence[float]) -> float:
    return sum(values) / len(values) if values else 0.0


def mean_of(per_query: PerQuery, variant: str, questions: Collection[str], metric: str) -> float:
    """A variant's mean of a metric over some questions."""
    scores = per_query[variant]
    return _mean([scores[q][metric] for q in questions])


def best_variant(per_query: PerQuery, variants: Sequence[str], questions: Collection[str]) -> str:
    """The variant with the best mean nDCG@10 over the questions, then recall@4; the first asked
    wins a tie."""
    if not variants:
        raise ValueError("no variants to choose from")
    if not questions:
        raise ValueError("no questions to choose on")

    def key(indexed: tuple[int, str]) -> tuple[float, float, int]:
        order, variant = indexed
        return (
            round(mean_of(per_query, variant, questions, "ndcg10"), 10),
            round(mean_of(per_query, variant, questions, "recall4"), 10),
            -order,
        )

    return max(enumerate(variants), key=key)[1]


@dataclass(frozen=True)
class Fold:
    """One corpus held out: the variant chosen on the others, and its figures and dense's on
    the held-out corpus."""

    held_out: str
    chosen: str
    figures: dict[str, float]
    dense: dict[str, float]

    def as_json(self) -> dict[str, object]:
        """The fold as the results file keeps it."""
        return {
            "held_out": self.held_out,
            "chosen": self.chosen,
            **{metric: round(value, 4) for metric, value in self.figures.items()},
            **{f"dense_{metric}": round(value, 4) for metric, value in self.dense.items()},
        }


def cross_validated(
    per_query: PerQuery,
    variants: Sequence[str],
    corpus_of: Mapping[str, str],
    metrics: Sequence[str],
) -> list[Fold]:
    """Leave one corpus out, for every corpus the questions come from."""
    corpora = sorted(set(corpus_of.values()))
    if len(corpora) < 2:
        raise ValueError("cross-validation across corpora needs two corpora or more")
    folds = []
    for held_out in corpora:
        inside = [q for q, c in corpus_of.items() if c == held_out]
        outside = [q for q, c in corpus_of.items() if c != held_out]
        chosen = best_variant(per_query, variants, outside)
        folds.append(
            Fold(
                held_out=held_out,
                chosen=chosen,
                figures={m: mean_of(per_query, chosen, inside, m) for m in metrics},
                dense={m: mean_of(per_query, "dense", inside, m) for m in metrics},
            )
        )
    return folds
