"""Pins seed 000's chunking: whitespace normalised, 1200/180 window, boundary past 50%."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from schemas.domain import ExtractedDocument, TextSegment
from workers.chunk.chunking import chunk_document, chunk_text, normalize_whitespace


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
