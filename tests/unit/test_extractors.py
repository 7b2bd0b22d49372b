"""Extraction on real files (pypdf's and python-docx's own test documents)."""

from __future__ import annotations

import io
from pathlib import Path

import docx
import pytest

from core.errors import ExtractionFailed, UnsupportedDocumentType
from tests.conftest import FIXTURES
from workers.extract.extractors import extract


def _read(name: str) -> bytes:
    return (FIXTURES / name).read_bytes()


def _words(text: str) -> list[str]:
    return text.replace("ﬁ", "fi").replace("ﬀ", "ff").split()


def test_pdf_text_matches_the_known_text() -> None:
    document = extract(_read("crazyones.pdf"), "crazyones.pdf")
    text = "\n".join(s.text for s in document.segments)
    expected = _words((FIXTURES / "crazyones.txt").read_text())
    assert _words(text) == expected
    # Ligatures are folded so that words match queries.
    assert "misfits" in text


def test_multi_page_pdf_keeps_page_numbers() -> None:
    document = extract(_read("GeoBase_NHNC1_Data_Model_UML_EN.pdf"), "geobase.pdf")
    pages = [s.page or 0 for s in document.segments]
    assert pages == sorted(pages)
    assert len(pages) >= 15
    assert pages[0] == 1
    assert "National Hydro Network" in document.segments[0].text


@pytest.mark.parametrize("name", ["encrypted-file.pdf", "libreoffice-writer-password.pdf"])
def test_encrypted_pdf_fails_saying_so(name: str) -> None:
    with pytest.raises(ExtractionFailed, match="encrypted"):
        extract(_read(name), name)


def test_damaged_pdf_fails_with_a_reason() -> None:
    with pytest.raises(ExtractionFailed, match="PDF"):
        extract(b"%PDF-1.4 this is not really a pdf", "broken.pdf")


def test_docx_paragraphs_and_tables_in_reading_order() -> None:
    document = extract(_read("blk-paras-and-tables.docx"), "blocks.docx")
    text = document.segments[0].text
    lorem = text.index("Lorem ipsum")
    table = text.index("Text before")
    donec = text.index("Donec semper")
    assert lorem < table < donec


def test_docx_table_rows_keep_their_cells() -> None:
    built = docx.Document()
    built.add_paragraph("Pricing overview")
    table = built.add_table(rows=2, cols=3)
    for row, values in zip(
        table.rows, [("Plan", "Seats", "Price"), ("Team", "25", "400 EUR")], strict=True
    ):
        for cell, value in zip(row.cells, values, strict=True):
            cell.text = value
    built.add_paragraph("Prices exclude VAT.")
    buffer = io.BytesIO()
    built.save(buffer)
    text = extract(buffer.getvalue(), "pricing.docx").segments[0].text
    assert text.splitlines() == [
        "Pricing overview",
        "Plan | Seats | Price",
        "Team | 25 | 400 EUR",
        "Prices exclude VAT.",
    ]


def test_csv_rows_carry_their_header_names() -> None:
    data = b"name,role,office\nAda,engineer,London\nGrace,admiral,\n"
    text = extract(data, "people.csv").segments[0].text
    assert text.splitlines() == [
        "name: Ada; role: engineer; office: London",
        "name: Grace; role: admiral",
    ]


def test_text_and_markdown_are_read_as_utf8() -> None:
    assert extract("Grüße aus Köln".encode(), "note.txt").segments[0].text == "Grüße aus Köln"
    bom = "\ufeff# Title\nbody".encode()
    assert extract(bom, "readme.md").segments[0].text == "# Title\nbody"


@pytest.mark.parametrize(
    ("text", "encoding"),
    [
        ("Grüße aus Köln, Straße und Bäckerei.", "cp1252"),
        ("Привет мир, как дела? Это проверка кодировки текста.", "cp1251"),
        ("日本語のテキストです。東京都に住んでいます。", "shift_jis"),
        ("Hello from a UTF-16 file with a byte order mark.", "utf-16"),
    ],
)
def test_text_of_unknown_encoding_is_decoded(text: str, encoding: str) -> None:
    assert extract(text.encode(encoding), "note.txt").segments[0].text == text


def test_binary_data_named_as_text_fails_with_a_reason() -> None:
    with pytest.raises(ExtractionFailed, match="binary"):
        extract(bytes(range(256)) * 8, "photo.txt")
    with pytest.raises(ExtractionFailed, match="not look like text"):
        extract(bytes(range(1, 32)) * 50, "control.md")


def test_empty_file_fails() -> None:
    with pytest.raises(ExtractionFailed, match="empty"):
        extract(b"", "empty.txt")


def test_whitespace_only_file_fails() -> None:
    with pytest.raises(ExtractionFailed, match="no text"):
        extract(b"   \n\t ", "blank.md")


def test_unsupported_extension_lists_supported_types() -> None:
    with pytest.raises(UnsupportedDocumentType) as raised:
        extract(b"data", "archive.zip")
    assert ".pdf" in str(raised.value)
    assert ".docx" in str(raised.value)


def test_fixture_directory_has_the_documented_files() -> None:
    listed = (FIXTURES / "README.md").read_text()
    for path in Path(FIXTURES).iterdir():
        if path.is_file() and path.name != "README.md":
            assert path.name in listed
