"""The file types the API ingests, by extension: the CLI leaves other files of a folder out.

The same list as the server's (`schemas.formats`); a test of the server's suite holds them equal.
"""

from __future__ import annotations

from pathlib import PurePosixPath

SUPPORTED_EXTENSIONS: tuple[str, ...] = (
    ".txt",
    ".md",
    ".markdown",
    ".csv",
    ".json",
    ".html",
    ".htm",
    ".eml",
    ".pdf",
    ".docx",
)


def is_supported(filename: str) -> bool:
    """Whether the API ingests a file of this name."""
    return PurePosixPath(filename).suffix.lower() in SUPPORTED_EXTENSIONS
