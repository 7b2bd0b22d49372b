"""HTML: the page's main text in sections by heading; navigation, scripts and styles dropped.

Parsed by lxml's HTML parser (libxml2: linear time, and it stops nesting at a few hundred
levels, so a page of 100,000 nested elements costs nothing) and walked without recursion.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

import lxml.html
from lxml import etree

from schemas.domain import TextSegment
from workers.extract.stream import ExtractionStream, decode_text, stem

# Never content: code, styling, and the page furniture around the main text.
DROPPED = frozenset(
    {
        "script", "style", "noscript", "template", "svg", "canvas", "iframe", "object",
        "nav", "header", "footer", "aside", "form", "button", "select", "input", "menu",
        "dialog", "head",
    }
)  # fmt: skip
DROPPED_ROLES = frozenset({"navigation", "banner", "contentinfo", "complementary", "search"})
BLOCKS = frozenset(
    {
        "p", "div", "section", "article", "main", "li", "ul", "ol", "dl", "dt", "dd", "pre",
        "blockquote", "figure", "figcaption", "table", "thead", "tbody", "tfoot", "caption",
        "address", "details", "summary", "hr", "body", "html",
    }
)  # fmt: skip
HEADINGS = {f"h{level}": level for level in range(1, 7)}

_PARSER = lxml.html.HTMLParser(encoding="utf-8", remove_comments=True, remove_pis=True)


def extract_html(data: bytes, filename: str) -> ExtractionStream:
    """.html: the text of `<main>` (or `<article>`, or the body), section by section."""
    return html_stream(decode_text(data), stem(filename))


def html_stream(markup: str, fallback_title: str) -> ExtractionStream:
    """Extracts an HTML string (also used for the HTML body of an e-mail)."""
    try:
        page = lxml.html.document_fromstring(markup.encode("utf-8", "replace"), parser=_PARSER)
    except etree.ParserError:  # nothing but whitespace
        return ExtractionStream(fallback_title, iter(()))
    title_tag = page.find(".//title")
    title = words_of(title_tag) if title_tag is not None else ""
    root = page.find(".//main")
    if root is None:
        root = page.find(".//article")
    if root is None:
        root = page.find(".//body")
    walker = _Walker()
    walker.walk(root if root is not None else page)
    sections = walker.finish()
    if not title:
        title = next((s.heading_path[0] for s in sections if s.heading_path), fallback_title)
    return ExtractionStream(title, iter(sections))


def words_of(element: lxml.html.HtmlElement) -> str:
    """An element's text, its pieces stripped and joined by single spaces."""
    return " ".join(piece.strip() for piece in element.itertext() if piece.strip())


# What the walker meets in document order: an element, a piece of text, or a block boundary.
_BREAK = object()
_Item = object  # an element, a piece of text or _BREAK


def _content(element: lxml.html.HtmlElement) -> Iterator[_Item]:
    """An element's own text, then each child followed by the text after it."""
    if element.text:
        yield element.text
    for child in element:
        yield child
        if child.tail:
            yield child.tail


@dataclass
class _Walker:
    """Collects block text in document order, starting a section at every heading."""

    sections: list[TextSegment] = field(default_factory=list)
    path: list[tuple[int, str]] = field(default_factory=list)
    lines: list[str] = field(default_factory=list)
    inline: list[str] = field(default_factory=list)

    def walk(self, root: lxml.html.HtmlElement) -> None:
        # A stack instead of recursion: the items still to visit, the next one last.
        pending: list[_Item] = list(_content(root))[::-1]
        while pending:
            item = pending.pop()
            if item is _BREAK:
                self._break()
            elif isinstance(item, str):
                self.inline.append(item)
            elif isinstance(item, lxml.html.HtmlElement) and not _dropped(item):
                name = str(item.tag).lower()
                if name in HEADINGS:
                    self._heading(HEADINGS[name], words_of(item))
                elif name == "tr":
                    self._break()
                    cells = [words_of(cell) for cell in item.iter("td", "th")]
                    row = " | ".join(cell for cell in cells if cell)
                    if row:
                        self.lines.append(row)
                elif name == "br":
                    self._break()
                elif name in BLOCKS:
                    pending.extend([_BREAK, *_content(item), _BREAK][::-1])
                else:
                    pending.extend(list(_content(item))[::-1])

    def finish(self) -> list[TextSegment]:
        self._flush_section()
        return self.sections

    def _heading(self, level: int, text: str) -> None:
        self._flush_section()
        if text:
            self.path = [(lvl, name) for lvl, name in self.path if lvl < level] + [(level, text)]
            self.lines.append(text)

    def _break(self) -> None:
        text = " ".join("".join(self.inline).split())
        if text:
            self.lines.append(text)
        self.inline = []

    def _flush_section(self) -> None:
        self._break()
        if self.lines:
            self.sections.append(
                TextSegment(text="\n".join(self.lines), heading_path=[t for _, t in self.path])
            )
        self.lines = []


def _dropped(element: lxml.html.HtmlElement) -> bool:
    if not isinstance(element.tag, str) or element.tag.lower() in DROPPED:
        return True
    if str(element.get("role", "")).lower() in DROPPED_ROLES:
        return True
    if str(element.get("aria-hidden", "")).lower() == "true" or "hidden" in element.attrib:
        return True
    style = str(element.get("style", "")).replace(" ", "").lower()
    return "display:none" in style
