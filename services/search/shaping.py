"""Shaping search results into passages. Pure: no I/O.

From the candidates read, best first:

- one version per source: chunks of an older version of a source are dropped when a newer one
  is in the same answer (the store swaps versions in one step, this makes sure of it);
- neighbours merged: adjacent or overlapping chunks of one document become one passage (of at
  most `search.merge_max_chunks` chunks), with the overlap removed, so an answer is not the
  same sentences twice;
- copies folded: near-identical passages, of any document, fold into the best-ranked one and
  are listed in its `also_in` (`services.search.duplicates`), and the next distinct passage
  moves up;
- a token budget: `max_context_tokens` keeps the best passages that fit.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace

from core.copies import Signature
from schemas.chunks import ChunkPayload
from services.search.duplicates import is_copy, signature_of

# A rough count of tokens for budgets: about four characters each for English text.
CHARS_PER_TOKEN = 4


@dataclass(frozen=True)
class Source:
    """Where a passage's text is: a document, and the chunk (and page) in it."""

    document_id: str
    document_title: str
    source_name: str
    kb_id: str
    page: int | None
    chunk_index: int


@dataclass(frozen=True)
class Piece:
    """One candidate chunk: its point, its payload, its score and its rank among the
    candidates."""

    point_id: str
    payload: ChunkPayload
    score: float
    rank: int

    @property
    def document_id(self) -> str:
        """The chunk's document."""
        return self.payload.document_id

    @property
    def chunk_index(self) -> int:
        """The chunk's place in its document."""
        return self.payload.chunk_index

    @property
    def source(self) -> Source:
        """The document and chunk this piece comes from."""
        payload = self.payload
        return Source(
            document_id=payload.document_id,
            document_title=payload.title,
            source_name=payload.source_name,
            kb_id=payload.kb_id,
            page=payload.page,
            chunk_index=payload.chunk_index,
        )


@dataclass(frozen=True)
class Passage:
    """One or more adjacent chunks of a document, as one hit: its pieces by chunk index, its
    score and rank (its best piece's: why that one was kept is why the passage is)."""

    pieces: tuple[Piece, ...]
    score: float
    rank: int
    signature: Signature
    # Other places holding (nearly) the same text, folded into this passage.
    also_in: tuple[Source, ...] = ()

    @classmethod
    def of(cls, piece: Piece, signature: Signature) -> Passage:
        """A passage of one chunk."""
        return cls((piece,), piece.score, piece.rank, signature)

    @property
    def document_id(self) -> str:
        """The passage's document."""
        return self.pieces[0].document_id

    @property
    def first_index(self) -> int:
        """The first chunk's index."""
        return self.pieces[0].chunk_index

    @property
    def last_index(self) -> int:
        """The last chunk's index."""
        return self.pieces[-1].chunk_index

    @property
    def source(self) -> Source:
        """The document and first chunk this passage comes from."""
        return self.pieces[0].source


def newest_versions(pieces: Iterable[Piece]) -> list[Piece]:
    """Drops chunks of a source whose newer version is also among the results."""
    pieces = list(pieces)
    newest: dict[tuple[str, str], int] = {}
    for piece in pieces:
        line = piece.payload.version_line
        newest[line] = max(newest.get(line, 0), piece.payload.version)
    return [
        piece for piece in pieces if piece.payload.version == newest[piece.payload.version_line]
    ]


