"""The hashed embedder (`embedding.provider: hashed`): deterministic, and near for shared words.
Costs well under a second (one short subprocess)."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np

from infra.embedding.hashed import HashedEmbedder
from infra.settings.embedding import EmbeddingSettings

SETTINGS = EmbeddingSettings(provider="hashed")
DOCUMENTS = [
    "The ferry to the island leaves the harbour at nine every morning.",
    "Quarterly revenue grew by four percent on strong software licence sales.",
    "Reset your password from the account page, then sign in again.",
    "Bake the bread for forty minutes until the crust is golden.",
]


def test_vectors_have_the_configured_size_and_unit_length() -> None:
    embedder = HashedEmbedder(EmbeddingSettings(provider="hashed", dimensions=64))
    vectors = embedder.embed_documents(DOCUMENTS)
    assert vectors.shape == (4, 64)
    assert vectors.dtype == np.float32
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert embedder.dimensions == 64
    assert embedder.model_id == "hashed-word-trigrams@64"
    # A text without words has nothing to point at.
    assert not embedder.embed_documents(["  ...  "]).any()


def test_the_same_text_gets_the_same_vector_in_another_process_without_a_model() -> None:
    here = HashedEmbedder(SETTINGS).embed_queries(["Where does the ferry leave from?"])[0]
    script = (
        "import sys\n"
        "from infra.embedding.factory import build_embedder\n"
        "from infra.settings import EmbeddingSettings\n"
        "embedder = build_embedder(EmbeddingSettings(provider='hashed'))\n"
        "vector = embedder.embed_queries(['Where does the ferry leave from?'])[0]\n"
        "loaded = sorted({'torch', 'onnxruntime', 'sentence_transformers'} & set(sys.modules))\n"
        "print(type(embedder).__name__, loaded, vector.tobytes().hex())\n"
    )
    # Another hash seed: Python's own string hash would differ, CRC-32 does not.
    env = {**os.environ, "PYTHONHASHSEED": "12345"}
    there = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True, env=env
    ).stdout.split()
    assert there[:2] == ["HashedEmbedder", "[]"]  # no model runtime loaded
    assert np.array_equal(np.frombuffer(bytes.fromhex(there[2]), dtype=np.float32), here)
    again = HashedEmbedder(SETTINGS).embed_queries(["Where does the ferry leave from?"])[0]
    assert np.array_equal(again, here)


def test_texts_sharing_words_rank_above_unrelated_ones() -> None:
    embedder = HashedEmbedder(SETTINGS)
    documents = embedder.embed_documents(DOCUMENTS)
    questions = {
        "when does the ferry leave the harbour": 0,
        "software licence revenue": 1,
        "how do I reset my password": 2,
        "how long to bake bread": 3,
        "I forgot my password": 2,
    }
    for question, expected in questions.items():
        scores = documents @ embedder.embed_queries([question])[0]
        assert int(np.argmax(scores)) == expected, (question, scores)
        others = np.delete(scores, expected)
        assert scores[expected] > others.max() + 0.05, (question, scores)
