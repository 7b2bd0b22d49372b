"""DOCX: paragraphs and tables in reading order, in sections by heading (python-docx)."""

from __future__ import annotations

import io
import re
import zipfile
from collections.abc import Iterator
from typing import Any

from core.errors import ExtractionFailed
from schemas.domain import TextSegment
from workers.extract.stream import ExtractionStream, stem

_HEADING_STYLE = re.compile(r"^heading (\d)$", re.IGNORECASE)


def extract_docx(data: bytes, filename: str) -> ExtractionStream:
    """.docx: table rows as ' | '-joined cells; a new section at each heading."""
    import docx

    try:
        document = docx.Document(io.BytesIO(data))
    except (zipfile.BadZipFile, KeyError, ValueError) as exc:
        raise ExtractionFailed(f"the DOCX file is damaged or not a DOCX: {exc}") from exc
    title = (document.core_properties.title or "").strip() or stem(filename)
    return ExtractionStream(title, _sections(document))


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
