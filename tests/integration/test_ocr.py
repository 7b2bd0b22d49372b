"""Scanned PDFs (pages that are only an image) are read with OCR, offline."""

from __future__ import annotations

import pytest

from core.errors import ExtractionFailed
from tests.factories import scanned_pdf
from workers.extract.extractors import extract
from workers.extract.pdf import OcrPolicy


def test_a_scanned_page_is_read_with_ocr() -> None:
    data = scanned_pdf(
        ["Scanned warranty card 4471", "Water damage is covered", "for twenty four months."]
    )
    document = extract(data, "scan.pdf")
    text = " ".join(segment.text for segment in document.segments)
    assert document.segments[0].page == 1
    for words in ("warranty card 4471", "Water damage is covered", "twenty four months"):
        assert words in text


def test_without_ocr_a_scan_fails_as_having_no_text_layer() -> None:
    data = scanned_pdf(["Some text"])
    with pytest.raises(ExtractionFailed, match="no text layer"):
        extract(data, "scan.pdf", OcrPolicy(enabled=False))


def test_a_blank_scan_fails_saying_ocr_found_nothing() -> None:
    with pytest.raises(ExtractionFailed, match="OCR found no text"):
        extract(scanned_pdf([]), "blank.pdf")
