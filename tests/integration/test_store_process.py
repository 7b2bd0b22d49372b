"""The embedded store served by a process of its own (`python -m ragline.store`): only its owner
reaches the socket, a store process gone fails calls with ServiceUnavailable and a new one is
reached again, a call the store has not is refused, and it serves its memory on `/metrics` as
every Ragline process does. (The contract suite runs every store operation through it:
`test_vector_store_contract.py`, `remote`.) About 8 s."""

from __future__ import annotations

import asyncio
import os
import stat
import subprocess
import sys
from pathlib import Path

import httpx
import numpy as np
import pytest
from prometheus_client.parser import text_string_to_metric_families

from core.errors import PermanentError, ServiceUnavailable
from core.filters import SearchScope, chunks_where
from core.retrieval import RetrievalMode
from devstack.launcher import free_port
from infra.vectorstore.base import ChunkPoint, RankQuery
from infra.vectorstore.remote import RemoteVectorStore
from schemas.chunks import ChunkPayload
from schemas.domain import chunk_point_id

DIM = 8


def _points(count: int) -> list[ChunkPoint]:
    vectors = np.random.default_rng(3).normal(size=(count, DIM)).astype(np.float32)
    return [
        ChunkPoint(
            point_id=chunk_point_id(f"doc_{n}", 0),
            dense=vectors[n],
            payload=ChunkPayload(
                tenant_id="t1",
                kb_id="kb1",
                document_id=f"doc_{n}",
                chunk_index=0,
                chunk_text=f"chunk {n}",
                active=True,
                readers=["tenant"],
            ),
        )
        for n in range(count)
    ]


def _start(tmp_path: Path, metrics_port: int = 0) -> subprocess.Popen[bytes]:
    env = {
        **os.environ,
        "RAGLINE_RUN_DIR": str(tmp_path),
        "RAGLINE_EMBEDDING__DIMENSIONS": str(DIM),
        "RAGLINE_QDRANT__STORE_SOCKET": str(tmp_path / "store.sock"),
        "RAGLINE_LOCAL_MODE": "true",
        "RAGLINE_METRICS_PORT": str(metrics_port),
    }
    return subprocess.Popen([sys.executable, "-m", "ragline.store"], env=env)


async def _stopped(process: subprocess.Popen[bytes]) -> None:
    process.terminate()
    await asyncio.to_thread(process.wait, 30)


async def test_a_store_process_serves_its_owner_and_is_reached_again_after_a_restart(
    tmp_path: Path,
) -> None:
    socket = tmp_path / "store.sock"
    process = _start(tmp_path)
    store = RemoteVectorStore(socket, "vectors", DIM)
    try:
        await store.ensure_collection()  # waits for the process to listen
        assert stat.S_IMODE(socket.stat().st_mode) == 0o600
        await store.upsert(_points(20))
        assert await store.count(chunks_where("t1")) == 20
        scope = SearchScope("t1", ("kb1",), ("tenant",))
        query = np.ones(DIM, dtype=np.float32) / np.sqrt(DIM)
        ranked = await store.rank(RankQuery(scope, query, 5, RetrievalMode.DENSE))
        assert len(ranked.dense) == 5
        with pytest.raises(PermanentError, match="no call"):
            await store._call("close")

        await _stopped(process)
        with pytest.raises(ServiceUnavailable):
            await store.count(chunks_where("t1"))
        process = _start(tmp_path)
        for _ in range(300):  # until the new process listens
            try:
                counted = await store.count(chunks_where("t1"))
                break
            except ServiceUnavailable:
                await asyncio.sleep(0.1)
        assert counted == 20  # the points were kept on disk
    finally:
        await store.close()
        await _stopped(process)


async def test_a_store_process_serves_its_memory_on_its_metrics_port(tmp_path: Path) -> None:
    port = free_port()
    process = _start(tmp_path, metrics_port=port)
    store = RemoteVectorStore(tmp_path / "store.sock", "vectors", DIM)
    try:
        await store.ensure_collection()  # waits for the process to listen
        async with httpx.AsyncClient() as http:
            answer = await http.get(f"http://127.0.0.1:{port}/metrics")
        assert answer.status_code == 200
        held = {
            sample.labels["kind"]: sample.value
            for family in text_string_to_metric_families(answer.text)
            for sample in family.samples
            if sample.name == "ragline_malloc_bytes"
        }
        assert held["in_use"] > 1_000_000, held
    finally:
        await store.close()
        await _stopped(process)
