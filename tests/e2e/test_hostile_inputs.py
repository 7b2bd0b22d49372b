"""The hostile-input corpus (tests/fixtures/hostile) through the whole stack: each file ends with
a clear answer in bounded time and memory, no process dies, and the documents uploaded beside
them are indexed unharmed.

Memory is measured from outside the processes (their resident set, sampled every 0.1 s, the
extract worker's parser processes counted on their own) and held to the bounds below, which
the README states.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import psutil
import pytest

from tests.conftest import FIXTURES, RunningPipeline, own_stack
from tests.e2e.client import FINAL, Api
from tests.fixtures.hostile.corpus import CORPUS, HostileFile, write_corpus

MB = 1024 * 1024
# Peak resident memory each process may reach while the corpus goes through (MB). A parser
# process runs under an address-space limit (ingest.parser_memory_mb, 2,048 MB) that no file
# can take it past; the extract worker itself never holds more than a file and one segment.
MEMORY_BOUNDS_MB = {
    "api": 2_000,
    "extract": 500,
    "parser": 2_048,
    "chunk": 600,
    "embed": 1_500,
    "records": 400,
    "crawl": 400,
    "relay": 400,
}
# Every file ends (indexed, or failed with its reason) this soon after its upload.
FINAL_WITHIN_S = 150.0
# The extract stage's time limit on this stack: a file that holds a parser longer fails.
EXTRACT_TIME_LIMIT_S = 60

NEIGHBOURS: dict[str, tuple[bytes, str]] = {
    "crazyones.pdf": ((FIXTURES / "crazyones.pdf").read_bytes(), "the crazy ones"),
    "geobase.pdf": (
        (FIXTURES / "GeoBase_NHNC1_Data_Model_UML_EN.pdf").read_bytes(),
        "National Hydrographic Network",
    ),
    "blocks.docx": ((FIXTURES / "blk-paras-and-tables.docx").read_bytes(), "Lorem ipsum"),
    "harbour-notes.md": (
        b"# Harbour notes\n\nThe night ferry to Skerry Island leaves from pier seven.",
        "night ferry to Skerry Island",
    ),
}


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningPipeline]:
    """A stack that takes uploads of up to 64 MB and gives a file a minute of extraction."""
    env = {
        "RAGLINE_INGEST__MAX_UPLOAD_MB": "64",
        "RAGLINE_STAGES__EXTRACT__TIME_LIMIT_S": str(EXTRACT_TIME_LIMIT_S),
        # Stalls are judged by the default deadline here: a minute of parsing is not a stall.
        "RAGLINE_INGEST__STALL_AFTER_S": "120",
    }
    with own_stack(tmp_path_factory.mktemp("hostile"), env) as running:
        yield running


@pytest.fixture
async def api(stack: RunningPipeline) -> AsyncIterator[Api]:
    async with httpx.AsyncClient(base_url=stack.url, timeout=120) as http:
        yield Api(http, stack, stack.admin_token)


class MemoryWatch:
    """Samples the resident memory of the stack's processes and their children."""

    def __init__(self, stack: RunningPipeline) -> None:
        self._processes = {proc.name: proc.pid for proc in stack.pipeline.processes}
        self.peak_mb: dict[str, float] = {}
        self.parser_pids: set[int] = set()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> MemoryWatch:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join()

    def _note(self, kind: str, rss: int) -> None:
        self.peak_mb[kind] = max(self.peak_mb.get(kind, 0.0), rss / MB)

    def _run(self) -> None:
        while not self._stop.wait(0.1):
            for name, pid in self._processes.items():
                kind = name.rsplit("-", 1)[0]
                try:
                    process = psutil.Process(pid)
                    self._note(kind, process.memory_info().rss)
                    for child in process.children(recursive=True):
                        if kind == "extract":
                            self.parser_pids.add(child.pid)
                        self._note("parser" if kind == "extract" else f"{kind}-child",
                                   child.memory_info().rss)  # fmt: skip
                except psutil.NoSuchProcess:
                    continue


async def _upload(api: Api, kb_id: str, name: str, data: bytes) -> httpx.Response:
    return await api.http.post(
        f"/api/v1/knowledge-bases/{kb_id}/documents",
        files={"file": (name, data)},
        headers=api.auth,
    )


async def _wait_all_final(
    api: Api, kb_id: str, uploaded: dict[str, tuple[str, float]]
) -> dict[str, tuple[dict[str, Any], float]]:
    """Each document in its final state, with the seconds it took from its upload."""
    done: dict[str, tuple[dict[str, Any], float]] = {}
    async with asyncio.timeout(FINAL_WITHIN_S + 60):
        while len(done) < len(uploaded):
            for name, (document_id, sent) in uploaded.items():
                if name in done:
                    continue
                document = await api.document(kb_id, document_id)
                if document["parse_status"] in FINAL:
                    done[name] = (document, time.monotonic() - sent)
            await asyncio.sleep(0.3)
    return done


