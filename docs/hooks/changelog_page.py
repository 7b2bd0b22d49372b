"""MkDocs hook: the Changelog page is the repository's `CHANGELOG.md`, so there is one file
to keep. `<!-- generated: changelog -->` on a page becomes its text, with its links to the
documentation (`docs/...`) made relative to the site."""

from __future__ import annotations

from pathlib import Path
from typing import Any

MARKER = "<!-- generated: changelog -->"
CHANGELOG = Path(__file__).resolve().parents[2] / "CHANGELOG.md"


def changelog_markdown(text: str) -> str:
    """`CHANGELOG.md` as a page of the site at its top level: `](docs/x.md)` becomes `](x.md)`."""
    return text.replace("](docs/", "](")


def on_page_markdown(markdown: str, **_: Any) -> str:
    """Replaces the marker with the changelog."""
    if MARKER not in markdown:
        return markdown
    return markdown.replace(MARKER, changelog_markdown(CHANGELOG.read_text()))
