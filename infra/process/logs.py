"""Process-wide logging set-up."""

from __future__ import annotations

import logging


def configure_logging(level: str) -> None:
    """One line per record, with time, level and logger name."""
    logging.basicConfig(
        level=level.upper(),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        force=True,
    )
    # Client libraries are chatty at INFO.
    for name in ("aiokafka", "pymongo", "httpx", "sentence_transformers", "faststream"):
        logging.getLogger(name).setLevel(max(logging.WARNING, logging.getLogger().level))
