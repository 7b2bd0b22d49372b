"""File types Ragline can ingest, by extension, with the content type recorded for each."""

from __future__ import annotations

from pathlib import PurePosixPath

CONTENT_TYPES: dict[str, str] = {
    ".txt": "text/plain",
    ".md": "text/markdown",
    ".markdown": "text/markdown",
    ".csv": "text/csv",
    ".json": "application/json",
    ".html": "text/html",
    ".htm": "text/html",
    ".eml": "message/rfc822",
    ".pdf": "application/pdf",
    ".docx": "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
}

SUPPORTED_EXTENSIONS: tuple[str, ...] = tuple(CONTENT_TYPES)


def extension_for(content_type: str) -> str:
    """The extension Ragline reads a stored file of this content type as."""
    return next(ext for ext, known in CONTENT_TYPES.items() if known == content_type)


def extraction_name(filename: str, content_type: str) -> str:
    """A file name whose extension picks the right extractor for a stored document, and whose
    stem is still its name (`pstore.conf.5` -> `pstore.conf.5.md`): an extractor falls back to
    the stem for a title."""
    if extension_of(filename) in CONTENT_TYPES:
        return filename
    return f"{filename}{extension_for(content_type)}"


def extension_of(filename: str) -> str:
    """The lower-case extension of a filename, with its dot ('' if none)."""
    return PurePosixPath(filename).suffix.lower()


def is_supported(filename: str) -> bool:
    """Whether a file of this name can be ingested."""
    return extension_of(filename) in CONTENT_TYPES
