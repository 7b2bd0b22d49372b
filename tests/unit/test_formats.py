"""HTML, e-mail, Q&A, heading-aware Markdown and DOCX, and chunk citations."""

from __future__ import annotations

import io
import json
from email.message import EmailMessage

import docx
import pytest

from core.errors import ExtractionFailed
from schemas.domain import ExtractedDocument
from tests.conftest import FIXTURES
from workers.chunk.chunking import chunk_document, normalize_whitespace
from workers.extract.extractors import extract

PAGE = b"""<!doctype html>
<html><head><title>Returns policy</title>
<style>.x { color: red }</style><script>trackVisitor("secret-script-text")</script></head>
<body>
  <header><nav><a href="/">Home</a> <a href="/shop">Shop all products</a></nav></header>
  <aside role="complementary">Sponsored: buy more socks</aside>
  <main>
    <h1>Returns</h1>
    <p>You can return any item within <b>30 days</b> of delivery.</p>
    <h2>Refunds</h2>
    <p>Refunds reach your card in 5 to 7 working days.</p>
    <table><tr><th>Region</th><th>Days</th></tr><tr><td>EU</td><td>14</td></tr></table>
    <div style="display: none">hidden tracking text</div>
    <h2>Exchanges</h2>
    <ul><li>Sizes can be exchanged once.</li><li>Colours too.</li></ul>
  </main>
  <footer>Copyright 2026 Example Shop</footer>
</body></html>"""


def test_html_keeps_the_main_text_in_sections() -> None:
    document = extract(PAGE, "returns.html")
    text = "\n".join(segment.text for segment in document.segments)
    assert document.title == "Returns policy"
    for kept in (
        "within 30 days of delivery",
        "Refunds reach your card",
        "EU | 14",
        "Colours too.",
    ):
        assert kept in text
    for dropped in (
        "Shop all products",
        "secret-script-text",
        "color: red",
        "socks",
        "Copyright",
        "hidden tracking",
    ):
        assert dropped not in text
    paths = [segment.heading_path for segment in document.segments]
    assert paths == [["Returns"], ["Returns", "Refunds"], ["Returns", "Exchanges"]]


def test_html_without_main_uses_the_body() -> None:
    page = b"<html><body><nav>menu</nav><p>Plain page text.</p></body></html>"
    document = extract(page, "plain.htm")
    assert [s.text for s in document.segments] == ["Plain page text."]
    assert document.title == "plain"


def _email(body: str, attachments: list[tuple[str, bytes, str]], html: str | None = None) -> bytes:
    message = EmailMessage()
    message["From"] = "Ada <ada@example.com>"
    message["To"] = "support@example.com"
    message["Subject"] = "Broken router after update"
    message["Date"] = "Fri, 20 Nov 2026 10:00:00 +0000"
    message.set_content(body)
    if html is not None:
        message.add_alternative(html, subtype="html")
    for name, data, mime in attachments:
        maintype, subtype = mime.split("/")
        message.add_attachment(data, maintype=maintype, subtype=subtype, filename=name)
    return message.as_bytes()


def test_email_headers_body_and_attachments() -> None:
    pdf = (FIXTURES / "crazyones.pdf").read_bytes()
    raw = _email(
        "The router reboots every ten minutes since firmware 2.4.",
        [
            ("log.txt", b"kernel: watchdog reset at 10:02", "text/plain"),
            ("poem.pdf", pdf, "application/pdf"),
            ("archive.zip", b"PK\x03\x04", "application/zip"),
        ],
    )
    document = extract(raw, "ticket.eml")
    assert document.title == "Broken router after update"
    header, body, *attached = document.segments
    assert "From: Ada <ada@example.com>" in header.text
    assert "Subject: Broken router after update" in header.text
    assert "reboots every ten minutes" in body.text
    texts = {tuple(s.heading_path): s.text for s in attached}
    assert texts[("Broken router after update", "Attachment: log.txt")] == (
        "kernel: watchdog reset at 10:02"
    )
    poem = texts[("Broken router after update", "Attachment: poem.pdf")]
    assert "crazy ones" in poem
    assert not any("archive.zip" in "/".join(path) for path in texts)


def test_email_with_only_an_html_body_and_a_nested_message() -> None:
    inner = _email("Inner message text about invoices.", [])
    outer = EmailMessage()
    outer["From"] = "ops@example.com"
    outer["Subject"] = "Fwd: invoices"
    outer.set_content("<p>See the <b>forwarded</b> message.</p>", subtype="html")
    outer.add_attachment(inner, maintype="application", subtype="octet-stream", filename="fwd.eml")
    document = extract(outer.as_bytes(), "fwd.eml")
    text = "\n".join(segment.text for segment in document.segments)
    assert "See the forwarded message." in text
    assert "<p>" not in text
    assert "Inner message text about invoices." in text


def test_a_file_that_is_not_an_email_fails() -> None:
    with pytest.raises(ExtractionFailed, match="not an e-mail"):
        extract(b"just some words\nand more words", "note.eml")


