"""Optical character recognition for PDF pages without a text layer (rapidocr, offline)."""

from __future__ import annotations

import logging
import threading
from typing import Any

import numpy as np
import numpy.typing as npt

_engine: Any = None
_lock = threading.Lock()


def _load() -> Any:
    global _engine
    with _lock:
        if _engine is None:
            from rapidocr import RapidOCR

            # The engine logs every model file it opens.
            logging.getLogger("RapidOCR").setLevel(logging.WARNING)
            _engine = RapidOCR()
        return _engine


def recognise(images: list[npt.NDArray[np.uint8]]) -> str:
    """The text on page pictures (RGB pixel arrays), in reading order, one line per text line."""
    engine = _load()
    lines: list[str] = []
    for pixels in images:
        if pixels.shape[0] < 16 or pixels.shape[1] < 16:
            continue
        result = engine(pixels)
        lines.extend(str(text) for text in (getattr(result, "txts", None) or ()))
    return "\n".join(lines)
