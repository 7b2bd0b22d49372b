"""Near-duplicate passages fold into the best-ranked copy (pure logic)."""

from __future__ import annotations

from core.copies import Signature
from schemas.chunks import ChunkPayload
from services.search.shaping import Piece, assemble

POLICY = (
    "Every package must have a maintainer field. The maintainer is responsible for the "
    "package and receives its bug reports. Uploads without a valid maintainer address are "
    "rejected by the archive software, and the package is removed after a grace period of "
    "thirty days unless somebody adopts it."
)
# The same text as a PDF prints it: line breaks, a word hyphenated across lines, a ligature,
# a running header between pages.
POLICY_FROM_PDF = (
    "Every package must have a maintainer field. The main-\ntainer is responsible for the\n"
    "package and receives its bug reports. Uploads without a valid maintainer address are\n"
    "Debian Policy Manual, page 12\n"
    "rejected by the archive software, and the package is removed after a grace period of\n"
    "thirty days unless somebody adopts it."
)
OTHER = (
    "Shared libraries must be placed in a package of their own, named after the soname. "
    "The development files go into a separate package with the -dev suffix, which depends "
    "on the library package of the same version."
)


def _piece(document: str, text: str, rank: int, index: int = 0) -> Piece:
    """A candidate as read: its payload carries its text's copy signature."""
    return Piece(
        point_id=f"{document}-{index}",
        payload=ChunkPayload(
            tenant_id="t1",
            document_id=document,
            chunk_index=index,
            chunk_text=text,
            document_title=f"Title of {document}",
            source_name=f"{document}.pdf",
            kb_id="kb1",
            page=index + 1,
        ),
        score=1.0 / (rank + 1),
        rank=rank,
    )


def _overlap(first: str, second: str) -> float:
    return Signature.of(first).overlap(Signature.of(second))


def test_the_same_passage_in_another_format_is_a_copy() -> None:
    assert _overlap(POLICY, POLICY_FROM_PDF) >= 0.8
    assert _overlap(POLICY, OTHER) == 0.0


def test_chunks_cut_at_different_places_still_overlap() -> None:
    words = (POLICY + " " + OTHER).split()
    early = " ".join(words[:50])
    late = " ".join(words[25:75])
    assert _overlap(early, late) >= 0.45
    assert _overlap(early, " ".join(words[50:])) == 0.0


def test_short_texts_compare_as_whole_word_sequences() -> None:
    assert _overlap("Error E42", "error: e42!") == 1.0
    assert _overlap("Error E42", "Error E43") == 0.0
    assert Signature.of("").hashes == frozenset()


def test_copies_fold_into_the_best_ranked_and_the_list_is_refilled() -> None:
    passages = [
        _piece("pdf", POLICY_FROM_PDF, 0),
        _piece("docx", POLICY, 1),
        _piece("txt", POLICY.upper(), 2),
        _piece("pdf", OTHER, 3, index=4),
        _piece("docx", OTHER, 4, index=2),
        _piece("notes", "Lunch is served at noon in the canteen on the second floor.", 5),
        _piece("faq", "Parking is free for visitors who register at the front desk.", 6),
    ]
    kept = assemble(passages, limit=3, copy_threshold=0.5, max_chunks=3)
    assert [(p.document_id, p.first_index) for p in kept] == [
        ("pdf", 0),
        ("pdf", 4),
        ("notes", 0),
    ]
    assert [(c.document_id, c.page) for c in kept[0].also_in] == [("docx", 1), ("txt", 1)]
    assert kept[0].also_in[0].document_title == "Title of docx"
    assert [(c.document_id, c.chunk_index) for c in kept[1].also_in] == [("docx", 2)]
    assert kept[2].also_in == ()


def test_a_high_threshold_keeps_partial_copies_apart() -> None:
    words = POLICY.split()
    first = _piece("a", " ".join(words[:30]), 0)
    second = _piece("b", " ".join(words[10:]), 1)
    assert len(assemble([first, second], 4, copy_threshold=0.5, max_chunks=3)) == 1
    assert len(assemble([first, second], 4, copy_threshold=0.9, max_chunks=3)) == 2
