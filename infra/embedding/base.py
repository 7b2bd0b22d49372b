"""The embedder interface: texts in, L2-normalised float32 vectors out."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

import numpy as np
from numpy.typing import NDArray


class Embedder(Protocol):
    """Turns text into dense vectors. Calls block: run them in a worker thread."""

    @property
    def model_id(self) -> str:
        """A stable name of the model and its output size (part of cache keys)."""
        ...

    @property
    def dimensions(self) -> int:
        """Length of each vector."""
        ...

    def embed_documents(self, texts: Sequence[str]) -> NDArray[np.float32]:
        """One normalised vector per text, shape (len(texts), dimensions)."""
        ...

    def embed_queries(self, texts: Sequence[str]) -> NDArray[np.float32]:
        """One normalised vector per search query, shape (len(texts), dimensions)."""
        ...

    def close(self) -> None:
        """Lets go of the model's threads and memory (the embedder is not used after)."""
        ...


def normalise(vectors: NDArray[np.float32]) -> NDArray[np.float32]:
    """Scales each row to unit length (a zero row stays zero)."""
    norms: NDArray[np.float32] = np.linalg.norm(vectors, axis=1, keepdims=True).astype(np.float32)
    norms[norms == 0] = 1.0
    scaled: NDArray[np.float32] = (vectors / norms).astype(np.float32)
    return scaled
