"""E-mail (.eml): headers, body, and attachments through the same extractors, recursively."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from email import policy
from email.message import EmailMessage, Message
from email.parser import BytesParser

from core.errors import ExtractionFailed, PermanentError
from schemas.domain import TextSegment
from schemas.formats import is_supported
from workers.extract.stream import ExtractionLimits, ExtractionStream, stem
from workers.extract.web import html_stream

HEADERS = ("From", "To", "Cc", "Date", "Subject")
MAX_DEPTH = 3

OpenAttachment = Callable[[bytes, str, int], ExtractionStream]


def extract_eml(
    data: bytes,
    filename: str,
    open_attachment: OpenAttachment,
    limits: ExtractionLimits,
    depth: int = 0,
) -> ExtractionStream:
    """.eml: a header segment, the body (plain text, else HTML), then each attachment."""
    try:
        message = BytesParser(policy=policy.default).parsebytes(data)
    except (ValueError, TypeError, IndexError) as exc:
        raise ExtractionFailed(f"the e-mail cannot be parsed: {exc}") from exc
    if not isinstance(message, EmailMessage) or not any(message.get(h) for h in HEADERS):
        raise ExtractionFailed("the file is not an e-mail message (no From, To, Date or Subject)")
    attachments = sum(1 for _ in message.iter_attachments())
    if attachments > limits.max_attachments:
        raise ExtractionFailed(
            f"the e-mail has {attachments:,} attachments, over the limit of "
            f"{limits.max_attachments:,}; upload the attachments as files of their own"
        )
    subject = str(message.get("Subject", "")).strip()
    return ExtractionStream(
        subject or stem(filename), _segments(message, subject, open_attachment, depth)
    )


def _segments(
    message: EmailMessage, subject: str, open_attachment: OpenAttachment, depth: int
) -> Iterator[TextSegment]:
    where = [subject] if subject else []
    header = "\n".join(f"{name}: {message[name]}" for name in HEADERS if message.get(name))
    yield TextSegment(text=header, heading_path=where)
    body = message.get_body(preferencelist=("plain", "html"))
    if isinstance(body, EmailMessage):
        content = _text_of(body)
        if body.get_content_subtype() == "html":
            for section in html_stream(content, subject).segments:
                yield section.model_copy(update={"heading_path": where + section.heading_path})
        elif content.strip():
            yield TextSegment(text=content, heading_path=where)
    for attachment in message.iter_attachments():
        if not isinstance(attachment, EmailMessage):
            continue
        yield from _attachment(attachment, where, open_attachment, depth)


def _attachment(
    part: EmailMessage, where: list[str], open_attachment: OpenAttachment, depth: int
) -> Iterator[TextSegment]:
    name = part.get_filename() or ""
    if part.get_content_type() == "message/rfc822" and not name:
        name = "attached-message.eml"
    label = [*where, f"Attachment: {name or 'unnamed'}"]
    if not name or not is_supported(name) or depth >= MAX_DEPTH:
        return
    payload = part.get_payload(decode=True)
    if not isinstance(payload, bytes):
        inner = part.get_payload()
        first = inner[0] if isinstance(inner, list) and inner else None
        payload = first.as_bytes() if isinstance(first, Message) else b""
    if not payload:
        return
    try:
        stream = open_attachment(payload, name, depth + 1)
        for segment in stream.segments:
            yield segment.model_copy(update={"heading_path": label + segment.heading_path})
    except PermanentError as exc:
        # One unreadable attachment does not fail the whole message.
        yield TextSegment(text=f"Attachment {name} could not be read: {exc}", heading_path=label)


def _text_of(part: EmailMessage) -> str:
    try:
        content = part.get_content()
    except (LookupError, ValueError) as exc:
        raise ExtractionFailed(f"the e-mail body cannot be decoded: {exc}") from exc
    return content if isinstance(content, str) else ""
