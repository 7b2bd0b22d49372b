"""The stacks the benchmarks start: the local servers, the API, and only the stages they use.

`devstack.launcher.isolated_stack` starts every stage worker; a benchmark that never crawls or
sends connector records has no use for those workers, and each one costs seconds of two
shared cores while the stack starts (a whole stack about 38 s on a quiet machine, the API with
the relay, extract, chunk and embed workers about 17 s). So each benchmark names the stages
its load goes through, and prints the settings its stack overrides.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

import httpx

from devstack.launcher import LocalServices, Pipeline, free_port, pipeline_env

# Uploaded files and text: the relay, extraction, chunking and embedding (the API indexes).
FILE_STAGES = ("relay", "extract", "chunk", "embed")
# Connector records (the batch endpoint) come in through the records worker.
RECORD_STAGES = ("relay", "records", "extract", "chunk", "embed")
CRAWL_STAGES = ("relay", "crawl", "extract", "chunk", "embed")
# A tiny run checks its benchmark's mechanics (nothing lost, doubled or leaked, its figures
# come out), not the model: its stack embeds with the hashed embedder, which loads no model
# (nor does a worker started again); where the model is what a benchmark measures, its tiny run
# keeps it (quality, search, ingest).
TINY_SETTINGS = {"RAGLINE_EMBEDDING__PROVIDER": "hashed"}


def run_settings(settings: Mapping[str, str], *, tiny: bool) -> dict[str, str]:
    """A benchmark's stack settings, with the hashed embedder in a tiny run."""
    return {**settings, **(TINY_SETTINGS if tiny else {})}


def points_held(http: httpx.Client, kb_id: str, documents: Sequence[Mapping[str, object]]) -> int:
    """How many chunks of the documents the vector store holds (what search can return), read
    through the API: the documents' own `chunk_count` says what the pipeline counted, this what
    is there."""
    held = 0
    for document in documents:
        listed = http.get(
            f"/api/v1/knowledge-bases/{kb_id}/documents/{document['id']}/chunks",
            params={"limit": 10_000},
        )
        listed.raise_for_status()
        held += len(listed.json()["items"])
    return held


def announce(settings: Mapping[str, str]) -> None:
    """Prints the settings a benchmark's stack overrides (the rest are the defaults)."""
    shown = dict(settings) if settings else "none (every setting at its default)"
    print(f"stack settings: {shown}", flush=True)


@contextlib.contextmanager
def bench_stack(
    work_dir: Path,
    admin_token: str,
    internal_secret: str,
    settings: Mapping[str, str] | None = None,
    stages: Sequence[str] = FILE_STAGES,
    embed_workers: int = 1,
    *,
    store_process: bool = False,
) -> Iterator[tuple[LocalServices, Pipeline]]:
    """Servers on free ports, the API and one worker per stage in `stages` (`embed_workers`
    embed workers), settled, under `work_dir`; with `store_process`, the embedded store served
    by a process of its own (`python -m ragline.store`) rather than held by the API; everything
    is stopped on exit."""
    with LocalServices.on_free_ports(work_dir / "services") as services:
        env = {
            **pipeline_env(services, work_dir / "run", admin_token, internal_secret),
            **(settings or {}),
        }
        if store_process:
            env["RAGLINE_QDRANT__STORE_SOCKET"] = str(work_dir / "run" / "store.sock")
        pipeline = Pipeline(
            work_dir / "run", env, api_port=free_port(), embed_workers=embed_workers
        )
        try:
            if store_process:
                pipeline.start_store()
            # Workers first: they load while the API does (`start` waits for the API only).
            for stage in stages:
                for _ in range(embed_workers if stage == "embed" else 1):
                    pipeline.add_worker(stage)
            pipeline.start(workers=False)
            pipeline.wait_settled(partitions=int(env.get("RAGLINE_KAFKA__PARTITIONS", "6")))
            yield services, pipeline
        finally:
            pipeline.stop()
