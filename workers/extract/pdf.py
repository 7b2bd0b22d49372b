"""PDF: the text of each page with its page number (PDFium), OCR for pages that are scans.

PDFium is native code that is not thread-safe, and the extract stage reads a document's pages
from worker threads (`asyncio.to_thread`), not always the same one. So every call into it in
this process holds one lock, and documents, pages and text pages are closed explicitly, under
that lock, instead of being left to garbage collection in whatever thread it happens to run.
"""

from __future__ import annotations

import ctypes
import re
import threading
import unicodedata
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import pypdfium2 as pdfium
import pypdfium2.raw as pdfium_c

from core.errors import ExtractionFailed
from schemas.domain import TextSegment
from workers.extract import ocr
from workers.extract.stream import ExtractionStream, stem

PDFIUM_LOCK = threading.Lock()
"""Held for every call into PDFium in this process."""

ENCRYPTED = "the PDF is encrypted; upload a copy without a password"
# Scans are rendered at 150 dpi, as scanners commonly save them, and at most this many
# pixels on the longer side, so that a poster-sized page does not take gigabytes.
_OCR_DPI = 150
_OCR_MAX_SIDE = 3000
# PDFium marks a hyphen it took for a line-end hyphenation with U+0002 and joins the lines.
_HYPHEN = re.compile(r"\x02(.?)", re.DOTALL)
_CONTROLS = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
# PDFium inserts a space where a text run ends and the next starts further on than it expects;
# some OCR layers draw each word's last letter as a run of its own, and come out as "Nort h
# Buon a Vist a". A page where a word is followed by a lone letter that often (over 10% of its
# words: 3 of the 5 pages of such an OCR layer, at 26-30%, and 2 of 1,387 pages of manuals,
# papers and forms, at 11-14%, which reading again leaves as they were but for one table cell
# that overflows into the next) is read again letter by letter, and a space PDFium inserted is
# kept only if the gap it stands for is wider than the spacing of the letters around it.
_LETTERS = re.compile(r"[^\W\d_]+")
_SPLIT_WORD = re.compile(r"\b[^\W\d_]{2,} (?![aAI]\b)[^\W\d_]\b")
_MIN_WORDS = 30
_MAX_SPLIT_SHARE = 0.1
_WORD_GAP = 1.5
_WORD_GAP_MIN_PT = 0.2


@dataclass(frozen=True)
class OcrPolicy:
    """Whether and how much to OCR pages without a text layer."""

    enabled: bool = True
    max_pages: int = 100


def extract_pdf(data: bytes, filename: str, policy: OcrPolicy) -> ExtractionStream:
    """.pdf: page by page; fails with "encrypted" or "no text layer" when that is the case."""
    with PDFIUM_LOCK:
        document = _open(data)
        try:
            metadata_title = document.get_metadata_value("Title").strip()
        finally:
            document.close()
    # The pages are read by a generator that opens the document again (cheap: PDFium reads
    # pages on demand) and closes it when it ends, fails or is closed; nothing stays open
    # if the pages are never read.
    return ExtractionStream(metadata_title or stem(filename), _pages(data, policy))


def _open(data: bytes) -> pdfium.PdfDocument:
    try:
        return pdfium.PdfDocument(data)
    except pdfium.PdfiumError as exc:
        # A PDF that needs a password to open; or one whose security handler PDFium does not
        # support (certificates, DRM plug-ins), which needs removing just the same. A PDF that
        # opens without a password and only restricts permissions (an owner password) is read,
        # as every viewer shows it.
        if exc.err_code in (pdfium_c.FPDF_ERR_PASSWORD, pdfium_c.FPDF_ERR_SECURITY):
            raise ExtractionFailed(ENCRYPTED) from exc
        raise _damaged(exc, "the PDF file is damaged or not a PDF") from exc


def _pages(data: bytes, policy: OcrPolicy) -> Iterator[TextSegment]:
    """One page at a time, so that memory does not grow with the number of pages."""
    found = False
    scanned = 0
    with PDFIUM_LOCK:
        document = _open(data)
        count = len(document)
    try:
        for number in range(1, count + 1):
            text, scan = _read_page(document, number - 1, policy.enabled)
            if not text.strip() and scan is not None and scanned < policy.max_pages:
                scanned += 1
                # OCR runs without the lock: it is long, and does not touch PDFium.
                text = ocr.recognise([scan])
            if text.strip():
                found = True
                yield TextSegment(text=text, page=number)
    finally:
        with PDFIUM_LOCK:
            document.close()
    if not found:
        if scanned:
            raise ExtractionFailed("the PDF has no text layer and OCR found no text on its pages")
        raise ExtractionFailed("the PDF has no text layer (scanned pages without OCR text)")


