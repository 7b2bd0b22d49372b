"""Vectors already computed, by model and chunk text, so unchanged text is never re-embedded."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

import numpy as np
from bson.binary import Binary
from numpy.typing import NDArray
from pymongo.errors import BulkWriteError

from infra.mongo.client import EMBEDDINGS, Database, mongo_errors

DUPLICATE_KEY = 11000


def cache_key(model_id: str, text: str) -> str:
    """The cache entry of one text under one model."""
    return hashlib.sha256(f"{model_id}\n{text}".encode()).hexdigest()


class EmbeddingCache:
    """A MongoDB collection of float32 vectors keyed by hash of (model, text)."""

    def __init__(self, db: Database) -> None:
        self._entries = db[EMBEDDINGS]

    async def get_many(self, model_id: str, texts: Sequence[str]) -> dict[int, NDArray[np.float32]]:
        """The cached vectors of those texts that have one, by position in `texts`."""
        keys = [cache_key(model_id, text) for text in texts]
        async with mongo_errors():
            found = {
                doc["_id"]: np.frombuffer(doc["vector"], dtype="<f4").astype(np.float32)
                async for doc in self._entries.find({"_id": {"$in": list(set(keys))}})
            }
        return {i: found[key] for i, key in enumerate(keys) if key in found}

    async def put_many(
        self, model_id: str, texts: Sequence[str], vectors: NDArray[np.float32]
    ) -> None:
        """Stores vectors for texts; an entry another worker stored first is left as it is."""
        if not texts:
            return
        entries = {
            cache_key(model_id, text): Binary(np.asarray(vector, dtype="<f4").tobytes())
            for text, vector in zip(texts, vectors, strict=True)
        }
        try:
            async with mongo_errors():
                await self._entries.insert_many(
                    [{"_id": key, "vector": value} for key, value in entries.items()],
                    ordered=False,
                )
        except BulkWriteError as exc:
            errors = exc.details.get("writeErrors", [])
            if any(error.get("code") != DUPLICATE_KEY for error in errors):
                raise
