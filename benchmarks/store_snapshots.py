"""Filled search-benchmark stores, kept under the benchmark's cache directory and reused.

Filling a store is most of a search benchmark's run at large sizes (a million chunks took 94
minutes: writing the points and building the HNSW index), while what it measures is the search
over it. So a store filled once is kept (`save`): its vector store directory, closed and
flushed, and the knowledge-base records its points belong to; a later run at the same size, of
the same kind and the same material, copies the directory into its own run directory and writes
the same KBs into its own MongoDB database (`restore`) in about a minute.

A snapshot's name (`key`) is a hash of everything that decides what the store holds: its kind
and size, the texts and the model its real chunks come from, and `STORE_FORMAT`, raised whenever
the code that writes the points changes what they hold (the payload's fields, how texts are
made). The store's settings (quantisation, where the vectors live) are not in it: the engine
takes the settings each time a store is opened and rebuilds its segments to them at the next
optimisation, which the benchmark runs after a restore.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from infra.mongo.client import KNOWLEDGE_BASES, Database
from schemas.domain import KnowledgeBase

# Raised when what the benchmark writes into a store changes (v2: chunks carry copy signatures;
# v3: and their terms).
STORE_FORMAT = 3
META = "snapshot.json"
VECTORS = "vectors"


def key(store_kind: str, chunks: int, model_id: str, texts: Iterable[str]) -> str:
    """The name of the snapshot of a store of this kind and size, filled from these texts."""
    digest = hashlib.sha256(f"{STORE_FORMAT}|{store_kind}|{chunks}|{model_id}".encode())
    for text in texts:
        digest.update(hashlib.sha256(text.encode()).digest())
    return f"{store_kind}-{chunks}-{digest.hexdigest()[:16]}"


@dataclass(frozen=True)
class Snapshot:
    """A kept store: its directory, its KBs, and what was written into it."""

    path: Path
    kbs: list[dict[str, Any]]
    written: dict[str, Any]

    @property
    def kb_ids(self) -> list[str]:
        """The store's KBs, in the order they were made."""
        return [str(kb["id"]) for kb in self.kbs]


def find(cache_dir: Path, name: str) -> Snapshot | None:
    """The kept store of that name, if there is a whole one."""
    path = cache_dir / "stores" / name
    meta = path / META
    if not meta.is_file() or not (path / VECTORS).is_dir():
        return None
    data = json.loads(meta.read_text())
    return Snapshot(path, data["kbs"], data["written"])


def save(
    cache_dir: Path,
    name: str,
    vectors: Path,
    kbs: list[KnowledgeBase],
    written: dict[str, Any],
) -> Snapshot:
    """Keeps a filled, closed store (its meta written last: a copy cut short is not found)."""
    path = cache_dir / "stores" / name
    if path.exists():
        shutil.rmtree(path)
    path.mkdir(parents=True)
    shutil.copytree(vectors, path / VECTORS)
    records = [kb.model_dump(mode="json") for kb in kbs]
    (path / META).write_text(json.dumps({"kbs": records, "written": written}))
    return Snapshot(path, records, written)


async def restore(snapshot: Snapshot, vectors: Path, db: Database) -> None:
    """Copies the kept store to `vectors` (which must not exist) and writes its KBs."""
    shutil.copytree(snapshot.path / VECTORS, vectors)
    records = []
    for raw in snapshot.kbs:
        kb = KnowledgeBase.model_validate(raw)
        record = kb.model_dump(exclude={"id"})
        record["_id"] = kb.id
        records.append(record)
    await db[KNOWLEDGE_BASES].insert_many(records)