def _read_page(
    document: pdfium.PdfDocument, index: int, render: bool
) -> tuple[str, npt.NDArray[np.uint8] | None]:
    """A page's text, and its picture when it has no text but images (a scan)."""
    with PDFIUM_LOCK:
        try:
            page = document[index]
        except pdfium.PdfiumError as exc:
            raise _damaged(exc, "the PDF file is damaged") from exc
        try:
            textpage = page.get_textpage()
            try:
                text = textpage.get_text_bounded()
                if _looks_split(text):
                    text = _respaced(textpage)
            finally:
                textpage.close()
            scan = _render(page) if render and not text.strip() and _has_images(page) else None
        except pdfium.PdfiumError as exc:
            raise _damaged(exc, "the PDF file is damaged") from exc
        finally:
            page.close()
    return clean_text(text), scan


def _looks_split(text: str) -> bool:
    words = len(_LETTERS.findall(text))
    return words >= _MIN_WORDS and len(_SPLIT_WORD.findall(text)) / words > _MAX_SPLIT_SHARE


def _respaced(textpage: pdfium.PdfTextPage) -> str:
    """The page's text without the spaces PDFium put inside words, character by character."""
    count = textpage.count_chars()
    chars: list[str] = []
    generated: list[bool] = []
    boxes: list[tuple[float, float]] = []
    # Loose boxes span each character's advance, not its ink, so that the gaps between them
    # are the spacing the PDF set, whatever the shapes of the letters.
    box = pdfium_c.FS_RECTF()
    for index in range(count):
        chars.append(chr(pdfium_c.FPDFText_GetUnicode(textpage, index)))
        generated.append(pdfium_c.FPDFText_IsGenerated(textpage, index) == 1)
        pdfium_c.FPDFText_GetLooseCharBox(textpage, index, ctypes.byref(box))
        boxes.append((box.left, box.right))

    def spacing(first: int) -> float | None:
        """The gap between two letters of one word, or None if that is not what they are."""
        if first < 0 or first + 1 >= count:
            return None
        pair = chars[first : first + 2]
        if any(char.isspace() for char in pair) or any(generated[first : first + 2]):
            return None
        return boxes[first + 1][0] - boxes[first][1]

    def word_spacing(first: int, step: int) -> list[float]:
        """The letter gaps of the word fragment that starts at `first`, going by `step`."""
        gaps = []
        index = first if step > 0 else first - 1
        while (gap := spacing(index)) is not None:
            gaps.append(gap)
            index += step
        return gaps

    letter_gaps = sorted(gap for index in range(count) if (gap := spacing(index)) is not None)
    typical = letter_gaps[len(letter_gaps) // 2] if letter_gaps else 0.0
    kept: list[str] = []
    for index, char in enumerate(chars):
        if (
            char == " "
            and generated[index]
            and 0 < index < count - 1
            and not (chars[index - 1].isspace() or chars[index + 1].isspace())
        ):
            gap = boxes[index + 1][0] - boxes[index - 1][1]
            around = word_spacing(index - 1, -1) + word_spacing(index + 1, 1)
            if gap <= max(around, default=typical) * _WORD_GAP + _WORD_GAP_MIN_PT:
                # No wider than the spacing of the letters around it: not a word break.
                continue
        kept.append(char)
    return "".join(kept)


def clean_text(text: str) -> str:
    """PDFium's page text as plain text: line breaks, hyphenation, ligatures normalised."""
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    # A word hyphenated at a line end is joined ("distri-bution"); the hyphen stays before
    # anything but a small letter (a number, the capital of a compound such as "US-ASCII").
    text = _HYPHEN.sub(lambda match: match[1] if match[1].islower() else "-" + match[1], text)
    text = _CONTROLS.sub("", text)
    # NFKC folds the ligatures PDFs are full of ("ﬁ" -> "fi"), so words match queries.
    return unicodedata.normalize("NFKC", text)


def _has_images(page: pdfium.PdfPage) -> bool:
    images = page.get_objects(filter=[pdfium_c.FPDF_PAGEOBJ_IMAGE], max_depth=3)
    return next(images, None) is not None


def _render(page: pdfium.PdfPage) -> npt.NDArray[np.uint8]:
    width, height = page.get_size()
    scale = min(_OCR_DPI / 72, _OCR_MAX_SIDE / max(width, height, 1.0))
    bitmap = page.render(scale=scale, rev_byteorder=True)
    try:
        # A copy: the bitmap's memory is freed when it is closed.
        return np.array(bitmap.to_numpy()[:, :, :3], dtype=np.uint8)
    finally:
        bitmap.close()


def _damaged(exc: pdfium.PdfiumError, what: str) -> ExtractionFailed:
    return ExtractionFailed(
        f"{what} ({str(exc).rstrip('.')}); if it opens in a PDF reader, save a new copy from "
        "there, else upload it again"
    )
