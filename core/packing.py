"""Sets of small unsigned integers packed into short strings, as chunk payloads store them (a
copy signature's hashes, a chunk's terms): base64 of the sorted values, little-endian, 2 or 4
bytes each. Pure: no I/O."""

from __future__ import annotations

import base64
import binascii
import struct
from collections.abc import Iterable

_FORMATS = {2: "H", 4: "I"}


def pack(values: Iterable[int], width: int) -> str:
    """The values, sorted, packed (`width`: 2 or 4 bytes each)."""
    ordered = sorted(values)
    return base64.b64encode(struct.pack(f"<{len(ordered)}{_FORMATS[width]}", *ordered)).decode()


def unpack(packed: str, width: int) -> tuple[int, ...]:
    """The values of a packed string (`ValueError` for one that is not)."""
    try:
        raw = base64.b64decode(packed, validate=True)
    except binascii.Error as exc:
        raise ValueError(f"not packed integers: {packed[:40]!r}") from exc
    if len(raw) % width:
        raise ValueError(f"not packed integers: {len(raw)} bytes are no {width}-byte values")
    return struct.unpack(f"<{len(raw) // width}{_FORMATS[width]}", raw)
