"""PDF text as a user gets it: words spaced right, pages in order, encryption, parallel reads."""

from __future__ import annotations

import io
import re
import threading

import pytest
from pypdf import PdfReader, PdfWriter
from pypdf.constants import UserAccessPermissions

from core.errors import ExtractionFailed
from tests.conftest import FIXTURES
from workers.extract.extractors import extract, open_extraction
from workers.extract.pdf import ENCRYPTED

# Every PDF of the fixtures that has a text layer: LaTeX (pdfTeX and XeLaTeX), two OCR layers
# over scans, a UML model exported from a drawing tool, a typeset advertisement.
CORPUS = sorted(
    path.name
    for path in FIXTURES.glob("*.pdf")
    if path.name not in ("encrypted-file.pdf", "libreoffice-writer-password.pdf")
)
_LETTERS = re.compile(r"[^\W\d_]+")
_CAMEL_CASE = re.compile(r"(?<=[a-z])(?=[A-Z])")
# Plain English text has next to no runs of more than 25 letters (2 in the 71,205 words of
# the Debian Policy Manual's text edition); text with glued words has them by the percent
# (7% in pypdf's text of that manual's PDF, 12% of service-handbook.pdf's).
PLAIN_TEXT_LONG_WORDS = 0.001
# A word followed by a lone letter other than "a" or "I" ("Nort h"): prose has up to 0.25%
# of its words so (0.16% in the Debian Policy Manual's text edition); lists of names and
# addresses more (initials, "S.A."; 1.9% in pypdf's text of indirect-rotation.pdf); text whose
# words are broken up has 20-30% (22% in PDFium's own text of indirect-rotation.pdf).
_SPLIT_WORD = re.compile(r"\b[^\W\d_]{2,} (?![aAI]\b)[^\W\d_]\b")
NATURAL_LONE_LETTERS = 0.03


def _text(name: str) -> str:
    document = extract((FIXTURES / name).read_bytes(), name)
    return "\n".join(segment.text for segment in document.segments)


def long_word_share(text: str) -> float:
    """The share of words longer than 25 letters (identifiers split at their capitals)."""
    words = [part for token in _LETTERS.findall(text) for part in _CAMEL_CASE.split(token)]
    return sum(len(word) > 25 for word in words) / max(len(words), 1)


def test_the_corpus_holds_every_fixture_pdf_with_text() -> None:
    assert {"service-handbook.pdf", "indirect-rotation.pdf", "pdflatex-outline.pdf"} <= set(CORPUS)


@pytest.mark.parametrize("name", CORPUS)
def test_no_pdf_of_the_corpus_has_glued_words(name: str) -> None:
    assert long_word_share(_text(name)) <= PLAIN_TEXT_LONG_WORDS


def split_word_share(text: str) -> float:
    """The share of words followed by a lone letter, as in "Nort h Buon a Vist a"."""
    flowing = " ".join(text.split())
    return len(_SPLIT_WORD.findall(flowing)) / max(len(_LETTERS.findall(flowing)), 1)


@pytest.mark.parametrize("name", CORPUS)
def test_no_pdf_of_the_corpus_has_words_broken_up(name: str) -> None:
    assert split_word_share(_text(name)) <= NATURAL_LONE_LETTERS


def test_words_of_an_ocr_layer_drawn_letter_by_letter_stay_whole() -> None:
    # Each word's last letter is drawn on its own, with a different letter spacing.
    lines = {line.strip() for line in _text("indirect-rotation.pdf").splitlines()}
    for line in (
        "9 North Buona Vista Drive",
        "Singapore 138588",
        "The People's Republic of China",
        "China Shipping Container Lines Company Limited",
        "Delmas SAS",
        "Yang Ming Marine Transport Corp.",
    ):
        assert line in lines


def test_words_of_a_xelatex_pdf_are_spaced_as_printed() -> None:
    # XeLaTeX positions words without space characters; this file is typeset in FreeSerif,
    # as the Debian Policy Manual is.
    text = " ".join(_text("service-handbook.pdf").split())
    for sentence in (
        "Customers may return any product within thirty days of delivery",
        "Water damage is covered for twenty four months on every outdoor router of the XJ series",
        "Claims for the model XJ-4471 are forwarded to the hardware team",
        "open Settings > Queues > Escalations",
    ):
        assert sentence in text


