"""The parser process: reads files in a process of its own, under a memory limit.

The extract worker (`sandbox.ParserSandbox`) starts it as

    python -m workers.extract.parser_process MEMORY_LIMIT_BYTES

and sends it one file at a time; it answers with the file's title and its text segments as
they are read. Whatever a hostile file makes a parser do (PDFium aborting when an allocation
fails, a decompression bomb, a stack overflow in native code) happens here and ends this
process at worst, never the worker.

Frames, both ways: a 4-byte big-endian length, then that many bytes of JSON. A request is
`{"filename", "size", "ocr", "limits"}` followed by `size` bytes of the file; the answers are
`{"title"}`, then `{"segment"}` per segment, then `{"end": {"rss"}}` or `{"error"}`.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import resource
import signal
import struct
import sys
import traceback
from typing import IO, Any

from core.errors import PermanentError

HEADER = struct.Struct(">I")
PR_SET_PDEATHSIG = 1


def encode_frame(message: dict[str, Any]) -> bytes:
    """A message as a frame."""
    body = json.dumps(message, separators=(",", ":")).encode()
    return HEADER.pack(len(body)) + body


def read_exactly(source: IO[bytes], size: int) -> bytes | None:
    """`size` bytes from a pipe, or None at its end."""
    chunks = []
    while size:
        chunk = source.read(size)
        if not chunk:
            return None
        chunks.append(chunk)
        size -= len(chunk)
    return b"".join(chunks)


def rss_bytes() -> int:
    """This process's resident memory now."""
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def serve(requests: IO[bytes], answers: IO[bytes], memory_limit: int) -> None:
    """Answers requests until the extract worker closes the pipe (or a file leaves this
    process in a state not worth keeping)."""
    from infra.process.malloc import release_free_memory
    from workers.extract.extractors import ExtractionLimits, OcrPolicy, open_extraction

    def send(message: dict[str, Any]) -> None:
        answers.write(encode_frame(message))
        answers.flush()

    while (header := read_exactly(requests, HEADER.size)) is not None:
        request = json.loads(read_exactly(requests, HEADER.unpack(header)[0]) or b"{}")
        data = read_exactly(requests, request["size"])
        if data is None:
            return
        try:
            stream = open_extraction(
                data,
                request["filename"],
                OcrPolicy(**request["ocr"]),
                ExtractionLimits(**request["limits"]),
            )
            del data
            send({"title": stream.title})
            for segment in stream.segments:
                send({"segment": segment.model_dump(mode="json")})
        except PermanentError as exc:
            send({"error": str(exc), "reusable": True})
            continue
        except MemoryError:
            send({"error": _over_memory(memory_limit), "reusable": False})
            return  # what is left of the heap is not worth keeping
        except RecursionError:
            send({"error": "the file is nested too deeply to be read", "reusable": False})
            return
        except Exception as exc:
            traceback.print_exc()
            message = f"internal error while reading the file ({type(exc).__name__})"
            send({"error": message, "reusable": False})
            return
        # What the file's reading freed goes back to the system, not into malloc's arenas,
        # where the next files of other sizes fit into it only in part.
        release_free_memory()
        send({"end": {"rss": rss_bytes()}})


def _over_memory(limit: int) -> str:
    return (
        f"reading the file needed more memory than the {limit // 2**20:,} MB a file may use "
        "(a page or stream inflates far beyond its size: a damaged file or a decompression "
        "bomb); open it and save a new copy, or split it"
    )


def _die_with_parent(parent: int) -> None:
    libc = ctypes.CDLL("libc.so.6", use_errno=True)
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != parent:  # the worker died before the line above
        os._exit(1)


def main() -> None:
    """Limits this process's memory, then serves the extract worker on stdin and stdout."""
    memory_limit = int(sys.argv[1])
    _die_with_parent(int(sys.argv[2]) if len(sys.argv) > 2 else os.getppid())
    resource.setrlimit(resource.RLIMIT_AS, (memory_limit, memory_limit))
    # The answers keep the real stdout; anything a library prints goes to stderr instead.
    answers = os.fdopen(os.dup(sys.stdout.fileno()), "wb")
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    with contextlib.suppress(BrokenPipeError):
        serve(sys.stdin.buffer, answers, memory_limit)


if __name__ == "__main__":
    main()
