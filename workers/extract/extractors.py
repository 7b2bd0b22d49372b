"""Turns file bytes into text segments, one extractor per format. Pure: no I/O."""

from __future__ import annotations

import csv
import io
import logging
import unicodedata
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Any

from infra.errors import ExtractionFailed, UnsupportedDocumentType
from schemas.domain import ExtractedDocument, TextSegment
from schemas.formats import SUPPORTED_EXTENSIONS, extension_of

log = logging.getLogger(__name__)

Extractor = Callable[[bytes, str], "ExtractionStream"]
CSV_ROWS_PER_SEGMENT = 500


@dataclass
class ExtractionStream:
    """A document's title and its text segments, produced lazily (page by page for a PDF)."""

    title: str
    segments: Iterator[TextSegment]


def open_extraction(data: bytes, filename: str) -> ExtractionStream:
    """Starts extracting a file; the segments raise `ExtractionFailed` if no text comes out."""
    extension = extension_of(filename)
    extractor = EXTRACTORS.get(extension)
    if extractor is None:
        raise UnsupportedDocumentType(extension, SUPPORTED_EXTENSIONS)
    if not data:
        raise ExtractionFailed("the file is empty")
    stream = extractor(data, filename)
    return ExtractionStream(stream.title, _require_text(stream.segments))


def _require_text(segments: Iterator[TextSegment]) -> Iterator[TextSegment]:
    found = False
    for segment in segments:
        found = found or bool(segment.text.strip())
        yield segment
    if not found:
        raise ExtractionFailed("no text could be extracted from the file")


def extract(data: bytes, filename: str) -> ExtractedDocument:
    """Extracts the whole text of a file at once (tests, benchmarks)."""
    stream = open_extraction(data, filename)
    return ExtractedDocument(title=stream.title, segments=list(stream.segments))


def _stem(filename: str) -> str:
    return PurePosixPath(filename).stem or filename


def decode_text(data: bytes) -> str:
    """Decodes text bytes: UTF-8 (with or without BOM), else a clear failure."""
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ExtractionFailed(
            f"the file is not valid UTF-8 text (invalid byte at position {exc.start})"
        ) from exc


def extract_plain_text(data: bytes, filename: str) -> ExtractionStream:
    """.txt and .md: the text as it is."""
    return ExtractionStream(_stem(filename), iter([TextSegment(text=decode_text(data))]))


def extract_csv(data: bytes, filename: str) -> ExtractionStream:
    """.csv: one line per row, each value labelled with its column header."""
    text = decode_text(data)
    try:
        dialect: type[csv.Dialect] | csv.Dialect = csv.Sniffer().sniff(text[:4096], ",;\t|")
    except csv.Error:
        dialect = csv.excel
    reader = csv.reader(io.StringIO(text), dialect)
    try:
        header = [name.strip() for name in next(reader)]
    except StopIteration:
        raise ExtractionFailed("the CSV file has no rows") from None
    except csv.Error as exc:
        raise ExtractionFailed(f"the CSV file cannot be parsed: {exc}") from exc
    return ExtractionStream(_stem(filename), _csv_rows(reader, header))


def _csv_rows(reader: Iterator[list[str]], header: list[str]) -> Iterator[TextSegment]:
    lines: list[str] = []
    try:
        for row in reader:
            cells = [
                f"{_column_name(header, i)}: {value.strip()}"
                for i, value in enumerate(row)
                if value.strip()
            ]
            if cells:
                lines.append("; ".join(cells))
            if len(lines) >= CSV_ROWS_PER_SEGMENT:
                yield TextSegment(text="\n".join(lines))
                lines = []
    except csv.Error as exc:
        raise ExtractionFailed(f"the CSV file cannot be parsed: {exc}") from exc
    if lines:
        yield TextSegment(text="\n".join(lines))


def _column_name(header: list[str], index: int) -> str:
    if index < len(header) and header[index]:
        return header[index]
    return f"column {index + 1}"


def extract_pdf(data: bytes, filename: str) -> ExtractionStream:
    """.pdf: text of each page with its page number (pypdf), page by page."""
    from pypdf import PdfReader
    from pypdf.errors import PdfReadError

    try:
        reader = PdfReader(io.BytesIO(data))
        encrypted = reader.is_encrypted
    except (PdfReadError, ValueError, OSError, KeyError, TypeError) as exc:
        raise ExtractionFailed(f"the PDF file is damaged or not a PDF: {exc}") from exc
    if encrypted:
        raise ExtractionFailed("the PDF is encrypted; upload a copy without a password")
    title = _stem(filename)
    try:
        metadata_title = reader.metadata.title if reader.metadata else None
    except (PdfReadError, ValueError, KeyError, TypeError):
        metadata_title = None
    if isinstance(metadata_title, str) and metadata_title.strip():
        title = metadata_title.strip()
    return ExtractionStream(title, _pdf_pages(reader))


def _pdf_pages(reader: Any) -> Iterator[TextSegment]:
    from pypdf.errors import PdfReadError

    found = False
    try:
        for number, page in enumerate(reader.pages, start=1):
            # NFKC folds the ligatures PDFs are full of ("ﬁ" -> "fi"), so words match queries.
            text = unicodedata.normalize("NFKC", page.extract_text() or "")
            if text.strip():
                found = True
                yield TextSegment(text=text, page=number)
    except (PdfReadError, ValueError, KeyError, TypeError) as exc:
        raise ExtractionFailed(f"the PDF file is damaged: {exc}") from exc
    if not found:
        raise ExtractionFailed("the PDF has no text layer (scanned pages without OCR text)")


def extract_docx(data: bytes, filename: str) -> ExtractionStream:
    """.docx: paragraphs and tables in reading order; table rows as ' | '-joined cells."""
    import zipfile

    import docx
    from docx.table import Table
    from docx.text.paragraph import Paragraph

    try:
        document = docx.Document(io.BytesIO(data))
    except (zipfile.BadZipFile, KeyError, ValueError) as exc:
        raise ExtractionFailed(f"the DOCX file is damaged or not a DOCX: {exc}") from exc
    blocks: list[str] = []
    for block in document.iter_inner_content():
        if isinstance(block, Paragraph):
            if block.text.strip():
                blocks.append(block.text)
        elif isinstance(block, Table):
            blocks.extend(_table_rows(block))
    title = (document.core_properties.title or "").strip() or _stem(filename)
    return ExtractionStream(title, iter([TextSegment(text="\n".join(blocks))]))


def _table_rows(table: Any) -> list[str]:
    rows = []
    for row in table.rows:
        cells: list[str] = []
        for cell in row.cells:
            text = " ".join(cell.text.split())
            # Merged cells repeat; keep one copy.
            if text and (not cells or cells[-1] != text):
                cells.append(text)
        if cells:
            rows.append(" | ".join(cells))
    return rows


EXTRACTORS: dict[str, Extractor] = {
    ".txt": extract_plain_text,
    ".md": extract_plain_text,
    ".csv": extract_csv,
    ".pdf": extract_pdf,
    ".docx": extract_docx,
}
