"""DOCX: paragraphs and tables in reading order, in sections by heading (python-docx).

Before python-docx reads a package, its zip directory is checked: what it unpacks to must stay
under `ExtractionLimits.max_unpacked_bytes` (a zip bomb is refused before anything is
inflated; zipfile never inflates an entry past its declared size), and no XML part may declare
a DTD (word processors never write one; entity definitions are how an XML bomb is built).
"""

from __future__ import annotations

import io
import re
import zipfile
from collections.abc import Iterator
from typing import Any

from lxml import etree

from core.errors import ExtractionFailed
from schemas.domain import TextSegment
from workers.extract.stream import MB, ExtractionLimits, ExtractionStream, stem

_HEADING_STYLE = re.compile(r"^heading (\d)$", re.IGNORECASE)
_DTD_MARKERS = (b"<!DOCTYPE", b"<!ENTITY")
_SCAN_PIECE = MB


def extract_docx(data: bytes, filename: str, limits: ExtractionLimits) -> ExtractionStream:
    """.docx: table rows as ' | '-joined cells; a new section at each heading."""
    import docx

    try:
        check_package(data, limits)
        document = docx.Document(io.BytesIO(data))
    except (zipfile.BadZipFile, KeyError, ValueError, etree.XMLSyntaxError) as exc:
        raise ExtractionFailed(f"the DOCX file is damaged or not a DOCX: {exc}") from exc
    title = (document.core_properties.title or "").strip() or stem(filename)
    return ExtractionStream(title, _sections(document))


def check_package(data: bytes, limits: ExtractionLimits) -> None:
    """Refuses a package that unpacks to too much, or whose XML declares a DTD."""
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        entries = archive.infolist()
        unpacked = sum(entry.file_size for entry in entries)
        if unpacked > limits.max_unpacked_bytes:
            raise ExtractionFailed(
                f"the DOCX unpacks to {unpacked / MB:,.0f} MB, over the limit of "
                f"{limits.max_unpacked_bytes / MB:,.0f} MB (it may be a zip bomb); "
                "save it again from your word processor, without embedded media if it is large"
            )
        for entry in entries:
            if entry.filename.endswith((".xml", ".rels")) and _declares_dtd(archive, entry):
                raise ExtractionFailed(
                    f"the DOCX part {entry.filename} declares XML entities (a DOCTYPE), "
                    "which word processors never write; it was refused as unsafe: save the "
                    "document again from your word processor"
                )


def _declares_dtd(archive: zipfile.ZipFile, entry: zipfile.ZipInfo) -> bool:
    """Whether the part contains a DTD, read piece by piece (an entry is never whole)."""
    overlap = max(len(marker) for marker in _DTD_MARKERS)
    tail = b""
    with archive.open(entry) as part:
        while piece := part.read(_SCAN_PIECE):
            window = tail + piece
            if any(marker in window for marker in _DTD_MARKERS):
                return True
            tail = window[-overlap:]
    return False


def _sections(document: Any) -> Iterator[TextSegment]:
    from docx.table import Table
    from docx.text.paragraph import Paragraph

    path: list[tuple[int, str]] = []
    blocks: list[str] = []

    def section() -> TextSegment:
        return TextSegment(text="\n".join(blocks), heading_path=[title for _, title in path])

    for block in document.iter_inner_content():
        if isinstance(block, Table):
            blocks.extend(_table_rows(block))
            continue
        if not isinstance(block, Paragraph) or not block.text.strip():
            continue
        level = _heading_level(block)
        if level is None:
            blocks.append(block.text)
            continue
        if blocks:
            yield section()
        path = [(lvl, name) for lvl, name in path if lvl < level] + [(level, block.text.strip())]
        blocks = [block.text]
    if blocks:
        yield section()


def _heading_level(paragraph: Any) -> int | None:
    name = paragraph.style.name if paragraph.style is not None else ""
    if name == "Title":
        return 0
    match = _HEADING_STYLE.match(name or "")
    return int(match.group(1)) if match else None


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
