"""Plain text, Markdown (by heading), CSV (rows with their header names) and Q&A files."""

from __future__ import annotations

import csv
import io
import json
import re
from collections.abc import Iterator
from typing import Any

from core.errors import ExtractionFailed
from schemas.domain import TextSegment
from workers.extract.stream import ExtractionStream, decode_text, stem

CSV_ROWS_PER_SEGMENT = 500
QUESTION_KEYS = ("question", "q", "query", "prompt")
ANSWER_KEYS = ("answer", "a", "response", "reply")

_ATX = re.compile(r"^ {0,3}(#{1,6})(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*$")
_SETEXT = re.compile(r"^ {0,3}(=+|-+)[ \t]*$")
_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")


def extract_plain_text(data: bytes, filename: str) -> ExtractionStream:
    """.txt: the text as it is."""
    return ExtractionStream(stem(filename), iter([TextSegment(text=decode_text(data))]))


def extract_markdown(data: bytes, filename: str) -> ExtractionStream:
    """.md: one segment per section, each knowing its heading path."""
    text = decode_text(data)
    sections = list(markdown_sections(text))
    title = next((s.heading_path[0] for s in sections if s.heading_path), stem(filename))
    return ExtractionStream(title, iter(sections))


def markdown_sections(text: str) -> Iterator[TextSegment]:
    """Splits Markdown at ATX (`#`) and setext (underlined) headings, outside code fences."""
    path: list[tuple[int, str]] = []
    lines: list[str] = []
    fence: str | None = None

    def section() -> TextSegment:
        return TextSegment(text="\n".join(lines), heading_path=[title for _, title in path])

    for line in text.splitlines():
        opening = _FENCE.match(line)
        if opening:
            marker = opening.group(1)[0]
            if fence is None:
                fence = marker
            elif marker == fence:
                fence = None
            lines.append(line)
            continue
        heading: tuple[int, str] | None = None
        if fence is None:
            atx = _ATX.match(line)
            setext = _SETEXT.match(line)
            if atx and (atx.group(2) or "").strip():
                heading = (len(atx.group(1)), atx.group(2).strip())
            elif setext and lines and lines[-1].strip():
                heading = (1 if setext.group(1)[0] == "=" else 2, lines.pop().strip())
                line = heading[1]
        if heading is None:
            lines.append(line)
            continue
        if any(existing.strip() for existing in lines):
            yield section()
        level, title = heading
        path = [(lvl, name) for lvl, name in path if lvl < level] + [(level, title)]
        lines = [line]
    if any(existing.strip() for existing in lines):
        yield section()


def extract_csv(data: bytes, filename: str) -> ExtractionStream:
    """.csv: one line per row, values labelled with their column headers.

    A CSV with question and answer columns is a Q&A file: one chunk per pair.
    """
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
        raise csv_failure(exc) from exc
    lowered = [name.lower() for name in header]
    question = next((lowered.index(k) for k in QUESTION_KEYS if k in lowered), None)
    answer = next((lowered.index(k) for k in ANSWER_KEYS if k in lowered), None)
    if question is not None and answer is not None:
        return ExtractionStream(stem(filename), _csv_pairs(reader, question, answer))
    return ExtractionStream(stem(filename), _csv_rows(reader, header))


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
        raise csv_failure(exc) from exc
    if lines:
        yield TextSegment(text="\n".join(lines))


def _csv_pairs(reader: Iterator[list[str]], question: int, answer: int) -> Iterator[TextSegment]:
    try:
        for row in reader:
            q = row[question].strip() if question < len(row) else ""
            a = row[answer].strip() if answer < len(row) else ""
            if q and a:
                yield qa_segment(q, a)
    except csv.Error as exc:
        raise csv_failure(exc) from exc


def csv_failure(exc: csv.Error) -> ExtractionFailed:
    """Why a CSV file cannot be read, for the user."""
    if "field larger than field limit" in str(exc):
        return ExtractionFailed(
            f"a CSV cell is longer than {csv.field_size_limit():,} characters; a CSV holds "
            "short values: upload long text as a .txt or .md file"
        )
    return ExtractionFailed(f"the CSV file cannot be parsed: {exc}")


def _column_name(header: list[str], index: int) -> str:
    if index < len(header) and header[index]:
        return header[index]
    return f"column {index + 1}"


def qa_segment(question: str, answer: str) -> TextSegment:
    """One question/answer pair, kept whole as one chunk."""
    return TextSegment(text=f"Question: {question}\nAnswer: {answer}", atomic=True)


def extract_qa_json(data: bytes, filename: str) -> ExtractionStream:
    """.json: question/answer pairs, as a list or under "items"/"questions"/"qa"/"faq"."""
    try:
        document: Any = json.loads(decode_text(data))
    except json.JSONDecodeError as exc:
        raise ExtractionFailed(
            f"the JSON file cannot be parsed: {exc.msg} (line {exc.lineno})"
        ) from exc
    items = document
    if isinstance(document, dict):
        items = next(
            (
                document[key]
                for key in ("items", "questions", "qa", "faq", "pairs")
                if key in document
            ),
            None,
        )
    if not isinstance(items, list):
        raise ExtractionFailed(
            "a JSON file must hold a list of question/answer pairs "
            '([{"question": ..., "answer": ...}])'
        )
    title = str(document.get("title", "")).strip() if isinstance(document, dict) else ""
    return ExtractionStream(title or stem(filename), _json_pairs(items))


def _json_pairs(items: list[Any]) -> Iterator[TextSegment]:
    for item in items:
        if not isinstance(item, dict):
            continue
        fields = {str(key).lower(): value for key, value in item.items()}
        question = next((fields[k] for k in QUESTION_KEYS if k in fields), None)
        answer = next((fields[k] for k in ANSWER_KEYS if k in fields), None)
        if (
            isinstance(question, str)
            and isinstance(answer, str)
            and question.strip()
            and answer.strip()
        ):
            yield qa_segment(question.strip(), answer.strip())
