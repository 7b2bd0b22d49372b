"""glibc's malloc: what it holds, and giving back to the system what it keeps free.

A thread that frees memory gives it back to its malloc arena, not to the system: what a batch
of the embedding model allocated for its activations (tens of MB, in each replica thread's
arena) stays in the process, and the next batches, of other shapes, fit into it only in part,
so the process's private memory kept rising for as long as new shapes came (the embed worker:
about 90 MB over the first minutes of a soak, of which malloc held most as free). `malloc_trim`
hands the free pages of every arena back: the embed worker after each batch, and every Ragline
process every `release_free_memory_every_s` (the API's are the vector store's engine's threads,
whose searches and optimisations allocate and free in arenas of their own). Without glibc
(musl, macOS) it does nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import functools
from typing import Any

from core.periodic import Periodic


class _MallInfo2(ctypes.Structure):
    # glibc's `struct mallinfo2` (malloc.h), every field a size_t.
    _fields_ = [
        (name, ctypes.c_size_t)
        for name in (
            "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks",
            "fordblks", "keepcost",
        )
    ]  # fmt: skip


@functools.cache
def _libc() -> Any:
    try:
        libc = ctypes.CDLL("libc.so.6")
        libc.malloc_trim.argtypes = [ctypes.c_size_t]
        libc.malloc_trim.restype = ctypes.c_int
        libc.mallinfo2.restype = _MallInfo2
    except (OSError, AttributeError):
        return None
    return libc


def malloc_info() -> dict[str, int]:
    """What malloc holds, in bytes, summed over its arenas: `heap` (the arenas' memory),
    `mmapped` (large blocks, each its own mapping), `in_use` and `free` (of the arenas: freed,
    yet kept by malloc); empty without glibc."""
    libc = _libc()
    if libc is None:
        return {}
    info = libc.mallinfo2()
    return {
        "heap": info.arena,
        "mmapped": info.hblkhd,
        "in_use": info.uordblks,
        "free": info.fordblks,
    }


def release_free_memory() -> bool:
    """Gives the free pages of every malloc arena back to the system; whether any were."""
    libc = _libc()
    return bool(libc is not None and libc.malloc_trim(0))


def releasing_free_memory(every_s: float) -> contextlib.AbstractAsyncContextManager[object]:
    """While open, gives malloc's free pages back every `every_s` seconds (0: never)."""
    if every_s <= 0:
        return contextlib.nullcontext()

    async def release() -> None:
        await asyncio.to_thread(release_free_memory)

    return Periodic("releasing free memory", every_s, release)
