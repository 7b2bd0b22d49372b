"""Telling a difference from noise on a question set: a 95% bootstrap interval for a mean, and
two configurations compared paired, question by question.

The quality benchmark and a KB's evaluation ask every question in every configuration, so two
configurations' scores are paired by question. A paired comparison counts the questions one
answers better (wins), worse (losses) and alike, and tests the mean difference with a
randomisation test: under "the two are interchangeable", each question's difference is as
likely positive as negative, so the p-value is the share of random sign flips whose mean
difference is at least as far from zero as the one observed (two-sided; Smucker, Allan and
Carterette 2007 recommend it for retrieval evaluation). A difference is called significant at
p < 0.05. Both use a fixed seed, so the same scores always give the same figures.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

RESAMPLES = 10_000
SIGNIFICANCE = 0.05
SEED = 20_261_127


def bootstrap_interval(
    values: Sequence[float], confidence: float = 0.95, resamples: int = RESAMPLES
) -> tuple[float, float]:
    """The percentile bootstrap interval of the mean of `values`."""
    if not values:
        raise ValueError("no values to bootstrap")
    data = np.asarray(values, dtype=np.float64)
    rng = np.random.default_rng(SEED)
    picks = rng.integers(0, len(data), size=(resamples, len(data)))
    means = data[picks].mean(axis=1)
    tail = (1 - confidence) / 2 * 100
    low, high = np.percentile(means, [tail, 100 - tail])
    return float(low), float(high)


@dataclass(frozen=True)
class Paired:
    """Mode `a` against mode `b` on the same questions."""

    questions: int
    wins: int
    losses: int
    ties: int
    # Mean of a - b, with its 95% bootstrap interval.
    difference: float
    interval: tuple[float, float]
    p_value: float

    @property
    def significant(self) -> bool:
        """Whether the difference is unlikely to be noise (p < 0.05)."""
        return self.p_value < SIGNIFICANCE

    def as_json(self) -> dict[str, object]:
        """The comparison as a results file keeps it."""
        return {
            "questions": self.questions,
            "wins": self.wins,
            "losses": self.losses,
            "ties": self.ties,
            "difference": round(self.difference, 4),
            "interval": [round(self.interval[0], 4), round(self.interval[1], 4)],
            "p_value": round(self.p_value, 4),
            "significant": self.significant,
        }


def compare(a: Mapping[str, float], b: Mapping[str, float], resamples: int = RESAMPLES) -> Paired:
    """Mode `a`'s per-question scores against mode `b`'s (the same questions in both)."""
    if set(a) != set(b):
        raise ValueError("the two modes were not asked the same questions")
    if not a:
        raise ValueError("no questions to compare")
    differences = np.asarray([a[q] - b[q] for q in sorted(a)], dtype=np.float64)
    observed = float(differences.mean())
    rng = np.random.default_rng(SEED)
    signs = rng.choice(np.array([-1.0, 1.0]), size=(resamples, len(differences)))
    flipped = np.abs((signs * differences).mean(axis=1))
    # The observed assignment counts as one of the permutations (so p is never 0).
    at_least = int(np.count_nonzero(flipped >= abs(observed) - 1e-12)) + 1
    return Paired(
        questions=len(differences),
        wins=int(np.count_nonzero(differences > 0)),
        losses=int(np.count_nonzero(differences < 0)),
        ties=int(np.count_nonzero(differences == 0)),
        difference=observed,
        interval=bootstrap_interval(differences.tolist(), resamples=resamples),
        p_value=at_least / (resamples + 1),
    )
