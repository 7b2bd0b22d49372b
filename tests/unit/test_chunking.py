"""Pins the chunking: whitespace normalised, 1200/180 window, boundary past 50%."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st

from schemas.domain import ChunkRecord, ExtractedDocument, TextSegment
from workers.chunk.chunking import (
    ChunkerState,
    chunk_document,
    chunk_text,
    feed,
    normalize_whitespace,
)


def test_whitespace_is_normalised() -> None:
    raw = "  Title\t\twith   tabs \r\n\r\n\r\n\r\nNext   line  \n   indented\x00 line  "
    assert normalize_whitespace(raw) == "Title with tabs\n\nNext line\nindented line"


def test_short_text_is_one_chunk() -> None:
    spans = chunk_text("A short note.", 1200, 180)
    assert [(s.text, s.start, s.end) for s in spans] == [("A short note.", 0, 13)]


def test_prefers_newline_past_half_the_window() -> None:
    first = "a" * 700 + "\n"
    text = first + "b " * 400
    spans = chunk_text(text, 1200, 180)
    # The cut falls just after the newline (position 701), not at 1200.
    assert spans[0].text == "a" * 700
    assert spans[0].end == 700


def test_prefers_sentence_end_over_space() -> None:
    text = ("word " * 130) + "End. " + ("tail " * 200)
    spans = chunk_text(text, 1200, 180)
    assert spans[0].text.endswith("End.")


def test_falls_back_to_space_then_hard_cut() -> None:
    spaced = "x" * 900 + " " + "y" * 600
    assert chunk_text(spaced, 1200, 180)[0].text == "x" * 900
    unbroken = "z" * 3000
    spans = chunk_text(unbroken, 1200, 180)
    assert [len(s.text) for s in spans] == [1200, 1200, 960]


def test_boundary_before_half_the_window_is_ignored() -> None:
    text = "a" * 500 + "\n" + "b" * 2000
    spans = chunk_text(text, 1200, 180)
    # The newline at 500 is before 600 (half of 1200): a hard cut at 1200 instead.
    assert spans[0].end == 1200


def test_neighbours_overlap_by_the_configured_amount() -> None:
    text = "z" * 3000
    spans = chunk_text(text, 1200, 180)
    assert spans[1].start == spans[0].end - 180
    assert text[spans[1].start : spans[0].end] == "z" * 180


def test_overlap_must_be_smaller_than_the_window() -> None:
    with pytest.raises(ValueError, match="overlap"):
        chunk_text("text", 100, 100)


@given(
    st.text(alphabet=st.sampled_from("ab .\n"), min_size=1, max_size=6000),
    st.integers(min_value=50, max_value=1500),
    st.integers(min_value=0, max_value=49),
)
def test_chunks_cover_the_text_in_order(text: str, size: int, overlap: int) -> None:
    normalised = normalize_whitespace(text)
    spans = chunk_text(normalised, size, overlap)
    for span in spans:
        assert normalised[span.start : span.end] == span.text
        assert 0 < len(span.text) <= size
    assert [s.start for s in spans] == sorted(s.start for s in spans)
    # Every non-space character is in some chunk.
    covered: set[int] = set()
    for span in spans:
        covered.update(range(span.start, span.end))
    assert all(i in covered for i, ch in enumerate(normalised) if not ch.isspace())


def test_document_chunks_carry_pages_and_offsets() -> None:
    pages = [TextSegment(text=f"Page {n} " + "lorem ipsum " * 150, page=n) for n in (1, 2, 3)]
    chunks, length = chunk_document(ExtractedDocument(title="t", segments=pages))
    assert [c.chunk_index for c in chunks] == list(range(len(chunks)))
    assert chunks[0].page == 1
    assert chunks[-1].page == 3
    assert any(c.text.startswith("Page 2") or "Page 2" in c.text for c in chunks)
    assert all(c.end <= length for c in chunks)
    # A chunk is attributed to the page its first character is on.
    page_two = next(c for c in chunks if "Page 2" in c.text)
    assert page_two.page in (1, 2)


def test_empty_segments_are_skipped() -> None:
    document = ExtractedDocument(
        title="t", segments=[TextSegment(text="  \n "), TextSegment(text="Only text", page=4)]
    )
    chunks, length = chunk_document(document)
    assert [(c.text, c.page, c.start) for c in chunks] == [("Only text", 4, 0)]
    assert length == len("Only text")


@given(
    st.lists(
        st.tuples(
            st.text(alphabet=st.sampled_from("abc .\n\t"), max_size=900),
            st.one_of(st.none(), st.integers(min_value=1, max_value=400)),
        ),
        min_size=1,
        max_size=12,
    ),
    st.lists(st.integers(min_value=0, max_value=12), max_size=6),
    st.integers(min_value=40, max_value=400),
    st.integers(min_value=1, max_value=5),
)
def test_chunking_in_parts_equals_chunking_at_once(
    raw_segments: list[tuple[str, int | None]], cuts: list[int], size: int, batch: int
) -> None:
    segments = [TextSegment(text=text, page=page) for text, page in raw_segments]
    overlap = size // 5
    whole, length = chunk_document(ExtractedDocument(title="t", segments=segments), size, overlap)
    bounds = sorted({min(c, len(segments)) for c in cuts} | {0, len(segments)})
    state = ChunkerState()
    pieces: list[ChunkRecord] = []
    parts = list(itertools.pairwise(bounds)) or [(0, 0)]
    for number, (lo, hi) in enumerate(parts):
        final = number == len(parts) - 1
        state, out = feed(state, segments[lo:hi], size, overlap, final=final, batch_size=batch)
        if not final:
            assert len(out) % batch == 0
        pieces.extend(out)
    assert pieces == whole
    assert state.length == length


def test_a_non_final_part_holds_back_its_last_chunk() -> None:
    state, first = feed(ChunkerState(), [TextSegment(text="word " * 600, page=1)], final=False)
    assert first  # most of the text is decided ...
    assert state.held  # ... but the last decided chunk waits for the final part
    state, last = feed(state, [], final=True)
    assert last[0] == state_held(first, last)
    assert [c.chunk_index for c in first + last] == list(range(len(first) + len(last)))


def state_held(first: list[ChunkRecord], last: list[ChunkRecord]) -> ChunkRecord:
    """The held-back chunk comes out first in the final part, right after the others."""
    assert last[0].chunk_index == first[-1].chunk_index + 1
    return last[0]
