"""A fast, deterministic embedder with no model file: for tests and tiny demos, never production.

Each text becomes a bag of features (its lower-cased words other than a few very common English
ones, weighted 1, and each word's character trigrams with the word's edges marked, weighted 1
together), hashed into all but the last dimension with a sign taken from the same hash (the
"hashing trick"). The last dimension holds a constant (`SHARED`), the same for every text, and
the whole is normalised to unit length. Texts that share words therefore lie near each other
(shared word parts add only a little), and the same text gets the same vector in every process
(CRC-32, not Python's salted `hash`). The constant puts cosine scores on about the scale of the
packaged sentence model's (unrelated texts about 0.33, a question and a passage sharing its key
words 0.55 to 0.8), so that the default score thresholds keep about the same passages. It knows
nothing of meaning: "car" and "automobile" are strangers. It serves the tests whose subject is
the pipeline's mechanics (exactly once, faults, limits, governance…), where loading and running
the real model costs seconds of CPU per stack and per document and tests nothing they claim.
"""

from __future__ import annotations

import re
import zlib
from collections.abc import Sequence
from functools import lru_cache

import numpy as np
from numpy.typing import NDArray

from infra.embedding.base import normalise
from infra.settings.embedding import EmbeddingSettings

WORD = re.compile(r"\w+", re.UNICODE)
# Words that say nothing of a text's subject (questions are full of them).
COMMON = frozenset(
    "a an and are as at be by can did do does for from how i in is it its me my of on or our "
    "the to was we what when where which who why will with you your".split()
)
# A word's trigrams share this weight between them, so that long words do not outweigh short ones.
TRIGRAM_WEIGHT = 1.0
# The constant last component, relative to the unit-length features.
SHARED = 0.7


@lru_cache(maxsize=65_536)
def _features(word: str, slots: int) -> tuple[tuple[int, ...], tuple[float, ...]]:
    """The slots a word adds to and the signed amounts: the word and its trigrams."""
    marked = f"<{word}>"
    trigrams = [marked[i : i + 3] for i in range(len(marked) - 2)]
    share = TRIGRAM_WEIGHT / len(trigrams)
    indexes: list[int] = []
    amounts: list[float] = []
    for feature, weight in [(f"w:{word}", 1.0), *((f"c:{t}", share) for t in trigrams)]:
        hashed = zlib.crc32(feature.encode())
        indexes.append(hashed % slots)
        amounts.append(weight if hashed & 0x8000_0000 else -weight)
    return tuple(indexes), tuple(amounts)


class HashedEmbedder:
    """Hashed word and character-trigram features (`embedding.provider: hashed`)."""

    def __init__(self, settings: EmbeddingSettings) -> None:
        self._dimensions = settings.dimensions

    @property
    def model_id(self) -> str:
        """A stable name of the method and its output size."""
        return f"hashed-word-trigrams@{self._dimensions}"

    @property
    def dimensions(self) -> int:
        """Length of each vector."""
        return self._dimensions

    def embed_documents(self, texts: Sequence[str]) -> NDArray[np.float32]:
        """One normalised vector per text (a text with no word but common ones gets a zero
        vector: it points nowhere)."""
        slots = self._dimensions - 1
        features = np.zeros((len(texts), slots), dtype=np.float32)
        for row, text in enumerate(texts):
            indexes: list[int] = []
            amounts: list[float] = []
            for word in WORD.findall(text.lower()):
                if word not in COMMON:
                    word_indexes, word_amounts = _features(word, slots)
                    indexes += word_indexes
                    amounts += word_amounts
            np.add.at(features[row], indexes, amounts)
        features = normalise(features)
        shared = np.where(features.any(axis=1, keepdims=True), SHARED, 0.0).astype(np.float32)
        return normalise(np.hstack([features, shared]))

    def embed_queries(self, texts: Sequence[str]) -> NDArray[np.float32]:
        """Queries are embedded as documents are (the features are symmetric)."""
        return self.embed_documents(texts)

    def close(self) -> None:
        """Nothing to let go of."""
