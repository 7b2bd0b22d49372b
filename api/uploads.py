"""Streams a multipart upload into storage without holding the body in memory.

The body is parsed as it arrives (python-multipart's streaming parser); the bytes of the file
part go straight to the storage sink, so an upload over the limit is refused as soon as it
crosses it, and an unsupported file name before any of its bytes are stored.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field

from python_multipart.exceptions import MultipartParseError
from python_multipart.multipart import MultipartParser, parse_options_header

from core.errors import DocumentTooLarge, InvalidRequest
from infra.mongo.blob_store import OriginalUpload, StoredUpload

# Form fields other than the file are small (a title, a flag).
MAX_FIELD_BYTES = 64 * 1024
# Room for boundaries and part headers on top of the file itself.
MULTIPART_OVERHEAD = 64 * 1024


@dataclass
class ReceivedUpload:
    """The stored file and the other form fields of an upload."""

    filename: str
    stored: StoredUpload
    fields: dict[str, str] = field(default_factory=dict)


@dataclass
class _Part:
    name: str = ""
    filename: str | None = None
    headers: dict[str, str] = field(default_factory=dict)
    value: bytearray = field(default_factory=bytearray)


class _Events:
    """Collects the parser's synchronous callbacks so they can be handled asynchronously."""

    def __init__(self) -> None:
        self.items: list[tuple[str, bytes]] = []
        self._field = bytearray()
        self._value = bytearray()

    def callbacks(self) -> dict[str, object]:
        def on_header_field(data: bytes, start: int, end: int) -> None:
            self._field += data[start:end]

        def on_header_value(data: bytes, start: int, end: int) -> None:
            self._value += data[start:end]

        def on_header_end() -> None:
            self.items.append(("header", bytes(self._field) + b"\x00" + bytes(self._value)))
            self._field.clear()
            self._value.clear()

        def on_part_data(data: bytes, start: int, end: int) -> None:
            self.items.append(("data", bytes(data[start:end])))

        return {
            "on_part_begin": lambda: self.items.append(("begin", b"")),
            "on_header_field": on_header_field,
            "on_header_value": on_header_value,
            "on_header_end": on_header_end,
            "on_headers_finished": lambda: self.items.append(("headers_done", b"")),
            "on_part_data": on_part_data,
            "on_part_end": lambda: self.items.append(("end", b"")),
        }


async def receive_upload(
    content_type: str | None,
    content_length: str | None,
    body: AsyncIterator[bytes],
    *,
    file_field: str,
    max_bytes: int,
    check_filename: Callable[[str], None],
    open_sink: Callable[[str], OriginalUpload],
    discard: Callable[[StoredUpload], Awaitable[None]],
) -> ReceivedUpload:
    """Parses the multipart body, streaming the `file_field` part into a storage sink."""
    mime, params = parse_options_header(content_type)
    boundary = params.get(b"boundary")
    if mime != b"multipart/form-data" or not boundary:
        raise InvalidRequest(f"expected a multipart/form-data body with a {file_field!r} field")
    declared = int(content_length) if content_length and content_length.isdigit() else 0
    if declared > max_bytes + MULTIPART_OVERHEAD:
        raise DocumentTooLarge(max_bytes)
    events = _Events()
    parser = MultipartParser(boundary, events.callbacks())  # type: ignore[arg-type]
    part = _Part()
    sink: OriginalUpload | None = None
    stored: StoredUpload | None = None
    filename = ""
    fields: dict[str, str] = {}
    try:
        async for chunk in body:
            try:
                parser.write(chunk)
            except MultipartParseError as exc:
                raise InvalidRequest(f"malformed multipart body: {exc}") from exc
            for kind, payload in events.items:
                if kind == "begin":
                    part = _Part()
                elif kind == "header":
                    name, _, value = payload.partition(b"\x00")
                    # Latin-1 keeps the bytes as they came: a UTF-8 file name is decoded
                    # from them below, once the header is split into its parameters.
                    part.headers[name.decode("latin-1").lower()] = value.decode("latin-1")
                elif kind == "headers_done":
                    _, disposition = parse_options_header(part.headers.get("content-disposition"))
                    part.name = disposition.get(b"name", b"").decode("utf-8", "replace")
                    raw_filename = disposition.get(b"filename")
                    part.filename = (
                        None if raw_filename is None else raw_filename.decode("utf-8", "replace")
                    )
                    if part.name == file_field:
                        if sink is not None or stored is not None:
                            raise InvalidRequest(f"only one {file_field!r} part is accepted")
                        filename = _safe_filename(part.filename or "")
                        check_filename(filename)
                        sink = open_sink(filename)
                elif kind == "data":
                    if part.name == file_field and sink is not None:
                        if sink.size_bytes + len(payload) > max_bytes:
                            raise DocumentTooLarge(max_bytes)
                        await sink.write(payload)
                    else:
                        part.value += payload
                        if len(part.value) > MAX_FIELD_BYTES:
                            raise InvalidRequest(f"form field {part.name!r} is too long")
                elif kind == "end":
                    if part.name == file_field and sink is not None:
                        stored = await sink.finish()
                        sink = None
                    elif part.name:
                        fields[part.name] = part.value.decode("utf-8", "replace")
            events.items.clear()
        try:
            parser.finalize()
        except MultipartParseError as exc:
            raise InvalidRequest(f"malformed multipart body: {exc}") from exc
        if sink is not None:
            raise InvalidRequest("the multipart body ended inside the file part")
    except BaseException:
        if sink is not None:
            await sink.abort()
        if stored is not None:
            await discard(stored)
        raise
    if stored is None:
        raise InvalidRequest(f"the multipart body has no {file_field!r} field")
    return ReceivedUpload(filename=filename, stored=stored, fields=fields)


def _safe_filename(raw: str) -> str:
    """The base name of a client-supplied file name, without path or control characters."""
    name = raw.replace("\\", "/").rsplit("/", 1)[-1]
    name = "".join(ch for ch in name if ch.isprintable()).strip()
    return name[:255]
