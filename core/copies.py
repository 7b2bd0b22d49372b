"""Copy signatures: what a chunk's text is made of, computed once when it is indexed, so that
search can tell copies apart without reading their texts. Pure: no I/O.

A text is reduced to its word shingles (`SHINGLE_WORDS` consecutive words; case, punctuation,
Unicode forms and line-end hyphenation ignored, so a PDF's text matches the same words typed in
a DOCX), each hashed to 16 bits with a hash that is the same in every process. A text of at
most `MAX_KEPT` shingles keeps them all; a longer one keeps those whose hash is a multiple of
2, 4, 8, ... (its `level`), the fewest levels that leave at most `MAX_KEPT`. The choice
depends on the shingle alone, so two texts keep the same shingles of what they share, and two
signatures are compared at the coarser level of the two: the sample of each is then taken by
the same rule, and their overlap estimates the overlap of the whole sets
(`services.search.duplicates` says what overlap makes a copy).

Stored with the chunk's payload as a short string (`encode`): the level, then the kept hashes,
packed (`core.packing`). A chunk of 1,200 characters has about 200 shingles: all kept, about
540 characters.
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from dataclasses import dataclass

from core.packing import pack, unpack

SHINGLE_WORDS = 4
# Shingles kept at most per signature.
MAX_KEPT = 256

_WORD = re.compile(r"\w+", re.UNICODE)
# A word broken across lines by a hyphen ("config-\nuration"), as PDFs print them.
_LINE_END_HYPHEN = re.compile(r"(\w)-[^\S\n]*\n\s*(\w)")


def words_of(text: str) -> list[str]:
    """The text's words, as shingles see them."""
    text = _LINE_END_HYPHEN.sub(r"\1\2", unicodedata.normalize("NFKC", text).lower())
    return _WORD.findall(text)


def _hash16(words: list[str]) -> int:
    digest = hashlib.blake2b(" ".join(words).encode(), digest_size=2).digest()
    return int.from_bytes(digest, "little")


@dataclass(frozen=True)
class Signature:
    """The sampled shingle hashes of a text (or of several, `union`)."""

    level: int
    hashes: frozenset[int]

    @classmethod
    def of(cls, text: str, size: int = SHINGLE_WORDS) -> Signature:
        """The signature of a text (a text shorter than a shingle is one shingle)."""
        words = words_of(text)
        if not words:
            return cls(0, frozenset())
        if len(words) <= size:
            return cls(0, frozenset({_hash16(words)}))
        hashes = {_hash16(words[i : i + size]) for i in range(len(words) - size + 1)}
        return cls(0, frozenset(hashes)).coarsened(MAX_KEPT)

    def at(self, level: int) -> frozenset[int]:
        """The hashes this signature keeps at `level` (at least its own)."""
        if level <= self.level:
            return self.hashes
        step = 1 << level
        return frozenset(h for h in self.hashes if h % step == 0)

    def coarsened(self, most: int) -> Signature:
        """This signature at the first level that keeps at most `most` hashes."""
        level, kept = self.level, self.hashes
        while len(kept) > most:
            level += 1
            kept = self.at(level)
        return Signature(level, kept)

    def union(self, other: Signature) -> Signature:
        """The signature of both texts together (at the coarser level of the two)."""
        level = max(self.level, other.level)
        return Signature(level, self.at(level) | other.at(level))

    def overlap(self, other: Signature) -> float:
        """Shared hashes over the hashes of the smaller signature, at the coarser level of the
        two (0 when either is empty)."""
        level = max(self.level, other.level)
        mine, theirs = self.at(level), other.at(level)
        if not mine or not theirs:
            return 0.0
        small, large = (mine, theirs) if len(mine) <= len(theirs) else (theirs, mine)
        return len(small & large) / len(small)

    def encode(self) -> str:
        """The signature as the payload stores it: `<level>:<the hashes, packed>`."""
        return f"{self.level}:{pack(self.hashes, 2)}"

    @classmethod
    def decode(cls, stored: str) -> Signature:
        """A stored signature (`ValueError` for one that is not)."""
        level, _, packed = stored.partition(":")
        try:
            return cls(int(level), frozenset(unpack(packed, 2)))
        except ValueError as exc:
            raise ValueError(f"not a copy signature: {stored[:40]!r} ({exc})") from exc


def copy_signature(text: str) -> str:
    """The stored signature of a chunk's text."""
    return Signature.of(text).encode()
