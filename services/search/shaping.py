"""Shaping search results into passages. Pure: no I/O.

- one version per source: chunks of an older version of a source are dropped when a newer one
  is in the same answer (the store swaps versions in one step, this makes sure of it);
- neighbours merged: adjacent or overlapping chunks of one document become one passage (of at
  most `search.merge_max_chunks` chunks), with the overlap removed, so an answer is
  not the same sentences twice;
- copies folded: near-identical passages, of any document, fold into the best-ranked one and
  are listed in its `also_in` (`services.search.duplicates`), and the next distinct passage moves
  up;
- a token budget: `max_context_tokens` keeps the best passages that fit.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace

from infra.vectorstore.base import ScoredChunk
from schemas.chunks import ChunkPayload
from services.search.duplicates import overlap, shingles

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
class Passage:
    """One or more adjacent chunks of a document, as one hit."""

    payload: ChunkPayload
    text: str
    score: float
    first_index: int
    last_index: int
    start: int | None
    end: int | None
    rationale: str
    rank: int
    # Other places holding (nearly) the same text, folded into this passage.
    also_in: tuple[Source, ...] = ()

    @property
    def source(self) -> Source:
        """The document and chunk this passage comes from."""
        payload = self.payload
        return Source(
            document_id=payload.document_id,
            document_title=payload.title,
            source_name=payload.source_name,
            kb_id=payload.kb_id,
            page=payload.page,
            chunk_index=self.first_index,
        )


def newest_versions(chunks: list[ScoredChunk]) -> list[ScoredChunk]:
    """Drops chunks of a source whose newer version is also among the results."""
    newest: dict[tuple[str, str], int] = {}
    for chunk in chunks:
        line = chunk.payload.version_line
        newest[line] = max(newest.get(line, 0), chunk.payload.version)
    return [
        chunk for chunk in chunks if chunk.payload.version == newest[chunk.payload.version_line]
    ]


def assemble(
    passages: Iterable[Passage], limit: int, copy_threshold: float, max_chunks: int
) -> list[Passage]:
    """Up to `limit` distinct passages from single-chunk passages given best first:

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
    prints: list[frozenset[int]] = []

    def copied(mine: frozenset[int], skip: int = -1) -> int | None:
        return next(
            (
                i
                for i, theirs in enumerate(prints)
                if i != skip and overlap(mine, theirs) >= copy_threshold
            ),
            None,
        )

    for passage in passages:
        mine = shingles(passage.text)
        # A neighbour joins first: a short chunk that lies mostly in the overlap with the
        # next one repeats its words, but it is more of the same stretch, not a copy.
        place = _neighbour(kept, passage, max_chunks)
        if place is None:
            original = copied(mine)
            if original is not None:
                kept[original] = _with_copy(kept[original], passage)
            elif len(kept) < limit:
                kept.append(passage)
                prints.append(mine)
            continue
        kept[place] = _join(*sorted((kept[place], passage), key=lambda p: p.first_index))
        prints[place] = prints[place] | mine
        # Grown, the passage may now hold the text of another kept one: the better-ranked
        # of the two keeps the other as a copy.
        other = copied(prints[place], skip=place)
        if other is not None:
            better, worse = sorted((place, other), key=lambda i: kept[i].rank)
            kept[better] = _with_copy(kept[better], kept[worse])
            prints[better] = prints[better] | prints[worse]
            del kept[worse], prints[worse]
    return kept


def _neighbour(kept: Sequence[Passage], passage: Passage, max_chunks: int) -> int | None:
    """The kept passage of the same document that `passage` touches, if joining stays within
    `max_chunks` chunks."""
    document = passage.payload.document_id
    for position, other in enumerate(kept):
        if other.payload.document_id != document:
            continue
        touches = (
            passage.first_index <= other.last_index + 1
            and passage.last_index >= other.first_index - 1
        )
        span = max(other.last_index, passage.last_index) - min(
            other.first_index, passage.first_index
        )
        if touches and span < max_chunks:
            return position
    return None


def _with_copy(original: Passage, copy: Passage) -> Passage:
    """`original` listing `copy`'s document (and those folded into it), once each."""
    known = {source.document_id for source in (original.source, *original.also_in)}
    extra: dict[str, Source] = {}
    for source in (copy.source, *copy.also_in):
        if source.document_id not in known:
            extra.setdefault(source.document_id, source)
    return replace(original, also_in=(*original.also_in, *extra.values()))


def _join(left: Passage, right: Passage) -> Passage:
    """`left` then `right` without the text they share (known from their offsets)."""
    if right.last_index <= left.last_index:
        return replace(left, score=max(left.score, right.score), rank=min(left.rank, right.rank))
    text = left.text
    if left.end is not None and right.start is not None and right.start < left.end:
        text += right.text[left.end - right.start :]
    else:
        text += "\n" + right.text
    return Passage(
        payload=left.payload,
        text=text,
        score=max(left.score, right.score),
        first_index=left.first_index,
        last_index=right.last_index,
        start=left.start,
        end=right.end,
        rationale=left.rationale if left.rank <= right.rank else right.rationale,
        rank=min(left.rank, right.rank),
        also_in=(*left.also_in, *right.also_in),
    )


def estimate_tokens(text: str) -> int:
    """About how many tokens a text is for a language model."""
    return max(1, math.ceil(len(text) / CHARS_PER_TOKEN))


def within_budget(passages: Sequence[Passage], max_tokens: int | None) -> list[Passage]:
    """The best passages whose tokens add up to at most `max_tokens`.

    If even the best passage is longer than the budget, it is cut to the budget rather than
    leaving the bot with nothing.
    """
    if max_tokens is None:
        return list(passages)
    kept: list[Passage] = []
    used = 0
    for passage in passages:
        cost = estimate_tokens(passage.text)
        if used + cost > max_tokens:
            break
        kept.append(passage)
        used += cost
    if not kept and passages:
        first = passages[0]
        kept.append(replace(first, text=first.text[: max_tokens * CHARS_PER_TOKEN]))
    return kept