def test_qa_csv_makes_one_chunk_per_pair() -> None:
    data = (
        b"Question,Answer,Category\n"
        b"How do I reset my password?,Open Settings and choose Security.,account\n"
        b'Do you ship abroad?,"Yes, to 40 countries; see the shipping page.",orders\n'
        b"Empty answer?,,misc\n"
    )
    document = extract(data, "faq.csv")
    chunks, _ = chunk_document(document)
    assert [c.text for c in chunks] == [
        "Question: How do I reset my password?\nAnswer: Open Settings and choose Security.",
        "Question: Do you ship abroad?\nAnswer: Yes, to 40 countries; see the shipping page.",
    ]


def test_qa_json_makes_one_chunk_per_pair_even_when_long() -> None:
    long_answer = "Step. " * 400
    data = json.dumps(
        {"title": "Support FAQ", "items": [
            {"question": "Short one?", "answer": "Short answer."},
            {"Question": "Long one?", "Answer": long_answer},
            {"question": "No answer"},
        ]}
    ).encode()  # fmt: skip
    document = extract(data, "faq.json")
    chunks, _ = chunk_document(document)
    assert document.title == "Support FAQ"
    assert len(chunks) == 2
    assert chunks[1].text.startswith("Question: Long one?")
    assert len(chunks[1].text) > 1200


@pytest.mark.parametrize(
    ("data", "reason"),
    [(b"{not json", "cannot be parsed"), (b'{"rows": 3}', "question/answer")],
)
def test_json_that_is_not_qa_fails_with_a_reason(data: bytes, reason: str) -> None:
    with pytest.raises(ExtractionFailed, match=reason):
        extract(data, "data.json")


def test_qa_pairs_and_text_mix_and_keep_offsets() -> None:
    document = ExtractedDocument.model_validate(
        {"title": "t", "segments": [
            {"text": "intro " * 300},
            {"text": "Question: Q?\nAnswer: A.", "atomic": True},
            {"text": "outro " * 300},
        ]}
    )  # fmt: skip
    chunks, length = chunk_document(document)
    pair = next(c for c in chunks if c.text.startswith("Question"))
    assert pair.text == "Question: Q?\nAnswer: A."
    assert all(c.end <= length for c in chunks)
    assert chunks[-1].text.startswith("outro") or "outro" in chunks[-1].text


MARKDOWN = """# Handbook

Welcome text.

## Leave
Annual leave is 25 days.

### Sick leave
Tell your manager on the first day.

```python
# not a heading inside code
print("hi")
```

Parental
--------
Sixteen weeks of paid leave.
"""


def test_markdown_chunks_know_their_heading_path() -> None:
    document = extract(MARKDOWN.encode(), "handbook.md")
    assert document.title == "Handbook"
    paths = [s.heading_path for s in document.segments]
    assert paths == [
        ["Handbook"],
        ["Handbook", "Leave"],
        ["Handbook", "Leave", "Sick leave"],
        ["Handbook", "Parental"],
    ]
    sick = document.segments[2].text
    assert "# not a heading inside code" in sick
    chunks, _ = chunk_document(document, chunk_size=60, overlap=10)
    # Each chunk carries the heading path of the section its first character is in.
    starts, offset = [], 0
    for segment in document.segments:
        starts.append(offset)
        offset += len(normalize_whitespace(segment.text)) + 2
    for chunk in chunks:
        owner = max(i for i, start in enumerate(starts) if start <= chunk.start)
        assert chunk.heading_path == document.segments[owner].heading_path
    assert {tuple(c.heading_path) for c in chunks} >= {("Handbook", "Leave", "Sick leave")}


def test_docx_sections_follow_heading_styles() -> None:
    built = docx.Document()
    built.add_heading("Employee guide", level=0)
    built.add_paragraph("Read this first.")
    built.add_heading("Travel", level=1)
    built.add_paragraph("Book trains over flights under 600 km.")
    built.add_heading("Expenses", level=2)
    table = built.add_table(rows=1, cols=2)
    table.rows[0].cells[0].text = "Meals"
    table.rows[0].cells[1].text = "40 EUR a day"
    buffer = io.BytesIO()
    built.save(buffer)
    document = extract(buffer.getvalue(), "guide.docx")
    assert [s.heading_path for s in document.segments] == [
        ["Employee guide"],
        ["Employee guide", "Travel"],
        ["Employee guide", "Travel", "Expenses"],
    ]
    assert document.segments[2].text.splitlines() == ["Expenses", "Meals | 40 EUR a day"]


def test_pdf_chunks_cite_page_and_offsets() -> None:
    data = (FIXTURES / "GeoBase_NHNC1_Data_Model_UML_EN.pdf").read_bytes()
    document = extract(data, "nhn.pdf")
    chunks, length = chunk_document(document)
    assert chunks[0].page == 1
    assert chunks[-1].page is not None
    assert chunks[-1].page > 10
    for chunk in chunks:
        assert 0 <= chunk.start < chunk.end <= length
