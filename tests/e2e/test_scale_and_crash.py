"""Two embed workers share the load; one is killed mid-document; large inputs go through.

Runs a stack with servers of its own and two embed workers, feeds it a 300-page PDF and a
100,000-row CSV, SIGKILLs an embed worker while they are being embedded (and starts a
replacement, as an orchestrator would), and checks that every document still ends indexed
with the right number of chunks and not one duplicate point, by opening the vector store
itself once the stack is stopped.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from core.filters import chunks_where
from infra.vectorstore.edge import EdgeVectorStore
from tests.conftest import FIXTURES, RunningPipeline, own_stack
from tests.e2e.client import Api
from tests.factories import long_pdf, stock_csv
from workers.chunk.chunking import chunk_document
from workers.extract.extractors import extract

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningPipeline]:
    """A stack of this module's own, with two embed workers and the default upload limit."""
    env = {
        "RAGLINE_INGEST__MAX_UPLOAD_MB": "20",
        "RAGLINE_INGEST__EXTRACT_PART_CHARS": "32000",
        "RAGLINE_EMBEDDING__BATCH_SIZE": "32",
        # The reconciler is not this module's subject: a machine so loaded that nothing moves
        # for the suite's usual 3 s while the group rebalances after the kill would restart
        # every document from the start, over and over (the 300 pages and 100,000 rows).
        "RAGLINE_INGEST__STALL_AFTER_S": "60",
    }
    with own_stack(tmp_path_factory.mktemp("scale"), env, embed_workers=2) as running:
        yield running


@pytest.fixture
async def api(stack: RunningPipeline) -> AsyncIterator[Api]:
    """The admin of tenant `default`."""
    async with httpx.AsyncClient(base_url=stack.url, timeout=60) as http:
        yield Api(http, stack, stack.admin_token)


@pytest.mark.timeout(900)
async def test_load_is_shared_and_a_killed_worker_loses_nothing(
    api: Api, stack: RunningPipeline
) -> None:
    kb = await api.create_kb("Warehouse")
    inputs = {
        "model-300-pages.pdf": long_pdf(300),
        "stock-100k-rows.csv": stock_csv(100_000),
        "crazyones.pdf": (FIXTURES / "crazyones.pdf").read_bytes(),
        "notes.md": b"# Notes\n\nForklift batteries are swapped at noon.",
    }
    uploaded = {name: await api.upload(kb["id"], name, data) for name, data in inputs.items()}
    embed_urls = [api.worker_metrics("embed", 0), api.worker_metrics("embed", 1)]
    progress_seen: list[dict[str, Any]] = []

    async def embedded(url: str) -> float:
        return await api.metric(url, "ragline_chunks_embedded_total")

    async with asyncio.timeout(300):
        # Both workers take part before one of them dies.
        while min([await embedded(url) for url in embed_urls]) == 0:
            await _watch(api, kb["id"], uploaded, progress_seen)
            await asyncio.sleep(0.3)
    before = [await embedded(url) for url in embed_urls]
    stack.pipeline.workers("embed")[0].kill()
    # As an orchestrator would, start a replacement; it joins the same consumer group.
    stack.pipeline.add_worker("embed")

    states: dict[str, dict[str, Any]] = {}
    try:
        async with asyncio.timeout(600):
            while True:
                states = await _watch(api, kb["id"], uploaded, progress_seen)
                if all(s["parse_status"] in ("indexed", "failed") for s in states.values()):
                    break
                await asyncio.sleep(1.0)
    except TimeoutError:
        raise AssertionError(f"not all indexed or failed in 600 s: {_progress(states)}") from None

    assert all(count > 0 for count in before)
    assert await embedded(embed_urls[1]) > before[1]
    # While embedding, a document shows how far it got.
    assert any(
        p["chunk_count"] and 0 < p["chunks_embedded"] < p["chunk_count"] for p in progress_seen
    )
    expected = {name: len(chunk_document(extract(data, name))[0]) for name, data in inputs.items()}
    for name, state in states.items():
        assert state["parse_status"] == "indexed", (name, state)
        assert state["chunk_count"] == expected[name], name
        assert state["chunks_embedded"] == expected[name], name
    counted = await api.kb(kb["id"])
    assert counted["chunk_count"] == sum(expected.values())
    hits = await api.search([kb["id"]], "sku 100042 quantity", top_k=3)
    assert hits

    stack.pipeline.stop()
    store = EdgeVectorStore(Path(stack.run_dir) / "vectors", 384)
    await store.ensure_collection()
    try:
        for name, state in states.items():
            assert (
                await store.count(chunks_where("default", document_id=state["id"]))
                == expected[name]
            ), name
            assert (
                await store.count(chunks_where("default", document_id=state["id"], active=True))
                == expected[name]
            )
        assert await store.count(chunks_where("default", kb_id=kb["id"])) == sum(expected.values())
    finally:
        await store.close()


async def _watch(
    api: Api, kb_id: str, uploaded: dict[str, dict[str, Any]], seen: list[dict[str, Any]]
) -> dict[str, dict[str, Any]]:
    states = {name: await api.document(kb_id, doc["id"]) for name, doc in uploaded.items()}
    seen.extend(s for s in states.values() if s["parse_status"] in ("embedding", "indexing"))
    return states


def _progress(states: dict[str, dict[str, Any]]) -> dict[str, tuple[Any, ...]]:
    """Where each document stands: status, chunks embedded of chunks, whether it is stalled,
    each stage's tries, error."""
    return {
        name: (
            state["parse_status"],
            state["chunks_embedded"],
            state["chunk_count"],
            state["stalled"],
            state["attempts"],
            state["parse_error"],
        )
        for name, state in states.items()
    }
