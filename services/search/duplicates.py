"""Near-duplicate passages folded into the best-ranked copy. Pure: no I/O.

Knowledge bases hold the same passage several times: a manual as PDF and as DOCX, a page
crawled twice, a policy pasted into two documents. Without care those copies fill the answer
and push the passages the caller needed out of the top k.

Each passage is reduced to its set of word shingles (`SHINGLE_WORDS` consecutive words; case,
punctuation, Unicode forms and line-end hyphenation ignored, so a PDF's text matches the same
words typed in a DOCX). Two passages are copies when their overlap coefficient — shared
shingles over the shingles of the smaller one — reaches the threshold
(`search.duplicate_threshold`): that share of the shorter passage repeats the other word for
word. The overlap coefficient rather than Jaccard, because copies in different formats are cut
into chunks at different places: a chunk of the PDF and the DOCX chunk covering the same text
are offset, and share only part of their windows. A passage shorter than a shingle is compared
as its whole word sequence.

A copy folds into the higher-ranked passage, which lists it under `also_in`, and the next
distinct passage moves up (`services.search.shaping.assemble`), so k distinct passages come back
when the candidates hold k.
"""

from __future__ import annotations

import re
import unicodedata
from functools import lru_cache

SHINGLE_WORDS = 4

_WORD = re.compile(r"\w+", re.UNICODE)
# A word broken across lines by a hyphen ("config-\nuration"), as PDFs print them.
_LINE_END_HYPHEN = re.compile(r"(\w)-[^\S\n]*\n\s*(\w)")


# Shingle sets of recent texts: a deeper look at the same search (at most `search.depth`, 100,
# candidates), a popular chunk, or a copy stored with the very same text, costs nothing again.
# About 15 kB per cached set of a 1,000-character chunk: 512 of them hold ~7 MB (2,048 held
# ~30 MB, which the soak benchmark saw as the API's memory growing while they filled).
SHINGLE_CACHE_SIZE = 512


@lru_cache(maxsize=SHINGLE_CACHE_SIZE)
def shingles(text: str, size: int = SHINGLE_WORDS) -> frozenset[int]:
    """Hashes of the text's runs of `size` consecutive words (the whole text if shorter)."""
    text = _LINE_END_HYPHEN.sub(r"\1\2", unicodedata.normalize("NFKC", text).lower())
    words = _WORD.findall(text)
    if len(words) <= size:
        return frozenset({hash(tuple(words))}) if words else frozenset()
    return frozenset(hash(tuple(words[i : i + size])) for i in range(len(words) - size + 1))


def overlap(first: frozenset[int], second: frozenset[int]) -> float:
    """Shared shingles over the shingles of the smaller set (0 when either is empty)."""
    if not first or not second:
        return 0.0
    small, large = (first, second) if len(first) <= len(second) else (second, first)
    return len(small & large) / len(small)
