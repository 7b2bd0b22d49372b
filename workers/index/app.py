"""Index worker: wiring only (the stage is `ragline.stages.index`).

Runs as its own process only with a Qdrant server. With the embedded engine the API process
owns the vector store and runs this stage itself (see `ragline.api`).
"""

from __future__ import annotations

from faststream import FastStream

from core.errors import PermanentError
from infra.settings import Settings
from ragline.stages.hosting import stage_app
from ragline.stages.index import build_index_stage


def create_app(settings: Settings) -> FastStream:
    """The index worker process (Qdrant server deployments)."""
    if settings.embedded_vector_store:
        raise PermanentError(
            "the index worker needs RAGLINE_QDRANT__URL; with the embedded vector store the "
            "API process runs the index stage"
        )
    return stage_app(settings, "index", build_index_stage)
