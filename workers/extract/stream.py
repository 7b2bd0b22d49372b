"""What every format extractor returns, and the text-decoding they share. Pure: no I/O."""

from __future__ import annotations

import codecs
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import PurePosixPath

from charset_normalizer import from_bytes

from core.errors import ExtractionFailed
from schemas.domain import TextSegment

_BOMS: tuple[tuple[bytes, str], ...] = (
    (codecs.BOM_UTF32_LE, "utf-32-le"),
    (codecs.BOM_UTF32_BE, "utf-32-be"),
    (codecs.BOM_UTF8, "utf-8"),
    (codecs.BOM_UTF16_LE, "utf-16-le"),
    (codecs.BOM_UTF16_BE, "utf-16-be"),
)
# Share of control characters above which decoded "text" is really binary data.
_MAX_CONTROL_SHARE = 0.01


@dataclass
class ExtractionStream:
    """A document's title and its text segments, produced lazily (page by page for a PDF)."""

    title: str
    segments: Iterator[TextSegment]


Extractor = Callable[[bytes, str], ExtractionStream]


def stem(filename: str) -> str:
    """A filename without its directory and extension, as a fallback title."""
    return PurePosixPath(filename).stem or filename


def decode_text(data: bytes) -> str:
    """Decodes text of any common encoding; fails with a reason if it is not text."""
    for bom, codec in _BOMS:
        if data.startswith(bom):
            try:
                return _checked(data[len(bom) :].decode(codec))
            except UnicodeDecodeError as exc:
                raise ExtractionFailed(f"the file starts as {codec} text but is not") from exc
    if b"\x00" in data[:8192]:
        raise ExtractionFailed("the file is binary, not text")
    try:
        return _checked(data.decode("utf-8"))
    except UnicodeDecodeError:
        pass
    best = from_bytes(data[:1_000_000]).best()
    if best is None or best.encoding is None:
        raise ExtractionFailed("the text encoding could not be recognised; save the file as UTF-8")
    try:
        return _checked(data.decode(best.encoding))
    except (UnicodeDecodeError, LookupError) as exc:
        raise ExtractionFailed(
            "the text encoding could not be recognised; save the file as UTF-8"
        ) from exc


def _checked(text: str) -> str:
    sample = text[:100_000]
    controls = sum(1 for ch in sample if ord(ch) < 32 and ch not in "\t\n\r\f")
    if sample and controls / len(sample) > _MAX_CONTROL_SHARE:
        raise ExtractionFailed("the file does not look like text")
    return text
