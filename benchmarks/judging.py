"""Relevance judging and ranking metrics for the quality benchmark's sets. Pure: no I/O.

Passages (the multi-format set). A hit is judged against the text of the section a query
asks for, whatever format the hit came from, by two comparisons; it is relevant when either
reaches `PASSAGE_THRESHOLD` (0.4).

- Character shingles: both texts are reduced to their letters and digits (Unicode NFKC,
  case-folded, everything else dropped), so line breaks, hyphenation at a line end, words a PDF
  parser glued together or spaced apart, HTML versus text wrapping and typographic quotes make
  no difference; each reduced text becomes the set of its `SHINGLE_CHARS`-character
  substrings. A page header or a dropped ligature inside a hit only breaks the few shingles
  that span it.
- Word runs: the sets of `RUN_WORDS` consecutive words (runs of letters and digits, NFKC,
  case-folded). These depend on reading order only over three words, which matters for tables:
  the plain-text manuals draw them as grids whose cells wrap line by line, so the letters of a
  table come out interleaved there, while the words of one cell line stay together.

Either comparison counts what the two sets share over the size of the smaller set, so a chunk
lying inside a long section and a short section lying inside a chunk both score 1.0, and a
chunk that straddles two sections scores the share it holds of the one it holds less of. The
threshold reads: at least 40% of the smaller text is shared. It was set so that every sampled
section is found in each of its three formats as the pipeline chunks them, while a 1,200-
character window of any other part of either manual stays below half of it
(`build_eval_sets --check` reports both).

Identifiers (the exact-term set). A hit is relevant when its text contains the identifier as a
whole token: case-insensitive, not preceded by a letter, digit, `_`, `-`, `.` or `/`, not
followed by a letter, digit, `_` or `-`, nor by `.` or `/` and a letter or digit (so
`/etc/gai.conf` is not found in `/etc/gai.conf.d`, but is at the end of a sentence).

Metrics. Every query of these sets asks for one known item (a section, a page, the passage
holding an identifier). A ranking is judged hit by hit; only the first relevant hit counts,
because a second copy of the same passage (from another format, or a neighbouring chunk of the
same section) tells a reader nothing new. With that, for a first relevant hit at rank r
(1-based): recall@k is 1 if r <= k, reciprocal rank 1/r within the cutoff, nDCG@k 1/log2(r+1).
The functions take the general binary form (any number of relevant hits, `relevant` in all)
so they can be checked against trec_eval's definitions.
"""

from __future__ import annotations

import functools
import math
import re
import unicodedata
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

SHINGLE_CHARS = 24
PASSAGE_THRESHOLD = 0.4
RUN_WORDS = 3
WORD = re.compile(r"[^\W_]+")


def letters_and_digits(text: str) -> str:
    """The text case-folded, NFKC-normalised, with everything but letters and digits dropped."""
    folded = unicodedata.normalize("NFKC", text).casefold()
    return "".join(char for char in folded if char.isalnum())


def shingles(text: str, size: int = SHINGLE_CHARS) -> frozenset[str]:
    """The text's `size`-character shingles over its letters and digits."""
    reduced = letters_and_digits(text)
    if len(reduced) <= size:
        return frozenset({reduced}) if reduced else frozenset()
    return frozenset(reduced[i : i + size] for i in range(len(reduced) - size + 1))


def word_runs(text: str, size: int = RUN_WORDS) -> frozenset[tuple[str, ...]]:
    """The text's runs of `size` consecutive words (runs of letters and digits, case-folded)."""
    words = WORD.findall(unicodedata.normalize("NFKC", text).casefold())
    return frozenset(tuple(words[i : i + size]) for i in range(len(words) - size + 1))


def overlap(first: frozenset[Any], second: frozenset[Any]) -> float:
    """Shared members over the size of the smaller set (0.0 when either is empty)."""
    if not first or not second:
        return 0.0
    return len(first & second) / min(len(first), len(second))


@dataclass(frozen=True)
class Fingerprint:
    """What two texts are compared by: character shingles and word runs."""

    grams: frozenset[str]
    runs: frozenset[tuple[str, ...]]

    @classmethod
    def of(cls, text: str) -> Fingerprint:
        """The fingerprint of a text."""
        return cls(shingles(text), word_runs(text))

    def similarity(self, other: Fingerprint) -> float:
        """The better of the two overlaps (see the module docstring)."""
        return max(overlap(self.grams, other.grams), overlap(self.runs, other.runs))


@dataclass(frozen=True)
class Passage:
    """A relevant passage's text, with its fingerprint computed once."""

    text: str
    fingerprint: Fingerprint = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "fingerprint", Fingerprint.of(self.text))

    def similarity(self, hit_text: str) -> float:
        """How much of a hit's text this passage shares."""
        return self.fingerprint.similarity(Fingerprint.of(hit_text))

    def judges_relevant(self, hit_text: str, threshold: float = PASSAGE_THRESHOLD) -> bool:
        """Whether a hit substantially overlaps this passage."""
        return self.similarity(hit_text) >= threshold


@functools.lru_cache(maxsize=4096)
def identifier_pattern(identifier: str) -> re.Pattern[str]:
    """A pattern finding the identifier as a whole token, case-insensitively."""
    return re.compile(rf"(?<![\w./-]){re.escape(identifier)}(?![\w-]|[./]\w)", re.IGNORECASE)


def contains_identifier(text: str, identifier: str) -> bool:
    """Whether the text holds the identifier as a whole token."""
    return identifier_pattern(identifier).search(text) is not None


def first_relevant(flags: Sequence[bool]) -> int | None:
    """The 1-based rank of the first relevant hit, or None."""
    return next((rank for rank, flag in enumerate(flags, start=1) if flag), None)


def known_item(flags: Iterable[bool]) -> list[bool]:
    """The flags with every relevant hit after the first one cleared."""
    seen = False
    kept = []
    for flag in flags:
        kept.append(flag and not seen)
        seen = seen or flag
    return kept


def recall_at(flags: Sequence[bool], k: int, relevant: int = 1) -> float:
    """Relevant hits in the top k over all relevant items."""
    return sum(flags[:k]) / relevant if relevant else 0.0


def reciprocal_rank(flags: Sequence[bool], k: int) -> float:
    """1 / rank of the first relevant hit within the top k, else 0."""
    rank = first_relevant(flags[:k])
    return 1.0 / rank if rank else 0.0


def ndcg_at(flags: Sequence[bool], k: int, relevant: int = 1) -> float:
    """Binary nDCG@k: DCG of the top k over the DCG of `relevant` items ranked first."""
    dcg = sum(1.0 / math.log2(rank + 1) for rank, flag in enumerate(flags[:k], 1) if flag)
    ideal = sum(1.0 / math.log2(rank + 1) for rank in range(1, min(relevant, k) + 1))
    return dcg / ideal if ideal else 0.0


def mean(values: Sequence[float]) -> float:
    """The arithmetic mean (0.0 of nothing)."""
    return sum(values) / len(values) if values else 0.0
