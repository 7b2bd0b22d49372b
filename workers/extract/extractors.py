"""Turns file bytes into text segments: picks the extractor for the format. Pure: no I/O.

Each format lives in its own module: `text_formats` (txt, md, csv, Q&A json), `pdf` (with
`ocr`), `office` (docx), `web` (html), `mail` (eml). The bytes are first checked to be what
the extension says (`sniff`), and every limit of `ExtractionLimits` is enforced here or in
the format's module. In the extract worker this runs in a parser process of its own
(`sandbox`), which also bounds its memory and time.
"""

from __future__ import annotations

from collections.abc import Iterator

from core.errors import ExtractionFailed, UnsupportedDocumentType
from schemas.domain import ExtractedDocument, TextSegment
from schemas.formats import SUPPORTED_EXTENSIONS, extension_of
from workers.extract.mail import extract_eml
from workers.extract.office import extract_docx
from workers.extract.pdf import OcrPolicy, extract_pdf
from workers.extract.sniff import check_content
from workers.extract.stream import ExtractionLimits, ExtractionStream, Extractor
from workers.extract.text_formats import (
    extract_csv,
    extract_markdown,
    extract_plain_text,
    extract_qa_json,
)
from workers.extract.web import extract_html

__all__ = ["ExtractionLimits", "ExtractionStream", "OcrPolicy", "extract", "open_extraction"]


def open_extraction(
    data: bytes,
    filename: str,
    ocr: OcrPolicy | None = None,
    limits: ExtractionLimits | None = None,
    depth: int = 0,
) -> ExtractionStream:
    """Starts extracting a file; the segments raise `ExtractionFailed` if no text comes out,
    or more than the limits allow."""
    policy = ocr or OcrPolicy()
    bounds = limits or ExtractionLimits()
    extension = extension_of(filename)
    if extension not in SUPPORTED_EXTENSIONS:
        raise UnsupportedDocumentType(extension, SUPPORTED_EXTENSIONS)
    if not data:
        raise ExtractionFailed("the file is empty")
    check_content(data, extension)

    def attachment(inner: bytes, name: str, level: int) -> ExtractionStream:
        return open_extraction(inner, name, policy, bounds, level)

    extractors: dict[str, Extractor] = {
        ".txt": extract_plain_text,
        ".md": extract_markdown,
        ".markdown": extract_markdown,
        ".csv": extract_csv,
        ".json": extract_qa_json,
        ".html": extract_html,
        ".htm": extract_html,
        ".docx": lambda d, f: extract_docx(d, f, bounds),
        ".pdf": lambda d, f: extract_pdf(d, f, policy),
        ".eml": lambda d, f: extract_eml(d, f, attachment, bounds, depth),
    }
    stream = extractors[extension](data, filename)
    return ExtractionStream(stream.title, _checked(stream.segments, bounds.max_chars))


def _checked(segments: Iterator[TextSegment], max_chars: int) -> Iterator[TextSegment]:
    """The segments, failing when they hold no text or more than `max_chars` characters."""
    found = False
    total = 0
    for segment in segments:
        total += len(segment.text)
        if total > max_chars:
            raise ExtractionFailed(
                f"the document's text is longer than {max_chars:,} characters "
                f"(about {max_chars // 2_000:,} pages); split it into smaller files"
            )
        found = found or bool(segment.text.strip())
        yield segment
    if not found:
        raise ExtractionFailed("no text could be extracted from the file")


def extract(
    data: bytes, filename: str, ocr: OcrPolicy | None = None, limits: ExtractionLimits | None = None
) -> ExtractedDocument:
    """Extracts the whole text of a file at once (tests, benchmarks)."""
    stream = open_extraction(data, filename, ocr, limits)
    return ExtractedDocument(title=stream.title, segments=list(stream.segments))
