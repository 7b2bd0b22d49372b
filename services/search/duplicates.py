"""Near-duplicate passages folded into the best-ranked copy, by the overlap of the copy
signatures stored with each chunk (`core.copies`). Pure: no I/O. Why the overlap coefficient:
docs/concepts/search.md."""

from __future__ import annotations

from functools import lru_cache

from core.copies import Signature

# Signatures decoded lately: a popular chunk, or copies stored with the very same text, cost
# nothing again. Each entry holds about 15 kB (a chunk of 1,000 characters: 256 hashes as int
# objects in a frozenset, and its key), so 1,024 of them hold about 15 MB; decoding one takes
# about 20 µs. (At 4,096, 60 MB measured: a store that churns keeps bringing new chunks, so
# the cache fills up to its bound.)
SIGNATURE_CACHE_SIZE = 1024
_NONE = Signature(0, frozenset())


@lru_cache(maxsize=SIGNATURE_CACHE_SIZE)
def decoded(stored: str) -> Signature:
    """A stored signature (an unreadable one is empty: that chunk is nobody's copy)."""
    try:
        return Signature.decode(stored)
    except ValueError:
        return _NONE


def signature_of(stored: str) -> Signature:
    """A chunk's stored copy signature, read (empty if it has none)."""
    return decoded(stored) if stored else _NONE


def is_copy(first: Signature, second: Signature, threshold: float) -> bool:
    """Whether two passages are copies of one another."""
    return first.overlap(second) >= threshold