@pytest.mark.timeout(600)
async def test_the_hostile_corpus_ends_clearly_in_bounded_time_and_memory(
    api: Api, stack: RunningPipeline, tmp_path: Path
) -> None:
    paths = write_corpus(tmp_path / "hostile")
    kb = await api.create_kb("Hostile inputs")
    pids = {proc.name: proc.pid for proc in stack.pipeline.processes}
    uploaded: dict[str, tuple[str, float]] = {}
    refused: dict[str, httpx.Response] = {}
    expected: dict[str, HostileFile] = {item.name: item for item in CORPUS}
    neighbours = iter(NEIGHBOURS.items())
    with MemoryWatch(stack) as memory:
        for item in CORPUS:
            response = await _upload(api, kb["id"], item.name, paths[item.name].read_bytes())
            if response.status_code == 202:
                uploaded[item.name] = (response.json()["id"], time.monotonic())
            else:
                refused[item.name] = response
            # The documents beside them: one after every few hostile files.
            if len(uploaded) % 4 == 1 and (neighbour := next(neighbours, None)) is not None:
                name, (data, _) = neighbour
                document = await api.upload(kb["id"], name, data)
                uploaded[name] = (document["id"], time.monotonic())
        for name, (data, _) in neighbours:
            document = await api.upload(kb["id"], name, data)
            uploaded[name] = (document["id"], time.monotonic())
        final = await _wait_all_final(api, kb["id"], uploaded)

    outcomes: list[str] = []
    wrong: list[str] = []
    for name, item in expected.items():
        if item.expect.http_status != 202:
            answer = refused.get(name)
            detail = answer.json().get("detail", "") if answer is not None else ""
            outcomes.append(f"{name}: {answer.status_code if answer else 202} {detail}")
            if answer is None or answer.status_code != item.expect.http_status:
                wrong.append(f"{name}: expected HTTP {item.expect.http_status}")
            elif item.expect.reason not in detail:
                wrong.append(f"{name}: {detail!r} does not say {item.expect.reason!r}")
            continue
        if name in refused:
            wrong.append(f"{name}: refused at upload: {refused[name].text}")
            continue
        document, seconds = final[name]
        reason = document["parse_error"] or ""
        outcomes.append(f"{name}: {document['parse_status']} in {seconds:.1f} s {reason}")
        if seconds >= FINAL_WITHIN_S:
            wrong.append(f"{name}: took {seconds:.0f} s")
        if document["parse_status"] != item.expect.status:
            wrong.append(f"{name}: {document['parse_status']}, expected {item.expect.status}")
        elif item.expect.status == "failed":
            # A reason a user can act on, not an internal error.
            if item.expect.reason not in reason or "internal error" in reason:
                wrong.append(f"{name}: {reason!r} does not say {item.expect.reason!r}")
        else:
            hits = await api.search([kb["id"]], item.expect.passage, top_k=5)
            if not any(
                hit["document_id"] == document["id"] and item.expect.passage in hit["chunk_text"]
                for hit in hits
            ):
                wrong.append(f"{name}: {item.expect.passage!r} not found")
    print("\n".join(outcomes))
    assert not wrong, wrong

    # The documents uploaded beside the hostile ones are indexed whole and found.
    for name, (_, passage) in NEIGHBOURS.items():
        document, _ = final[name]
        assert document["parse_status"] == "indexed", (name, document)
        chunks = await api.chunks(kb["id"], document["id"])
        assert len(chunks) == document["chunk_count"] > 0, name
        hits = await api.search([kb["id"]], passage, top_k=5)
        assert any(hit["document_id"] == document["id"] for hit in hits), (name, hits)

    # No process died or was restarted, and every one stayed within its memory bound.
    for proc in stack.pipeline.processes:
        assert proc.alive(), f"{proc.name} died:\n{proc.tail()}"
        assert proc.pid == pids[proc.name]
    print({kind: round(peak) for kind, peak in sorted(memory.peak_mb.items())})
    assert memory.parser_pids, "the extract worker read no file in a parser process"
    for kind, peak in memory.peak_mb.items():
        assert kind in MEMORY_BOUNDS_MB, (kind, memory.peak_mb)
        assert peak < MEMORY_BOUNDS_MB[kind], (kind, peak, memory.peak_mb)
