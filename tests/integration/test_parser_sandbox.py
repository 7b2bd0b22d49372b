"""Files are read in parser processes of their own: what a file does to its parser (a bomb, a
crash, a read that never ends) ends that process at worst, and the next file is read."""

from __future__ import annotations

import asyncio
import os
import signal
from collections.abc import AsyncIterator

import psutil
import pytest
from prometheus_client import REGISTRY

from core.errors import ExtractionFailed, UnsupportedDocumentType
from tests.conftest import FIXTURES
from tests.factories import long_pdf, scanned_pdf
from tests.fixtures.hostile.corpus import bomb_pdf
from workers.extract.extractors import ExtractionLimits, OcrPolicy, extract
from workers.extract.sandbox import ParserSandbox

MB = 1024 * 1024


@pytest.fixture
async def sandbox() -> AsyncIterator[ParserSandbox]:
    parsers = ParserSandbox(2048 * MB, OcrPolicy(), ExtractionLimits())
    await parsers.start()
    yield parsers
    await parsers.close()


async def _read(parsers: ParserSandbox, data: bytes, name: str) -> tuple[str, list[str], int]:
    """The title, the segments' texts and the pid of the parser that read them."""
    async with parsers.open(data, name) as extraction:
        texts = [segment.text async for segment in extraction.segments()]
    return extraction.title, texts, extraction.pid


def _started() -> float:
    return REGISTRY.get_sample_value("ragline_parser_processes_started_total") or 0.0


def _stopped(reason: str) -> float:
    value = REGISTRY.get_sample_value("ragline_parser_processes_stopped_total", {"reason": reason})
    return value or 0.0


async def test_a_file_reads_the_same_in_the_parser_process(sandbox: ParserSandbox) -> None:
    name = "GeoBase_NHNC1_Data_Model_UML_EN.pdf"
    data = (FIXTURES / name).read_bytes()
    title, texts, _ = await _read(sandbox, data, name)
    expected = extract(data, name)
    assert title == expected.title
    assert texts == [segment.text for segment in expected.segments]
    assert len(texts) == 19


async def test_scanned_pages_are_read_with_ocr_within_the_memory_limit(
    sandbox: ParserSandbox,
) -> None:
    data = scanned_pdf(["Scanned warranty card 4471", "Water damage is covered"])
    _, texts, _ = await _read(sandbox, data, "scan.pdf")
    assert "warranty card 4471" in " ".join(texts)


async def test_a_files_own_error_keeps_the_parser_for_the_next_file(
    sandbox: ParserSandbox,
) -> None:
    started = _started()
    with pytest.raises(ExtractionFailed, match="encrypted"):
        await _read(sandbox, (FIXTURES / "encrypted-file.pdf").read_bytes(), "locked.pdf")
    with pytest.raises(ExtractionFailed, match="no text could be extracted"):
        await _read(sandbox, b"   \n  ", "blank.txt")
    _, first, pid = await _read(sandbox, b"first note", "a.txt")
    _, second, again = await _read(sandbox, b"second note", "b.txt")
    assert (first, second) == (["first note"], ["second note"])
    assert pid == again
    assert _started() == started


async def test_a_decompression_bomb_ends_its_parser_not_the_worker(
    sandbox: ParserSandbox,
) -> None:
    crashed = _stopped("crashed")
    data = bomb_pdf()
    worker = psutil.Process()
    before = worker.memory_info().rss
    with pytest.raises(ExtractionFailed, match="more memory than the 2,048 MB"):
        await _read(sandbox, data, "bomb.pdf")
    assert _stopped("crashed") == crashed + 1
    # This process never held the inflated stream (2 GiB).
    assert worker.memory_info().rss - before < 100 * MB
    _, texts, _ = await _read(sandbox, (FIXTURES / "crazyones.pdf").read_bytes(), "poem.pdf")
    assert "crazy ones" in " ".join(texts)


async def test_giving_up_on_a_file_kills_its_parser(sandbox: ParserSandbox) -> None:
    """The stage's time limit cancels the read: the parser, maybe stuck in native code, is
    killed, not left running."""
    abandoned = _stopped("abandoned")
    data = long_pdf(300)
    pids: list[int] = []

    async def read_slowly() -> None:
        async with sandbox.open(data, "long.pdf") as extraction:
            pids.append(extraction.pid)
            async for _ in extraction.segments():
                await asyncio.sleep(10)  # the worker is slower than the parser

    with pytest.raises(TimeoutError):
        await asyncio.wait_for(read_slowly(), timeout=2)
    assert not psutil.pid_exists(pids[0])
    assert _stopped("abandoned") == abandoned + 1
    _, texts, pid = await _read(sandbox, b"after the long one", "c.txt")
    assert texts == ["after the long one"]
    assert pid != pids[0]


async def test_a_parser_killed_from_outside_fails_the_file_with_a_reason(
    sandbox: ParserSandbox,
) -> None:
    data = long_pdf(300)

    async def read_while_killed() -> None:
        async with sandbox.open(data, "long.pdf") as extraction:
            psutil.Process(extraction.pid).kill()
            async for _ in extraction.segments():
                pass

    with pytest.raises(ExtractionFailed, match="the parser was stopped by SIGKILL"):
        await read_while_killed()
    _, texts, _ = await _read(sandbox, b"still reading files", "d.txt")
    assert texts == ["still reading files"]


async def test_what_a_file_freed_goes_back_to_the_system_before_the_next_file(
    sandbox: ParserSandbox,
) -> None:
    """A parser serves many files of many sizes: what one file's reading freed is given back,
    not kept in malloc's arenas, where it stayed as the process's memory (about 9 MB after this
    10 MB text, which the next small file did not reuse). Under a second."""

    async def resident_after(data: bytes, name: str) -> int:
        async with sandbox.open(data, name) as extraction:
            async for _ in extraction.segments():
                pass
        return extraction.rss

    before = await resident_after(long_pdf(50), "long.pdf")
    await resident_after(b"word " * 2_000_000, "large.txt")
    after = await resident_after(b"a small note", "small.txt")
    assert after - before < 4 * MB, (before / MB, after / MB)


async def test_a_parser_that_died_while_idle_is_replaced_before_the_next_file(
    sandbox: ParserSandbox,
) -> None:
    _, _, pid = await _read(sandbox, b"a first note", "e.txt")
    os.kill(pid, signal.SIGKILL)
    async with asyncio.timeout(5):
        while psutil.pid_exists(pid):  # until the event loop has reaped it
            await asyncio.sleep(0.05)
    _, texts, again = await _read(sandbox, b"a second note", "f.txt")
    assert texts == ["a second note"]
    assert again != pid


async def test_an_unsupported_type_is_refused_before_any_parser_sees_it(
    sandbox: ParserSandbox,
) -> None:
    with pytest.raises(UnsupportedDocumentType):
        await _read(sandbox, b"PK\x03\x04", "archive.zip")
