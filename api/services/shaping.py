"""Shaping search results into passages. Pure: no I/O.

- one version per source: chunks of an older version of a source are dropped when a newer one
  is in the same answer (the store swaps versions in one step, this makes sure of it);
- neighbours merged: adjacent or overlapping chunks of one document become one passage, with
  the overlap removed (seed 004), so an answer is not the same sentences twice;
- copies folded: near-identical passages of other documents fold into the best-ranked one
  (`api.services.duplicates`);
- a token budget: `max_context_tokens` keeps the best passages that fit (seed 003).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from infra.vectorstore.base import ScoredChunk

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

    payload: dict[str, Any]
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
        page = payload.get("page")
        return Source(
            document_id=str(payload.get("document_id", "")),
            document_title=str(payload.get("document_title") or payload.get("source_name") or ""),
            source_name=str(payload.get("source_name", "")),
            kb_id=str(payload.get("kb_id", "")),
            page=int(page) if isinstance(page, int | float) else None,
            chunk_index=self.first_index,
        )


def newest_versions(chunks: list[ScoredChunk]) -> list[ScoredChunk]:
    """Drops chunks of a source whose newer version is also among the results."""
    newest: dict[tuple[str, str], int] = {}
    for chunk in chunks:
        key = _source(chunk.payload)
        newest[key] = max(newest.get(key, 0), int(chunk.payload.get("version") or 0))
    return [
        chunk
        for chunk in chunks
        if int(chunk.payload.get("version") or 0) == newest[_source(chunk.payload)]
    ]


def _source(payload: dict[str, Any]) -> tuple[str, str]:
    return str(payload.get("kb_id")), str(payload.get("source_key") or payload.get("document_id"))


def merge_adjacent(passages: Sequence[Passage]) -> list[Passage]:
    """Merges passages of one document whose chunks are neighbours; keeps the best rank."""
    by_document: dict[str, list[Passage]] = {}
    for passage in passages:
        by_document.setdefault(str(passage.payload.get("document_id")), []).append(passage)
    merged: list[Passage] = []
    for group in by_document.values():
        group.sort(key=lambda p: p.first_index)
        current = group[0]
        for following in group[1:]:
            if following.first_index <= current.last_index + 1:
                current = _join(current, following)
            else:
                merged.append(current)
                current = following
        merged.append(current)
    return sorted(merged, key=lambda p: p.rank)


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
