"""HTML: the page's main text in sections by heading; navigation, scripts and styles dropped."""

from __future__ import annotations

from dataclasses import dataclass, field

from bs4 import BeautifulSoup
from bs4.element import Comment, Doctype, NavigableString, ProcessingInstruction, Tag

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


def extract_html(data: bytes, filename: str) -> ExtractionStream:
    """.html: the text of `<main>` (or `<article>`, or the body), section by section."""
    return html_stream(decode_text(data), stem(filename))


def html_stream(markup: str, fallback_title: str) -> ExtractionStream:
    """Extracts an HTML string (also used for the HTML body of an e-mail)."""
    soup = BeautifulSoup(markup, "lxml")
    title_tag = soup.find("title")
    title = title_tag.get_text(" ", strip=True) if isinstance(title_tag, Tag) else ""
    root = soup.find("main") or soup.find("article") or soup.body or soup
    walker = _Walker()
    walker.walk(root)
    sections = walker.finish()
    if not title:
        title = next((s.heading_path[0] for s in sections if s.heading_path), fallback_title)
    return ExtractionStream(title, iter(sections))


@dataclass
class _Walker:
    """Collects block text in document order, starting a section at every heading."""

    sections: list[TextSegment] = field(default_factory=list)
    path: list[tuple[int, str]] = field(default_factory=list)
    lines: list[str] = field(default_factory=list)
    inline: list[str] = field(default_factory=list)

    def walk(self, node: Tag | BeautifulSoup) -> None:
        for child in node.children:
            if isinstance(child, (Comment, Doctype, ProcessingInstruction)):
                continue
            if isinstance(child, NavigableString):
                self.inline.append(str(child))
                continue
            if not isinstance(child, Tag) or _dropped(child):
                continue
            name = child.name.lower()
            if name in HEADINGS:
                self._heading(HEADINGS[name], child.get_text(" ", strip=True))
            elif name == "tr":
                self._break()
                cells = [c.get_text(" ", strip=True) for c in child.find_all(["td", "th"])]
                row = " | ".join(cell for cell in cells if cell)
                if row:
                    self.lines.append(row)
            elif name == "br":
                self._break()
            elif name in BLOCKS:
                self._break()
                self.walk(child)
                self._break()
            else:
                self.walk(child)

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


def _dropped(tag: Tag) -> bool:
    if tag.name.lower() in DROPPED:
        return True
    if str(tag.get("role", "")).lower() in DROPPED_ROLES:
        return True
    if str(tag.get("aria-hidden", "")).lower() == "true" or tag.has_attr("hidden"):
        return True
    style = str(tag.get("style", "")).replace(" ", "").lower()
    return "display:none" in style
