"""Pipeline events: what travels on Kafka comes back the same."""

from __future__ import annotations

import numpy as np

from schemas.domain import ChunkRecord
from schemas.events import ChunkBatchEmbedded, DocumentUploaded


def test_embedded_batches_round_trip_dense_and_sparse_vectors() -> None:
    chunks = [ChunkRecord(chunk_index=i, text=f"t{i}", start=0, end=2) for i in range(3)]
    dense = np.random.default_rng(1).normal(size=(3, 8)).astype(np.float32)
    sparse = [([3, 17, 4_000_000_000], [0.5, 1.25, 2.0]), ([], []), ([9], [0.125])]
    event = ChunkBatchEmbedded(
        tenant_id="t", kb_id="kb", document_id="doc", generation=1, batch_index=0, last=True,
        chunks=chunks, model="m", dimensions=8,
        dense_b64=ChunkBatchEmbedded.encode_vectors(dense),
        **ChunkBatchEmbedded.encode_sparse(sparse),
    )  # fmt: skip
    decoded = ChunkBatchEmbedded.model_validate_json(event.model_dump_json())
    assert np.array_equal(decoded.vectors(), dense)
    assert decoded.sparse() == sparse
    assert decoded.key == b"doc/1"


def test_a_new_run_of_a_document_is_keyed_anew() -> None:
    first = DocumentUploaded(
        tenant_id="t", kb_id="kb", document_id="doc", generation=1, storage_key="k",
        filename="a.txt", content_type="text/plain",
    )  # fmt: skip
    again = first.model_copy(update={"generation": 2})
    # A re-drive goes where its stuck predecessor may not be; a run's events stay together.
    assert first.key != again.key
    assert first.key == first.model_copy(update={"event_id": "other"}).key
