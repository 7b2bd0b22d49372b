"""Builders of domain records for tests."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

from PIL import Image, ImageDraw, ImageFont
from pypdf import PdfReader, PdfWriter

from schemas.domain import Document, ParseStatus, file_source_key, new_document_id, utcnow


def make_document(tenant_id: str = "acme", kb_id: str = "kb_1", **overrides: Any) -> Document:
    """A queued document of `a.txt`, with any field overridden."""
    now = utcnow()
    values: dict[str, Any] = {
        "id": new_document_id(),
        "tenant_id": tenant_id,
        "kb_id": kb_id,
        "filename": "a.txt",
        "title": "a.txt",
        "content_type": "text/plain",
        "size_bytes": 3,
        "sha256": "0" * 64,
        "storage_key": "gridfs:originals/000000000000000000000000",
        "source_key": file_source_key("a.txt"),
        "parse_status": ParseStatus.QUEUED,
        "created_at": now,
        "updated_at": now,
    }
    values.update(overrides)
    return Document.model_validate(values)


FIXTURES = Path(__file__).parent / "fixtures"


def long_pdf(pages: int) -> bytes:
    """A real 19-page PDF's pages, repeated to `pages` pages."""
    source = PdfReader(FIXTURES / "GeoBase_NHNC1_Data_Model_UML_EN.pdf")
    writer = PdfWriter()
    while len(writer.pages) < pages:
        writer.add_page(source.pages[len(writer.pages) % len(source.pages)])
    buffer = io.BytesIO()
    writer.write(buffer)
    return buffer.getvalue()


def stock_csv(rows: int) -> bytes:
    """A stock list: `sku,qty`, `rows` rows."""
    lines = ["sku,qty"] + [f"{100000 + n},{n % 97}" for n in range(rows)]
    return ("\n".join(lines) + "\n").encode()


def scanned_pdf(lines: list[str]) -> bytes:
    """A one-page PDF that is only a picture of these lines of text (a scan)."""
    page = Image.new("RGB", (1240, 1754), "white")
    draw = ImageDraw.Draw(page)
    font = ImageFont.load_default(size=40)
    for number, line in enumerate(lines):
        draw.text((100, 150 + number * 90), line, fill="black", font=font)
    buffer = io.BytesIO()
    page.save(buffer, format="PDF", resolution=150)
    return buffer.getvalue()


# A small shop's help pages: the end-to-end tests of search, the playground and evaluations.
KAYAK_SHOP = {
    "returns.md": (
        "# Returns\n\nYou can return a kayak within thirty days of delivery. Refunds are paid "
        "to the original card within five working days."
    ),
    "shipping.md": (
        "# Shipping\n\nOrders ship from Rotterdam every Tuesday and Friday by courier. "
        "Parcels over 30 kg travel by freight."
    ),
    "warranty.md": (
        "# Warranty\n\nPaddles and hulls carry a two-year warranty against manufacturing "
        "defects. Keep the receipt as proof of purchase."
    ),
    "care.md": (
        "# Care\n\nRinse the kayak with fresh water after every trip in the sea and store it "
        "out of direct sunlight."
    ),
}
# Questions of the kayak shop asked in other words than its pages use (no term in common,
# stems and stop words aside): a keyword search finds nothing, any semantic ranking of the four
# short pages holds the page asked of among its ten hits. With the page, and a passage of it.
KAYAK_QUESTIONS_IN_OTHER_WORDS = [
    ("How many weeks may pass before I can no longer send a boat back?", "returns.md"),
    ("When do I get my money back?", "returns.md"),
    ("Which weekdays does the post leave the warehouse?", "shipping.md"),
    ("How are very heavy boxes transported?", "shipping.md"),
    ("Is a broken oar covered by a guarantee?", "warranty.md"),
    ("What paperwork should I hold on to in case something breaks?", "warranty.md"),
    ("Should I wash salt off my boat?", "care.md"),
    ("Where should the boat stay between outings?", "care.md"),
]
KAYAK_PASSAGES = {
    "returns.md": "within thirty days",
    "shipping.md": "every Tuesday and Friday",
    "warranty.md": "two-year warranty",
    "care.md": "fresh water",
}
