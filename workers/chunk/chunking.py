"""Sliding-window chunking. Pure: no I/O.

Whitespace is normalised, then a window of `chunk_size` characters slides over the text with
`overlap` characters shared between neighbours. A window that does not reach the end of the
text is cut at the last newline, else the last sentence end (". "), else the last space, as
long as that boundary lies past half the window; otherwise it is cut hard.

Text can arrive in parts (pages of a long PDF while it is still being extracted): `feed` chunks
what it can and keeps the rest in a small `ChunkerState`, and the chunks come out exactly as if
the whole text had been chunked at once, because a window is only cut once the text beyond it
has arrived.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from pydantic import BaseModel, Field

from schemas.domain import ChunkRecord, ExtractedDocument, TextSegment

BOUNDARIES: tuple[str, ...] = ("\n", ". ", " ")
SEGMENT_SEPARATOR = "\n\n"

_INLINE_SPACE = re.compile(r"[^\S\n]+")
_SPACE_AROUND_NEWLINE = re.compile(r" *\n *")
_BLANK_LINES = re.compile(r"\n{3,}")


def normalize_whitespace(text: str) -> str:
    """Collapses runs of spaces and tabs, trims lines, keeps at most one blank line."""
    text = text.replace("\r\n", "\n").replace("\r", "\n").replace("\x00", "")
    text = _INLINE_SPACE.sub(" ", text)
    text = _SPACE_AROUND_NEWLINE.sub("\n", text)
    text = _BLANK_LINES.sub("\n\n", text)
    return text.strip()


@dataclass(frozen=True)
class Span:
    """A chunk's text and its [start, end) offsets in the normalised text."""

    text: str
    start: int
    end: int


def chunk_text(text: str, chunk_size: int = 1200, overlap: int = 180) -> list[Span]:
    """Splits already-normalised text into overlapping spans."""
    spans, _ = _windows(text, chunk_size, overlap, final=True)
    return spans


def _windows(text: str, size: int, overlap: int, *, final: bool) -> tuple[list[Span], int]:
    """Cuts the windows that can be decided; returns them and where the next one starts.

    Unless `final`, a window that would reach the end of `text` is left for later: more text
    may follow, which would change where it is cut.
    """
    if overlap >= size:
        raise ValueError("overlap must be smaller than chunk_size")
    spans: list[Span] = []
    length = len(text)
    start = 0
    while start < length:
        if not final and start + size >= length:
            break
        end = min(start + size, length)
        if end < length:
            end = start + _cut(text[start:end], size)
        piece = text[start:end]
        stripped = piece.strip()
        if stripped:
            lead = len(piece) - len(piece.lstrip())
            spans.append(Span(stripped, start + lead, start + lead + len(stripped)))
        if end >= length:
            start = length
            break
        start = max(end - overlap, start + 1)
    return spans, start


def _cut(window: str, chunk_size: int) -> int:
    """Where to end a full window: just after the preferred boundary past its middle."""
    floor = chunk_size // 2
    for boundary in BOUNDARIES:
        position = window.rfind(boundary)
        if position >= floor:
            return position + len(boundary)
    return len(window)


class SegmentMark(BaseModel):
    """Where a segment (page, section) starts in the normalised text."""

    offset: int
    page: int | None = None
    heading_path: list[str] = Field(default_factory=list)


class ChunkerState(BaseModel):
    """What the chunker keeps between parts of one document."""

    # Normalised text not yet fully chunked, and its offset in the whole normalised text.
    pending: str = ""
    offset: int = 0
    # Starts of the segments that pending text belongs to.
    marks: list[SegmentMark] = Field(default_factory=list)
    # Whether any text was seen (the next segment then needs a separator).
    started: bool = False
    next_index: int = 0
    # Chunks decided but held back: a non-final part hands on only whole batches, and keeps
    # at least one chunk, so that the final part always has a batch to hand on.
    held: list[ChunkRecord] = Field(default_factory=list)

    @property
    def length(self) -> int:
        """Characters of normalised text seen so far."""
        return self.offset + len(self.pending)


def feed(
    state: ChunkerState,
    segments: list[TextSegment],
    chunk_size: int = 1200,
    overlap: int = 180,
    *,
    final: bool,
    batch_size: int = 1,
) -> tuple[ChunkerState, list[ChunkRecord]]:
    """Adds a part's segments; returns the new state and the chunks to hand on now.

    An atomic segment (a question/answer pair) closes the text before it and becomes one chunk
    of its own. Unless `final`, the chunks handed on are a whole number of `batch_size` batches.
    """
    pending = state.pending
    offset = state.offset
    marks = list(state.marks)
    started = state.started
    records: list[ChunkRecord] = []

    def cut(last: bool) -> None:
        nonlocal pending, offset
        spans, consumed = _windows(pending, chunk_size, overlap, final=last)
        for span in spans:
            mark = _mark_at(marks, offset + span.start)
            records.append(
                ChunkRecord(
                    chunk_index=state.next_index + len(records),
                    text=span.text,
                    start=offset + span.start,
                    end=offset + span.end,
                    page=mark.page if mark else None,
                    heading_path=list(mark.heading_path) if mark else [],
                )
            )
        pending = pending[consumed:]
        offset += consumed

    for segment in segments:
        text = normalize_whitespace(segment.text)
        if not text:
            continue
        separator = SEGMENT_SEPARATOR if started else ""
        started = True
        if segment.atomic:
            cut(last=True)
            start = offset + len(pending) + len(separator)
            records.append(
                ChunkRecord(
                    chunk_index=state.next_index + len(records),
                    text=text,
                    start=start,
                    end=start + len(text),
                    page=segment.page,
                    heading_path=list(segment.heading_path),
                )
            )
            offset = start + len(text)
            pending = ""
            marks = []
            continue
        pending += separator
        marks.append(
            SegmentMark(
                offset=offset + len(pending),
                page=segment.page,
                heading_path=list(segment.heading_path),
            )
        )
        pending += text
    cut(last=final)
    out = [*state.held, *records]
    held: list[ChunkRecord] = []
    if not final and out:
        keep = len(out) % batch_size or batch_size
        held, out = out[-keep:], out[:-keep]
    kept = [m for m in marks if m.offset > offset]
    before = [m for m in marks if m.offset <= offset]
    if before:
        kept.insert(0, before[-1])
    return (
        ChunkerState(
            pending=pending,
            offset=offset,
            marks=kept,
            started=started,
            next_index=state.next_index + len(records),
            held=held,
        ),
        out,
    )


def _mark_at(marks: list[SegmentMark], offset: int) -> SegmentMark | None:
    found = None
    for mark in marks:
        if mark.offset <= offset:
            found = mark
        else:
            break
    return found


def chunk_document(
    document: ExtractedDocument, chunk_size: int = 1200, overlap: int = 180
) -> tuple[list[ChunkRecord], int]:
    """Chunks a whole document; returns the chunks and the normalised text's length.

    Segments (pages, sections) are normalised and joined with a blank line, and each chunk is
    attributed to the segment its first character lies in.
    """
    state, records = feed(ChunkerState(), document.segments, chunk_size, overlap, final=True)
    return records, state.length
