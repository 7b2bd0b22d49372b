"""PDF: the text of each page with its page number (PDFium), OCR for pages that are scans.

PDFium is native code that is not thread-safe, and the extract stage reads a document's pages
from worker threads (`asyncio.to_thread`), not always the same one. So every call into it in
this process holds one lock, and documents, pages and text pages are closed explicitly, under
that lock, instead of being left to garbage collection in whatever thread it happens to run.
"""

from __future__ import annotations

import logging
import re
import threading
import unicodedata
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import pypdfium2 as pdfium
import pypdfium2.raw as pdfium_c

from infra.errors import ExtractionFailed
from schemas.domain import TextSegment
from workers.extract import ocr
from workers.extract.stream import ExtractionStream, stem

log = logging.getLogger(__name__)

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
        raise ExtractionFailed(f"the PDF file is damaged or not a PDF: {_reason(exc)}") from exc


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
            raise ExtractionFailed(f"the PDF file is damaged: {_reason(exc)}") from exc
        try:
            textpage = page.get_textpage()
            try:
                text = textpage.get_text_bounded()
            finally:
                textpage.close()
            scan = _render(page) if render and not text.strip() and _has_images(page) else None
        except pdfium.PdfiumError as exc:
            raise ExtractionFailed(f"the PDF file is damaged: {_reason(exc)}") from exc
        finally:
            page.close()
    return clean_text(text), scan


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


def _reason(exc: pdfium.PdfiumError) -> str:
    return str(exc).rstrip(".")
