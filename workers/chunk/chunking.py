"""Sliding-window chunking, as seed 000 specifies it. Pure: no I/O.

Whitespace is normalised, then a window of `chunk_size` characters slides over the text with
`overlap` characters shared between neighbours. A window that does not reach the end of the
text is cut at the last newline, else the last sentence end (". "), else the last space, as
long as that boundary lies past half the window; otherwise it is cut hard.
"""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass

from schemas.domain import ChunkRecord, ExtractedDocument

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
    if overlap >= chunk_size:
        raise ValueError("overlap must be smaller than chunk_size")
    spans: list[Span] = []
    length = len(text)
    start = 0
    while start < length:
        end = min(start + chunk_size, length)
        if end < length:
            end = start + _cut(text[start:end], chunk_size)
        piece = text[start:end]
        stripped = piece.strip()
        if stripped:
            lead = len(piece) - len(piece.lstrip())
            spans.append(Span(stripped, start + lead, start + lead + len(stripped)))
        if end >= length:
            break
        start = max(end - overlap, start + 1)
    return spans


def _cut(window: str, chunk_size: int) -> int:
    """Where to end a full window: just after the preferred boundary past its middle."""
    floor = chunk_size // 2
    for boundary in BOUNDARIES:
        position = window.rfind(boundary)
        if position >= floor:
            return position + len(boundary)
    return len(window)


def chunk_document(
    document: ExtractedDocument, chunk_size: int = 1200, overlap: int = 180
) -> tuple[list[ChunkRecord], int]:
    """Chunks a whole document; returns the chunks and the normalised text's length.

    Segments (pages, sections) are normalised and joined with a blank line, and each chunk is
    attributed to the segment its first character lies in.
    """
    parts: list[str] = []
    starts: list[int] = []
    owners: list[int] = []
    offset = 0
    for index, segment in enumerate(document.segments):
        text = normalize_whitespace(segment.text)
        if not text:
            continue
        if parts:
            offset += len(SEGMENT_SEPARATOR)
        starts.append(offset)
        owners.append(index)
        parts.append(text)
        offset += len(text)
    full = SEGMENT_SEPARATOR.join(parts)
    records = []
    for number, span in enumerate(chunk_text(full, chunk_size, overlap)):
        owner = document.segments[owners[bisect.bisect_right(starts, span.start) - 1]]
        records.append(
            ChunkRecord(
                chunk_index=number,
                text=span.text,
                start=span.start,
                end=span.end,
                page=owner.page,
                heading_path=list(owner.heading_path),
            )
        )
    return records, len(full)
