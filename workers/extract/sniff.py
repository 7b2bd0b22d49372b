"""What a file really is, from its first bytes: a PNG named `.pdf` is refused as a PNG image,
with a reason a user can act on, instead of failing deep inside a parser. Pure: no I/O."""

from __future__ import annotations

from core.errors import ExtractionFailed

# Leading bytes of common files that are none of the formats read as text.
_SIGNATURES: tuple[tuple[bytes, str], ...] = (
    (b"\x89PNG\r\n\x1a\n", "a PNG image"),
    (b"\xff\xd8\xff", "a JPEG image"),
    (b"GIF87a", "a GIF image"),
    (b"GIF89a", "a GIF image"),
    (b"II*\x00", "a TIFF image"),
    (b"MM\x00*", "a TIFF image"),
    (b"%PDF-", "a PDF"),
    (b"PK\x03\x04", "a ZIP archive (or an Office file)"),
    (b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1", "an old-style or password-protected Office file"),
    (b"\x1f\x8b", "a gzip archive"),
    (b"7z\xbc\xaf\x27\x1c", "a 7-Zip archive"),
    (b"Rar!\x1a\x07", "a RAR archive"),
    (b"\x7fELF", "a program (ELF)"),
    (b"OggS", "an Ogg audio file"),
    (b"{\\rtf", "an RTF document"),
)
# A PDF reader finds the header within the first kilobyte.
_PDF_HEADER_WITHIN = 1024


def kind_of(data: bytes) -> str | None:
    """What the file is by its leading bytes, if it is a kind known here."""
    if data[4:8] == b"ftyp":
        return "a video or audio file (MP4)"
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "a WebP image"
    return next((kind for magic, kind in _SIGNATURES if data.startswith(magic)), None)


def check_content(data: bytes, extension: str) -> None:
    """Fails with a reason when the bytes are not what the extension says."""
    kind = kind_of(data)
    if extension == ".pdf":
        if b"%PDF-" not in data[:_PDF_HEADER_WITHIN]:
            found = f"is {kind}" if kind else "does not start as a PDF does (%PDF-)"
            raise ExtractionFailed(f"the file {found}, not a PDF; upload the PDF itself")
    elif extension == ".docx":
        if kind == "an old-style or password-protected Office file":
            raise ExtractionFailed(
                "the file is an old-style Word document (.doc) or a password-protected one; "
                "save it as .docx without a password"
            )
        if not data.startswith(b"PK\x03\x04"):
            found = f"is {kind}" if kind else "is not a ZIP package, as every DOCX is"
            raise ExtractionFailed(f"the file {found}, not a DOCX; upload the DOCX itself")
    elif kind is not None:
        raise ExtractionFailed(f"the file is {kind}, not text; upload it in a supported format")
