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
# UTF-16 without a byte-order mark: in text of Latin script every other byte is NUL. A sample
# whose odd (or even) bytes are this often NUL, and whose other bytes almost never are, is
# read as UTF-16 little- (or big-) endian.
_UTF16_NUL_SHARE = 0.3
_UTF16_OTHER_NUL_SHARE = 0.02
# UTF-8 with a few damaged bytes (a file cut or mangled in transit) is still UTF-8: it is read
# with U+FFFD for each broken sequence when its valid non-ASCII characters outnumber the
# broken sequences this many times. Legacy 8-bit text (cp1252 and the like) has no valid
# multi-byte sequence at all and goes to detection instead.
_UTF8_GOOD_PER_BROKEN = 10
MB = 1024 * 1024


@dataclass(frozen=True)
class ExtractionLimits:
    """How much a file may make a parser do: every limit fails the document with a reason."""

    # Text a document may hold (20 million characters: about 10,000 pages).
    max_chars: int = 20_000_000
    # Attachments an e-mail may carry.
    max_attachments: int = 100
    # What a packaged file (DOCX) may unpack to.
    max_unpacked_bytes: int = 256 * MB


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
        return _checked(_utf16_without_bom(data))
    try:
        return _checked(data.decode("utf-8"))
    except UnicodeDecodeError:
        pass
    damaged = _damaged_utf8(data)
    if damaged is not None:
        return _checked(damaged)
    best = from_bytes(data[:1_000_000]).best()
    if best is None or best.encoding is None:
        raise ExtractionFailed("the text encoding could not be recognised; save the file as UTF-8")
    try:
        return _checked(data.decode(best.encoding))
    except (UnicodeDecodeError, LookupError) as exc:
        raise ExtractionFailed(
            "the text encoding could not be recognised; save the file as UTF-8"
        ) from exc


def _utf16_without_bom(data: bytes) -> str:
    """Text with NUL bytes: UTF-16 without a byte-order mark, or not text at all."""
    sample = data[:8192]
    half = max(len(sample) // 2, 1)
    even, odd = sample[0::2].count(0) / half, sample[1::2].count(0) / half
    codec = None
    if odd >= _UTF16_NUL_SHARE and even <= _UTF16_OTHER_NUL_SHARE:
        codec = "utf-16-le"
    elif even >= _UTF16_NUL_SHARE and odd <= _UTF16_OTHER_NUL_SHARE:
        codec = "utf-16-be"
    if codec is not None and len(data) % 2 == 0:
        try:
            return data.decode(codec)
        except UnicodeDecodeError:
            pass
    raise ExtractionFailed("the file is binary, not text")


def _damaged_utf8(data: bytes) -> str | None:
    """UTF-8 text with a few broken sequences, each read as U+FFFD; None if it is not that."""
    sample = data[:MB].decode("utf-8", "replace")
    broken = sample.count("\ufffd")
    good = sum(1 for char in sample if char > "\x7f") - broken
    if good < broken * _UTF8_GOOD_PER_BROKEN:
        return None
    return data.decode("utf-8", "replace")


def _checked(text: str) -> str:
    sample = text[:100_000]
    controls = sum(1 for ch in sample if ord(ch) < 32 and ch not in "\t\n\r\f")
    if sample and controls / len(sample) > _MAX_CONTROL_SHARE:
        raise ExtractionFailed("the file does not look like text")
    return text
