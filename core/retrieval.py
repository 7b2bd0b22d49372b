"""The two choices of how a search ranks chunks, named once: the retriever (`RetrievalMode`)
and, for hybrid search, how its two rankings are fused (`FusionMethod`). Request and record
models take them through the `...Field` types, which put the values in the schema inline."""

from __future__ import annotations

from enum import StrEnum
from typing import Literal, get_args


class _Choice(StrEnum):
    """A choice whose members show as their values (in validation errors too)."""

    def __repr__(self) -> str:
        return repr(self.value)


class RetrievalMode(_Choice):
    """Which retriever ranks the chunks."""

    DENSE = "dense"
    SPARSE = "sparse"
    HYBRID = "hybrid"


class FusionMethod(_Choice):
    """How hybrid retrieval combines its two rankings (`services.search.fusion`)."""

    # Scores scaled by each retriever's best, weighted.
    CONVEX = "convex"
    # Reciprocal ranks, 1 / (k + rank), summed.
    RRF = "rrf"
    # Distribution-based score fusion (Qdrant's): scores scaled by mean +- 3 deviations, weighted.
    DBSF = "dbsf"
    # Scores standardised per query and retriever (z-scores), weighted.
    ZSCORE = "zscore"
    # The semantic ranking, joined by the keyword one (convex) only when the query holds rare
    # terms: the keyword retriever's best scores highly per query term.
    GATED = "gated"


RetrievalModeField = Literal[RetrievalMode.DENSE, RetrievalMode.SPARSE, RetrievalMode.HYBRID]
# A bot answers agents: dense or hybrid (keyword search alone is for people's searches).
BotRetrievalModeField = Literal[RetrievalMode.DENSE, RetrievalMode.HYBRID]
FusionField = Literal[
    FusionMethod.CONVEX,
    FusionMethod.RRF,
    FusionMethod.DBSF,
    FusionMethod.ZSCORE,
    FusionMethod.GATED,
]
# The methods a dense weight applies to (all but RRF, which weighs ranks alike).
WEIGHTED_FUSIONS = frozenset(get_args(FusionField)) - {FusionMethod.RRF}