def test_words_hyphenated_at_a_line_end_are_joined() -> None:
    # "undam-/aged" ends the first line of the handbook's first paragraph.
    text = _text("service-handbook.pdf")
    assert "complete and undamaged." in " ".join(text.split())
    assert "undam-" not in text
    # A hyphen inside a line stays.
    assert "by e-mail" in text


def test_pdf_title_comes_from_its_metadata() -> None:
    data = (FIXTURES / "service-handbook.pdf").read_bytes()
    assert extract(data, "upload.pdf").title == "Service Handbook for Support Agents"
    # Without a title in the metadata, the file name is the title.
    assert extract((FIXTURES / "crazyones.pdf").read_bytes(), "poem.pdf").title == "poem"


def test_pages_come_one_by_one_with_their_numbers() -> None:
    data = (FIXTURES / "service-handbook.pdf").read_bytes()
    stream = open_extraction(data, "handbook.pdf")
    first = next(stream.segments)
    assert first.page == 1
    assert "Returns and refunds" in first.text
    rest = list(stream.segments)
    assert [segment.page for segment in rest] == [2]
    assert "Opening hours" in rest[0].text


def _encrypted_copy(user_password: str, owner_password: str) -> bytes:
    writer = PdfWriter(clone_from=PdfReader(FIXTURES / "crazyones.pdf"))
    # Printing only: copying and extracting text are not permitted.
    writer.encrypt(user_password, owner_password, permissions_flag=UserAccessPermissions.PRINT)
    buffer = io.BytesIO()
    writer.write(buffer)
    return buffer.getvalue()


def test_a_pdf_that_needs_a_password_to_open_fails_saying_so() -> None:
    with pytest.raises(ExtractionFailed, match=re.escape(ENCRYPTED)):
        extract(_encrypted_copy("reader-secret", "owner-secret"), "locked.pdf")


def test_a_pdf_that_opens_without_a_password_is_read_whatever_its_permissions() -> None:
    # Any viewer opens it without asking; only its owner may change its permissions.
    data = _encrypted_copy("", "owner-secret")
    assert PdfReader(io.BytesIO(data)).is_encrypted
    text = " ".join(_text_of(data).split())
    assert "to the crazy ones. The misfits. The rebels." in text


def _text_of(data: bytes) -> str:
    return "\n".join(segment.text for segment in extract(data, "file.pdf").segments)


@pytest.mark.parametrize(
    "data",
    [
        b"%PDF-1.4 this is not really a pdf",
        (FIXTURES / "blk-paras-and-tables.docx").read_bytes(),
        (FIXTURES / "crazyones.pdf").read_bytes()[:400],
    ],
    ids=["garbage", "docx-named-pdf", "truncated"],
)
def test_damaged_or_non_pdf_input_fails_with_a_reason(data: bytes) -> None:
    with pytest.raises(ExtractionFailed, match="not a PDF"):
        extract(data, "upload.pdf")


def test_pdfs_read_from_many_threads_at_once_give_the_same_text() -> None:
    names = ["service-handbook.pdf", "GeoBase_NHNC1_Data_Model_UML_EN.pdf", "pdflatex-outline.pdf"]
    expected = {name: _text(name) for name in names}
    results: dict[tuple[str, int], str] = {}
    errors: list[BaseException] = []
    start = threading.Barrier(len(names) * 2)

    def read(name: str, copy: int) -> None:
        try:
            stream = open_extraction((FIXTURES / name).read_bytes(), name)
            start.wait()
            # As the extract stage does: each page pulled separately, threads interleaved.
            results[(name, copy)] = "\n".join(segment.text for segment in stream.segments)
        except BaseException as exc:
            errors.append(exc)

    threads = [
        threading.Thread(target=read, args=(name, copy)) for name in names for copy in range(2)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors
    assert results == {(name, copy): expected[name] for name in names for copy in range(2)}
