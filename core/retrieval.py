"""The two choices of how a search ranks chunks, named once: the retriever (`RetrievalMode`)
and, for hybrid search, how its two rankings are fused (`FusionMethod`). Request and record
models take them through the `...Field` types, which put the values in the schema inline."""

from __future__ import annotations

from enum import StrEnum
from typing import Literal


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
    """How hybrid retrieval combines its two rankings."""

    CONVEX = "convex"
    RRF = "rrf"


RetrievalModeField = Literal[RetrievalMode.DENSE, RetrievalMode.SPARSE, RetrievalMode.HYBRID]
# A bot answers agents: dense or hybrid (keyword search alone is for people's searches).
BotRetrievalModeField = Literal[RetrievalMode.DENSE, RetrievalMode.HYBRID]
FusionField = Literal[FusionMethod.CONVEX, FusionMethod.RRF]
