"""The generic context prefix, the text around a chunk, and the exact string that is embedded."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from infra.context.base import ContextRequest, build_prompt, context_key
from schemas.domain import ChunkRecord, ExtractedDocument, TextSegment
from schemas.events import ChunkBatchReady
from workers.chunk.chunking import chunk_document, normalize_whitespace
from workers.chunk.context import (
    GENERIC_MAX_CHARS,
    clean_answer,
    combine,
    generic_context,
    surroundings,
    with_generic_context,
)


def test_title_headings_and_page() -> None:
    context = generic_context(
        "Debian Policy Manual", ["4. Source packages", "4.9 Main building script"], 12
    )
    assert context == (
        "Debian Policy Manual > 4. Source packages > 4.9 Main building script (page 12)"
    )


def test_empty_parts_are_left_out() -> None:
    assert generic_context("Handbook", [], None) == "Handbook"
    assert generic_context("", ["Returns", "Refunds"], None) == "Returns > Refunds"
    assert generic_context("scan.pdf", [], 3) == "scan.pdf (page 3)"
    assert generic_context("", [], 7) == "(page 7)"
    assert generic_context("", [], None) == ""
    assert generic_context("  ", ["", "  "], None) == ""


def test_a_heading_repeating_the_title_is_dropped() -> None:
    # A Markdown file's title is its first heading, which also heads its heading path.
    assert generic_context("Returns policy", ["Returns Policy", "Refunds"]) == (
        "Returns policy > Refunds"
    )


def test_whitespace_in_titles_and_headings_is_collapsed() -> None:
    assert generic_context("The\n  Handbook", ["Part\tone"]) == "The Handbook > Part one"


def test_a_long_path_keeps_title_innermost_heading_and_page() -> None:
    headings = [
        "Chapter 1: Installing the system on a new machine",
        "1.4 Partitioning the disks before installing",
        "1.4.2 Logical volumes and encrypted volumes",
        "1.4.2.1 Resizing a logical volume that is in use",
    ]
    context = generic_context("The Debian Administrator's Handbook", headings, 42)
    assert len(context) <= GENERIC_MAX_CHARS
    assert context.startswith("The Debian Administrator's Handbook > … > ")
    assert context.endswith("1.4.2.1 Resizing a logical volume that is in use (page 42)")


def test_a_very_long_title_is_cut_at_a_word() -> None:
    context = generic_context("word " * 100, ["Section"], 1)
    assert len(context) <= GENERIC_MAX_CHARS
    assert "word…" in context
    assert context.endswith("Section (page 1)")


@given(
    st.text(max_size=600),
    st.lists(st.text(max_size=300), max_size=8),
    st.one_of(st.none(), st.integers(min_value=1, max_value=100_000)),
)
def test_the_prefix_is_bounded_and_on_one_line(
    title: str, headings: list[str], page: int | None
) -> None:
    context = generic_context(title, headings, page)
    assert len(context) <= GENERIC_MAX_CHARS
    assert "\n" not in context
    if page is not None:
        assert context.endswith(f"(page {page})")


def test_embedding_text_is_the_context_then_the_chunk() -> None:
    chunk = ChunkRecord(chunk_index=0, text="Refunds take 14 days.", start=0, end=21)
    assert chunk.embedding_text == "Refunds take 14 days."
    with_context = chunk.model_copy(update={"context": "Returns policy > Refunds"})
    assert with_context.embedding_text == "Returns policy > Refunds\n\nRefunds take 14 days."
    assert with_context.text == "Refunds take 14 days."


def test_events_made_before_contexts_still_decode() -> None:
    old = (
        '{"tenant_id": "t", "kb_id": "kb", "document_id": "d", "generation": 1, '
        '"batch_index": 0, "last": true, '
        '"chunks": [{"chunk_index": 0, "text": "hello", "start": 0, "end": 5}]}'
    )
    batch = ChunkBatchReady.model_validate_json(old)
    assert batch.chunks[0].context == ""
    assert batch.chunks[0].embedding_text == "hello"


def _document() -> ExtractedDocument:
    paragraphs = [f"Paragraph {n} says something about topic {n}. " * 6 for n in range(12)]
    return ExtractedDocument(
        title="Manual",
        segments=[
            TextSegment(text="\n\n".join(paragraphs[:6]), page=1, heading_path=["Manual", "Intro"]),
            TextSegment(text="\n\n".join(paragraphs[6:]), page=2, heading_path=["Manual", "Use"]),
        ],
    )


def test_generic_context_leaves_the_chunk_text_as_it_is() -> None:
    chunks, _ = chunk_document(_document(), 400, 60)
    contexts = with_generic_context("Manual", chunks)
    assert [c.text for c in contexts] == [c.text for c in chunks]
    assert contexts[0].context == "Manual > Intro (page 1)"
    assert contexts[-1].context == "Manual > Use (page 2)"


def test_surroundings_are_the_documents_text_around_each_chunk() -> None:
    document = _document()
    chunks, _ = chunk_document(document, 400, 60)
    whole = "\n\n".join(normalize_whitespace(s.text) for s in document.segments)
    around = surroundings(chunks, 150)
    for chunk, (before, after) in zip(chunks, around, strict=True):
        assert before == whole[max(0, chunk.start - 150) : chunk.start].strip()
        assert after == whole[chunk.end : chunk.end + 150].strip()
    assert around[0][0] == ""
    assert around[-1][1] == ""
    assert surroundings(chunks, 0) == [("", "")] * len(chunks)


def test_the_answer_is_one_bounded_line() -> None:
    assert clean_answer('  "This chunk is from the\nreturns policy."  ', 240) == (
        "This chunk is from the returns policy."
    )
    long = "This passage explains refunds in detail. " + "It goes on and on. " * 20
    # Whole sentences, as many as fit.
    assert clean_answer(long, 100) == long[:97]
    assert long[:97].endswith("It goes on and on.")
    assert len(clean_answer("word " * 100, 50)) <= 50
    assert clean_answer("   ", 50) == ""


def test_the_answer_follows_the_generic_prefix() -> None:
    assert combine("Manual > Use", "How to use it.") == "Manual > Use\nHow to use it."
    assert combine("", "How to use it.") == "How to use it."
    assert combine("Manual > Use", "") == "Manual > Use"


def test_the_prompt_has_title_headings_surroundings_and_chunk() -> None:
    prompt = build_prompt(
        ContextRequest("Manual", ["Manual", "Use"], "The chunk.", "Before it.", "After it.")
    )
    assert "<document_title>Manual</document_title>" in prompt
    assert "<section>Manual > Use</section>" in prompt
    assert "<text_before>…Before it.</text_before>" in prompt
    assert "<chunk>The chunk.</chunk>" in prompt
    assert "<text_after>After it.…</text_after>" in prompt
    bare = build_prompt(ContextRequest("", [], "The chunk."))
    assert "<section>" not in bare
    assert "<text_before>" not in bare
    assert "<document_title>" not in bare


def test_the_cache_key_covers_provider_model_and_chunk_with_its_place() -> None:
    key = context_key("openai", "m", "Manual", ["Use"], "text")
    assert key == context_key("openai", "m", "Manual", ["Use"], "text")
    others = {
        context_key("gemini", "m", "Manual", ["Use"], "text"),
        context_key("openai", "m2", "Manual", ["Use"], "text"),
        context_key("openai", "m", "Handbook", ["Use"], "text"),
        context_key("openai", "m", "Manual", ["Intro"], "text"),
        context_key("openai", "m", "Manual", ["Use"], "text!"),
    }
    assert key not in others
    assert len(others) == 5
