"""PDF: the text of each page with its page number (pypdf), OCR for pages that are scans."""

from __future__ import annotations

import io
import logging
import unicodedata
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from infra.errors import ExtractionFailed
from schemas.domain import TextSegment
from workers.extract import ocr
from workers.extract.stream import ExtractionStream, stem

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class OcrPolicy:
    """Whether and how much to OCR pages without a text layer."""

    enabled: bool = True
    max_pages: int = 100


def extract_pdf(data: bytes, filename: str, policy: OcrPolicy) -> ExtractionStream:
    """.pdf: page by page; fails with "encrypted" or "no text layer" when that is the case."""
    from pypdf import PdfReader
    from pypdf.errors import PdfReadError

    try:
        reader = PdfReader(io.BytesIO(data))
        encrypted = reader.is_encrypted
    except (PdfReadError, ValueError, OSError, KeyError, TypeError) as exc:
        raise ExtractionFailed(f"the PDF file is damaged or not a PDF: {exc}") from exc
    if encrypted:
        raise ExtractionFailed("the PDF is encrypted; upload a copy without a password")
    title = stem(filename)
    try:
        metadata_title = reader.metadata.title if reader.metadata else None
    except (PdfReadError, ValueError, KeyError, TypeError):
        metadata_title = None
    if isinstance(metadata_title, str) and metadata_title.strip():
        title = metadata_title.strip()
    return ExtractionStream(title, _pages(reader, policy))


def _pages(reader: Any, policy: OcrPolicy) -> Iterator[TextSegment]:
    from pypdf.errors import PdfReadError

    found = False
    scanned = 0
    try:
        for number, page in enumerate(reader.pages, start=1):
            # NFKC folds the ligatures PDFs are full of ("ﬁ" -> "fi"), so words match queries.
            text = unicodedata.normalize("NFKC", page.extract_text() or "")
            if not text.strip() and policy.enabled and scanned < policy.max_pages:
                images = _page_images(page)
                if images:
                    scanned += 1
                    text = ocr.recognise(images)
            if text.strip():
                found = True
                yield TextSegment(text=text, page=number)
    except (PdfReadError, ValueError, KeyError, TypeError, RecursionError) as exc:
        raise ExtractionFailed(f"the PDF file is damaged: {exc}") from exc
    if not found:
        if scanned:
            raise ExtractionFailed("the PDF has no text layer and OCR found no text on its pages")
        raise ExtractionFailed("the PDF has no text layer (scanned pages without OCR text)")


def _page_images(page: Any) -> list[Any]:
    images = []
    try:
        for image in page.images:
            images.append(image.image)
    except Exception as exc:
        log.info("cannot decode an image for OCR: %s", exc)
    return [image for image in images if image is not None]