def assemble(
    pieces: Iterable[Piece], limit: int, copy_threshold: float, max_chunks: int
) -> list[Passage]:
    """Up to `limit` distinct passages from chunks given best first:

    - a chunk next to (or overlapping) a kept passage of its own document joins it, as long as
      that passage spans at most `max_chunks` chunks; if the grown passage now copies another
      kept one, the better-ranked keeps the other as a copy;
    - otherwise a chunk whose text copies a kept passage (`services.search.duplicates`) folds
      into it and is listed in its `also_in`;
    - any other chunk is a passage of its own, while fewer than `limit` are kept.

    Chunks ranked after the last kept passage can still join or fold into one, so a deeper
    list of candidates refills the answer with distinct passages.
    """
    kept: list[Passage] = []

    def copied(mine: Signature, skip: int = -1) -> int | None:
        return next(
            (
                i
                for i, theirs in enumerate(kept)
                if i != skip and is_copy(mine, theirs.signature, copy_threshold)
            ),
            None,
        )

    for piece in pieces:
        mine = signature_of(piece.payload.copy_signature)
        # A neighbour joins first: a short chunk that lies mostly in the overlap with the
        # next one repeats its words, but it is more of the same stretch, not a copy.
        place = _neighbour(kept, piece, max_chunks)
        if place is None:
            original = copied(mine)
            if original is not None:
                kept[original] = _with_copy(kept[original], piece.source, ())
            elif len(kept) < limit:
                kept.append(Passage.of(piece, mine))
            continue
        kept[place] = _join(kept[place], piece, mine)
        # Grown, the passage may now hold the text of another kept one: the better-ranked
        # of the two keeps the other as a copy.
        other = copied(kept[place].signature, skip=place)
        if other is not None:
            better, worse = sorted((place, other), key=lambda i: kept[i].rank)
            loser = kept[worse]
            kept[better] = replace(
                _with_copy(kept[better], loser.source, loser.also_in),
                signature=kept[better].signature.union(loser.signature),
            )
            del kept[worse]
    return kept


def _neighbour(kept: Sequence[Passage], piece: Piece, max_chunks: int) -> int | None:
    """The kept passage of the same document that `piece` touches, if joining stays within
    `max_chunks` chunks."""
    document, index = piece.document_id, piece.chunk_index
    for position, other in enumerate(kept):
        if other.document_id != document:
            continue
        touches = other.first_index - 1 <= index <= other.last_index + 1
        span = max(other.last_index, index) - min(other.first_index, index)
        if touches and span < max_chunks:
            return position
    return None


def _with_copy(original: Passage, copy: Source, also: tuple[Source, ...]) -> Passage:
    """`original` listing the copy's document (and those folded into it), once each."""
    known = {source.document_id for source in (original.source, *original.also_in)}
    extra: dict[str, Source] = {}
    for source in (copy, *also):
        if source.document_id not in known:
            extra.setdefault(source.document_id, source)
    return replace(original, also_in=(*original.also_in, *extra.values()))


def _join(passage: Passage, piece: Piece, signature: Signature) -> Passage:
    """The passage with a neighbouring chunk of its document (one already in it changes
    nothing but the score and rank)."""
    pieces = passage.pieces
    if not any(p.chunk_index == piece.chunk_index for p in pieces):
        pieces = tuple(sorted((*pieces, piece), key=lambda p: p.chunk_index))
    return Passage(
        pieces=pieces,
        score=max(passage.score, piece.score),
        rank=min(passage.rank, piece.rank),
        signature=passage.signature.union(signature),
        also_in=passage.also_in,
    )


def text_of(passage: Passage) -> str:
    """The passage's text: each chunk's text after the part the one before already holds
    (known from their offsets)."""
    first, *rest = passage.pieces
    text = first.payload.chunk_text
    end = first.payload.end
    for piece in rest:
        more, start = piece.payload.chunk_text, piece.payload.start
        if end is not None and start is not None and start < end:
            text += more[end - start :]
        else:
            text += "\n" + more
        end = piece.payload.end
    return text


def estimate_tokens(text: str) -> int:
    """About how many tokens a text is for a language model."""
    return max(1, math.ceil(len(text) / CHARS_PER_TOKEN))


def within_budget(texts: Sequence[str], max_tokens: int | None) -> list[str]:
    """The best passages' texts whose tokens add up to at most `max_tokens`.

    If even the best passage is longer than the budget, it is cut to the budget rather than
    leaving the bot with nothing.
    """
    if max_tokens is None:
        return list(texts)
    kept: list[str] = []
    used = 0
    for text in texts:
        cost = estimate_tokens(text)
        if used + cost > max_tokens:
            break
        kept.append(text)
        used += cost
    if not kept and texts:
        kept.append(texts[0][: max_tokens * CHARS_PER_TOKEN])
    return kept
