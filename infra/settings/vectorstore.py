"""Vector store settings: the embedded engine or a Qdrant server, and what stays in RAM."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field, SecretStr


class QdrantSettings(BaseModel):
    """Vector store: a Qdrant server when `url` is set, else the embedded engine at `path`."""

    url: str | None = Field(
        default=None,
        description="URL of a Qdrant server; unset means the embedded engine.",
    )
    api_key: SecretStr | None = Field(default=None, description="API key of the Qdrant server.")
    path: Path | None = Field(
        default=None,
        description="Directory of the embedded engine; unset means `vectors` under `run_dir`.",
    )
    store_socket: Path | None = Field(
        default=None,
        description=(
            "Unix socket of a process serving the embedded engine (`python -m ragline.store`), "
            "which every other process reaches it through; unset means the process that opens "
            "it holds it."
        ),
    )
    collection: str = Field(
        default="ragline_chunks", description="Name of the collection holding the chunks."
    )
    timeout_s: float = Field(
        default=10.0, gt=0, description="Timeout of a request to the Qdrant server (s)."
    )
    optimize_idle_s: float = Field(
        default=5.0,
        gt=0,
        description=(
            "Idle time after which the embedded engine builds its HNSW index and drops "
            "deleted points (s)."
        ),
    )
    optimize_every_s: float = Field(
        default=120.0,
        gt=0,
        description=(
            "Longest time between two optimisations of the embedded engine under writes that "
            "never pause (s)."
        ),
    )
    # A permission filter that leaves a tenth of the chunks readable loses recall at the
    # engine's default (0.995 recall@10 at 100,000 chunks); 256 restores 1.000 at no
    # measurable latency (benchmarks/search.py --user-form).
    search_ef: int = Field(
        default=256,
        ge=16,
        le=4096,
        description="HNSW beam width of dense queries (count of candidates).",
    )
    # A store made with the other setting is converted in place by its next optimisation (the
    # server's own optimiser; the embedded engine's idle one): nothing is re-embedded.
    quantization: Literal["auto", "int8", "none"] = Field(
        default="auto",
        description=(
            "Dense vectors: `int8` keeps scalar-quantised copies in RAM (a quarter of the "
            "floats) and the floats on disk for rescoring; `none` keeps the floats in RAM; "
            "`auto` is `none` for an embedded store of at most `in_ram_max_points` points and "
            "`int8` for a larger one (or a Qdrant server's collection)."
        ),
    )
    # What a search reads stays in RAM up to this size (benchmarks/search.py measures both
    # sides of it; docs/production.md's sizing table has the RAM each size needs).
    in_ram_max_points: int = Field(
        default=200_000,
        ge=0,
        description=(
            "An embedded store of at most this many points when it is opened keeps its vectors, "
            "payloads and sparse index in RAM; a larger one keeps them on disk and reads what "
            "a search needs (count)."
        ),
    )
    oversampling: float = Field(
        default=2.0,
        ge=1.0,
        le=16.0,
        description=(
            "Candidates a quantised dense query takes, as a multiple of its limit, to rescore "
            "with the original vectors (factor)."
        ),
    )
    # The engine's binding holds the GIL for much of a call: more threads than cores only
    # queue for it (measured: 4 and 8 answered fewer searches at 32 at once than 2).
    store_threads: int = Field(
        default=2,
        ge=1,
        le=64,
        description="Threads the embedded engine's calls run on, at once (count).",
    )
    # A lone search goes out at once; a batch forms from the searches that queued while the
    # previous one ran, and is one pass over the segments. The embedded engine answers a batch
    # on one thread, one query after another: at 32 searches at once, batches of 8 on two
    # threads answered more of them than batches of 32 (benchmarks/search.py).
    rank_batch_max: int = Field(
        default=8,
        ge=1,
        le=256,
        description="Most searches ranked together in one batch call to the store (count).",
    )
    rank_batch_wait_ms: float = Field(
        default=0.0,
        ge=0,
        le=2.0,
        description=(
            "How long the first search of a burst waits for others to join its batch (ms; 0: "
            "not at all)."
        ),
    )
    # The embedded engine runs one call at a time, so it sends one.
    rank_batches_in_flight: int = Field(
        default=2,
        ge=1,
        le=32,
        description=(
            "Ranking batches sent to a Qdrant server at once, which answers several in "
            "parallel (count)."
        ),
    )
