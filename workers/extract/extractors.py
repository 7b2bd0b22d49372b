"""Turns file bytes into text segments: picks the extractor for the format. Pure: no I/O.

Each format lives in its own module: `text_formats` (txt, md, csv, Q&A json), `pdf` (with
`ocr`), `office` (docx), `web` (html), `mail` (eml).
"""

from __future__ import annotations

from collections.abc import Iterator

from core.errors import ExtractionFailed, UnsupportedDocumentType
from schemas.domain import ExtractedDocument, TextSegment
from schemas.formats import SUPPORTED_EXTENSIONS, extension_of
from workers.extract.mail import extract_eml
from workers.extract.office import extract_docx
from workers.extract.pdf import OcrPolicy, extract_pdf
from workers.extract.stream import ExtractionStream, Extractor
from workers.extract.text_formats import (
    extract_csv,
    extract_markdown,
    extract_plain_text,
    extract_qa_json,
)
from workers.extract.web import extract_html

__all__ = ["ExtractionStream", "OcrPolicy", "extract", "open_extraction"]


def open_extraction(
    data: bytes, filename: str, ocr: OcrPolicy | None = None, depth: int = 0
) -> ExtractionStream:
    """Starts extracting a file; the segments raise `ExtractionFailed` if no text comes out."""
    policy = ocr or OcrPolicy()
    extension = extension_of(filename)
    if not data:
        raise ExtractionFailed("the file is empty")
    extractors: dict[str, Extractor] = {
        ".txt": extract_plain_text,
        ".md": extract_markdown,
        ".markdown": extract_markdown,
        ".csv": extract_csv,
        ".json": extract_qa_json,
        ".html": extract_html,
        ".htm": extract_html,
        ".docx": extract_docx,
        ".pdf": lambda d, f: extract_pdf(d, f, policy),
        ".eml": lambda d, f: extract_eml(
            d, f, lambda inner, name, level: open_extraction(inner, name, policy, level), depth
        ),
    }
    extractor = extractors.get(extension)
    if extractor is None:
        raise UnsupportedDocumentType(extension, SUPPORTED_EXTENSIONS)
    stream = extractor(data, filename)
    return ExtractionStream(stream.title, _require_text(stream.segments))


def _require_text(segments: Iterator[TextSegment]) -> Iterator[TextSegment]:
    found = False
    for segment in segments:
        found = found or bool(segment.text.strip())
        yield segment
    if not found:
        raise ExtractionFailed("no text could be extracted from the file")


def extract(data: bytes, filename: str, ocr: OcrPolicy | None = None) -> ExtractedDocument:
    """Extracts the whole text of a file at once (tests, benchmarks)."""
    stream = open_extraction(data, filename, ocr)
    return ExtractedDocument(title=stream.title, segments=list(stream.segments))
