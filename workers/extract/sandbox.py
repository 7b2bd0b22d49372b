"""Extraction in parser processes of their own: a hostile file cannot take the worker down.

The extract worker hands each file to a `parser_process` child and reads its text back segment
by segment, so a long PDF still streams. The child runs under an address-space limit
(`ingest.parser_memory_mb`): a decompression bomb or a runaway parser fails the allocation that
crosses it, and the child either reports it or dies (PDFium aborts); either way the document
fails with a reason and the worker, whose own memory never holds more than the file and one
segment, carries on with a fresh child. A try cancelled by the stage's time limit kills the
child, so native code that never returns is stopped too.

A child that read its file cleanly is kept for the next one (starting one costs about half a
second of imports), unless it grew past half of its limit.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import signal
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, suppress
from dataclasses import asdict
from typing import Any

from core.errors import ExtractionFailed, UnsupportedDocumentType
from infra.process.metrics import PARSER_STARTED, PARSER_STOPPED
from schemas.domain import TextSegment
from schemas.formats import SUPPORTED_EXTENSIONS, extension_of
from workers.extract.parser_process import HEADER, encode_frame
from workers.extract.pdf import OcrPolicy
from workers.extract.stream import ExtractionLimits

log = logging.getLogger(__name__)

_EXIT_WAIT_S = 5.0


class _Parser:
    """One parser process and its pipes."""

    def __init__(self, process: asyncio.subprocess.Process, memory_limit: int) -> None:
        self._process = process
        self._memory_limit = memory_limit

    @classmethod
    async def start(cls, memory_limit: int) -> _Parser:
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "workers.extract.parser_process",
            str(memory_limit),
            str(os.getpid()),
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            # Few malloc arenas: each reserves address space that counts against the limit.
            env={**os.environ, "MALLOC_ARENA_MAX": "2"},
        )
        PARSER_STARTED.inc()
        return cls(process, memory_limit)

    @property
    def pid(self) -> int:
        return self._process.pid

    @property
    def ended(self) -> bool:
        """Whether the process has ended by itself (also when the event loop has not yet
        been told: the process is gone)."""
        if self._process.returncode is not None:
            return True
        try:
            os.kill(self._process.pid, 0)
        except ProcessLookupError:
            return True
        return False

    async def send(self, request: dict[str, Any], data: bytes) -> None:
        pipe = self._process.stdin
        assert pipe is not None
        try:
            pipe.write(encode_frame(request))
            pipe.write(data)
            await pipe.drain()
        except (BrokenPipeError, ConnectionResetError):
            raise await self._stopped() from None

    async def receive(self) -> dict[str, Any]:
        pipe = self._process.stdout
        assert pipe is not None
        try:
            header = await pipe.readexactly(HEADER.size)
            message: dict[str, Any] = json.loads(await pipe.readexactly(HEADER.unpack(header)[0]))
        except asyncio.IncompleteReadError:
            raise await self._stopped() from None
        return message

    async def _stopped(self) -> ExtractionFailed:
        """Why the child ended without answering, for the user."""
        try:
            code = await asyncio.wait_for(self._process.wait(), _EXIT_WAIT_S)
        except TimeoutError:
            code = None
        log.warning("parser process %d ended while reading a file (exit %s)", self.pid, code)
        how = f"was stopped by {signal.Signals(-code).name}" if code and code < 0 else "exited"
        return ExtractionFailed(
            f"the file could not be read: the parser {how}, which happens when a file needs "
            f"more memory than the {self._memory_limit // 2**20:,} MB a file may use (a "
            "decompression bomb) or is damaged in a way that crashes the parser; open it and "
            "save a new copy, or split it"
        )

    async def stop(self) -> None:
        """Kills the process, waits for it and closes its pipes (a pipe left open keeps its
        transport alive until the event loop notices the child is gone, possibly never)."""
        if self._process.returncode is None:
            with suppress(ProcessLookupError):
                self._process.kill()
        with suppress(TimeoutError):
            await asyncio.wait_for(self._process.wait(), _EXIT_WAIT_S)
        pipe = self._process.stdin
        if pipe is not None:
            pipe.close()
            with suppress(OSError, TimeoutError):
                await asyncio.wait_for(pipe.wait_closed(), _EXIT_WAIT_S)
        if self._process.stdout is not None:
            # Until the pipe's end is seen: the transport closes with it.
            with suppress(OSError, TimeoutError):
                await asyncio.wait_for(self._process.stdout.read(), _EXIT_WAIT_S)


class Extraction:
    """The text of one file as the parser reads it: its title, then its segments."""

    def __init__(self, parser: _Parser, title: str) -> None:
        self._parser = parser
        self.pid = parser.pid
        self.title = title
        self.reusable = False
        self.rss = 0

    async def segments(self) -> AsyncIterator[TextSegment]:
        """Each segment as soon as it is read; raises `ExtractionFailed` for the file's error."""
        while True:
            message = await self._parser.receive()
            if "segment" in message:
                yield TextSegment.model_validate(message["segment"])
            elif "end" in message:
                self.rss = int(message["end"]["rss"])
                self.reusable = True
                return
            else:
                # The file's own error: the parser goes on serving unless it says otherwise.
                self.reusable = bool(message.get("reusable"))
                raise ExtractionFailed(str(message.get("error", "the parser gave no answer")))


class ParserSandbox:
    """Keeps parser processes and runs each file in one."""

    def __init__(self, memory_limit: int, ocr: OcrPolicy, limits: ExtractionLimits) -> None:
        self._memory_limit = memory_limit
        self._options = {"ocr": asdict(ocr), "limits": asdict(limits)}
        self._idle: list[_Parser] = []

    async def _take(self) -> _Parser:
        """An idle parser that is still running, or a new one."""
        while self._idle:
            parser = self._idle.pop()
            if not parser.ended:
                return parser
            PARSER_STOPPED.labels("crashed").inc()  # it died while idle: nothing was lost
        return await _Parser.start(self._memory_limit)

    async def start(self) -> None:
        """Starts a parser ahead of the first file."""
        if not self._idle:
            self._idle.append(await _Parser.start(self._memory_limit))

    async def close(self) -> None:
        """Stops every idle parser."""
        while self._idle:
            await self._idle.pop().stop()

    @asynccontextmanager
    async def open(self, data: bytes, filename: str) -> AsyncIterator[Extraction]:
        """Reads a file in a parser process; the parser is stopped if the reading does not
        end cleanly (an error, a crash, the caller giving up or being cancelled)."""
        extension = extension_of(filename)
        if extension not in SUPPORTED_EXTENSIONS:
            raise UnsupportedDocumentType(extension, SUPPORTED_EXTENSIONS)
        parser = await self._take()
        extraction = Extraction(parser, "")
        try:
            await parser.send({"filename": filename, "size": len(data), **self._options}, data)
            del data  # the child has it; this process need not hold it while the text comes
            first = await parser.receive()
            if "title" not in first:
                extraction.reusable = bool(first.get("reusable"))
                raise ExtractionFailed(str(first.get("error", "the parser gave no answer")))
            extraction.title = str(first["title"])
            yield extraction
        finally:
            # Kept only when it ended its answer (an error of the file's, or all its text).
            if extraction.reusable and extraction.rss < self._memory_limit // 2:
                self._idle.append(parser)
            else:
                reason = "recycled" if extraction.reusable else "abandoned"
                PARSER_STOPPED.labels("crashed" if parser.ended else reason).inc()
                await parser.stop()
