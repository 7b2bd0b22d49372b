"""Near-duplicate passages folded into the best-ranked copy. Pure: no I/O.

Knowledge bases hold the same passage several times: a manual as PDF and as DOCX, a page
crawled twice, a policy pasted into two documents. Without care those copies fill the answer
and push the passages the caller needed out of the top k.

Each chunk carries a copy signature computed from its text when it was indexed
(`core.copies`: its word shingles, hashed and, for a long text, sampled), so copies are told
apart without reading any text at query time. Two passages are copies when the overlap
coefficient of their signatures — shared shingles over the shingles of the smaller one —
reaches the threshold (`search.duplicate_threshold`): that share of the shorter passage repeats
the other word for word. The overlap coefficient rather than Jaccard, because copies in
different formats are cut into chunks at different places: a chunk of the PDF and the DOCX
chunk covering the same text are offset, and share only part of their windows. A passage
shorter than a shingle is compared as its whole word sequence.

A copy folds into the higher-ranked passage, which lists it under `also_in`, and the next
distinct passage moves up (`services.search.shaping.assemble`), so k distinct passages come back
when the candidates hold k.
"""

from __future__ import annotations

from functools import lru_cache

from core.copies import Signature

# Signatures decoded lately: a popular chunk, or copies stored with the very same text, cost
# nothing again (a few kB each).
SIGNATURE_CACHE_SIZE = 4096
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
