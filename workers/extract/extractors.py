"""Turns file bytes into text segments, one extractor per format. Pure: no I/O."""

from __future__ import annotations

import csv
import io
import logging
import unicodedata
from collections.abc import Callable
from pathlib import PurePosixPath

from infra.errors import ExtractionFailed, UnsupportedDocumentType
from schemas.domain import ExtractedDocument, TextSegment
from schemas.formats import SUPPORTED_EXTENSIONS, extension_of

log = logging.getLogger(__name__)

Extractor = Callable[[bytes, str], ExtractedDocument]


def extract(data: bytes, filename: str) -> ExtractedDocument:
    """Extracts the text of a file; raises `ExtractionFailed` with a reason a user can act on."""
    extension = extension_of(filename)
    extractor = EXTRACTORS.get(extension)
    if extractor is None:
        raise UnsupportedDocumentType(extension, SUPPORTED_EXTENSIONS)
    if not data:
        raise ExtractionFailed("the file is empty")
    document = extractor(data, filename)
    if not any(segment.text.strip() for segment in document.segments):
        raise ExtractionFailed("no text could be extracted from the file")
    return document


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


def extract_plain_text(data: bytes, filename: str) -> ExtractedDocument:
    """.txt and .md: the text as it is."""
    return ExtractedDocument(title=_stem(filename), segments=[TextSegment(text=decode_text(data))])


def extract_csv(data: bytes, filename: str) -> ExtractedDocument:
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
    lines = []
    try:
        for row in reader:
            cells = [
                f"{_column_name(header, i)}: {value.strip()}"
                for i, value in enumerate(row)
                if value.strip()
            ]
            if cells:
                lines.append("; ".join(cells))
    except csv.Error as exc:
        raise ExtractionFailed(f"the CSV file cannot be parsed: {exc}") from exc
    return ExtractedDocument(title=_stem(filename), segments=[TextSegment(text="\n".join(lines))])


def _column_name(header: list[str], index: int) -> str:
    if index < len(header) and header[index]:
        return header[index]
    return f"column {index + 1}"


def extract_pdf(data: bytes, filename: str) -> ExtractedDocument:
    """.pdf: text of each page with its page number (pypdf)."""
    from pypdf import PdfReader
    from pypdf.errors import PdfReadError

    try:
        reader = PdfReader(io.BytesIO(data))
    except (PdfReadError, ValueError, OSError) as exc:
        raise ExtractionFailed(f"the PDF file is damaged or not a PDF: {exc}") from exc
    if reader.is_encrypted:
        raise ExtractionFailed("the PDF is encrypted; upload a copy without a password")
    segments = []
    try:
        for number, page in enumerate(reader.pages, start=1):
            # NFKC folds the ligatures PDFs are full of ("ﬁ" -> "fi"), so words match queries.
            text = unicodedata.normalize("NFKC", page.extract_text() or "")
            if text.strip():
                segments.append(TextSegment(text=text, page=number))
    except (PdfReadError, ValueError, KeyError, TypeError) as exc:
        raise ExtractionFailed(f"the PDF file is damaged: {exc}") from exc
    if not segments:
        raise ExtractionFailed("the PDF has no text layer (scanned pages without OCR text)")
    title = _stem(filename)
    try:
        metadata_title = reader.metadata.title if reader.metadata else None
    except (PdfReadError, ValueError, KeyError, TypeError):
        metadata_title = None
    if isinstance(metadata_title, str) and metadata_title.strip():
        title = metadata_title.strip()
    return ExtractedDocument(title=title, segments=segments)


def extract_docx(data: bytes, filename: str) -> ExtractedDocument:
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
    return ExtractedDocument(title=title, segments=[TextSegment(text="\n".join(blocks))])


def _table_rows(table: object) -> list[str]:
    rows = []
    for row in table.rows:  # type: ignore[attr-defined]
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
