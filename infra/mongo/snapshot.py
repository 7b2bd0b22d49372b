"""Ragline's MongoDB records as a backup holds them: which collections, read at one moment,
and written back.

Every collection a deployment's state lives in is listed here, with how one tenant's records
are found in it (a field holding the tenant's id, or one holding the id of a record kept from
an earlier collection: a KB, a crawl job, a document, a stored file). Left out on purpose:
the embedding and context caches (filled again on use) and the event outbox (the documents
its events are about are in progress, and a restore starts those again).

`read` takes every collection inside one transaction with snapshot read concern, so the
records are those of one moment even while uploads go on. `write` puts records back by `_id`
(replace or insert, so running it again after an interruption finishes the job), and `remove`
takes away what `write` put, should a restore have to be undone.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from typing import Any

from bson import json_util
from bson.json_util import JSONMode, JSONOptions
from pymongo import AsyncMongoClient, ReplaceOne
from pymongo.read_concern import ReadConcern

from infra.mongo.client import (
    AUDIENCES,
    AUDIT,
    BOTS,
    CRAWL_ACTIVE,
    CRAWL_FRONTIER,
    CRAWL_JOBS,
    CRAWL_PAGES,
    DEAD_LETTERS,
    DOCUMENTS,
    EVALUATIONS,
    EXTRACTED_BUCKET,
    KB_CODES,
    KNOWLEDGE_BASES,
    ORIGINALS_BUCKET,
    RESTORES,
    SOURCES,
    TOKENS,
    USERS,
    Database,
    MongoDoc,
    mongo_errors,
)
from schemas.domain import utcnow

# Extended JSON that keeps every BSON type (dates, object ids, binary file chunks) exactly.
JSON_OPTIONS = JSONOptions(json_mode=JSONMode.CANONICAL, tz_aware=True)
BATCH = 500


@dataclass(frozen=True)
class Collection:
    """A collection in a backup, and how a tenant's records are found in it: `field` holds the
    tenant's id, or (with `of`) the `_id` of a record kept from the collection `of`."""

    name: str
    field: str = "tenant_id"
    of: str | None = None
    # Whether the collection holds records a restore must not overwrite: a target that has
    # any is not empty.
    owned: bool = True


def _files(bucket: str) -> tuple[Collection, Collection]:
    files = f"{bucket}.files"
    return (
        Collection(files, "metadata.document_id", of=DOCUMENTS, owned=False),
        Collection(f"{bucket}.chunks", "files_id", of=files, owned=False),
    )


# In the order they are read and written: a collection after those it refers to.
COLLECTIONS: tuple[Collection, ...] = (
    Collection(KNOWLEDGE_BASES),
    Collection(KB_CODES, "kb_id", of=KNOWLEDGE_BASES, owned=False),
    Collection(DOCUMENTS),
    Collection(SOURCES, "kb_id", of=KNOWLEDGE_BASES, owned=False),
    *_files(ORIGINALS_BUCKET),
    *_files(EXTRACTED_BUCKET),
    Collection(TOKENS),
    Collection(USERS),
    Collection(AUDIENCES),
    Collection(BOTS),
    Collection(EVALUATIONS),
    Collection(DEAD_LETTERS),
    Collection(CRAWL_JOBS),
    Collection(CRAWL_FRONTIER, "job_id", of=CRAWL_JOBS, owned=False),
    Collection(CRAWL_PAGES, "kb_id", of=KNOWLEDGE_BASES, owned=False),
    Collection(CRAWL_ACTIVE, "_id", of=KNOWLEDGE_BASES, owned=False),
    Collection(AUDIT, owned=False),
)


def encode(record: MongoDoc) -> bytes:
    """One record as a line of extended JSON."""
    return json_util.dumps(record, json_options=JSON_OPTIONS).encode()


def decode(line: bytes) -> MongoDoc:
    """A record from its line."""
    record: MongoDoc = json_util.loads(line, json_options=JSON_OPTIONS)
    return record


class MongoSnapshot:
    """Reads and writes the collections of `COLLECTIONS` in one database."""

    def __init__(self, client: AsyncMongoClient[MongoDoc], db: Database) -> None:
        self._client = client
        self._db = db

    async def read(self, tenant_id: str | None) -> AsyncIterator[tuple[Collection, list[MongoDoc]]]:
        """Every collection's records (a tenant's, or all), in batches, as of one moment. A
        record referring to one not kept (a stored file whose document was not written yet:
        uploads store the file first) is left out, so a snapshot holds no orphans."""
        kept: dict[str, set[Any]] = {}
        referred = {collection.of for collection in COLLECTIONS if collection.of}
        async with mongo_errors(), self._client.start_session() as session:
            await session.start_transaction(read_concern=ReadConcern("snapshot"))
            try:
                for collection in COLLECTIONS:
                    ids: set[Any] = set()
                    batch: list[MongoDoc] = []
                    cursor = self._db[collection.name].find(
                        _selection(collection, tenant_id, kept), session=session, batch_size=BATCH
                    )
                    async for record in cursor:
                        if (
                            collection.of
                            and _field(record, collection.field) not in kept[collection.of]
                        ):
                            continue
                        batch.append(record)
                        if collection.name in referred:
                            ids.add(record["_id"])
                        if len(batch) == BATCH:
                            yield collection, batch
                            batch = []
                    yield collection, batch
                    kept[collection.name] = ids
            finally:
                await session.abort_transaction()

    async def holds(self, tenant_id: str | None) -> str | None:
        """The first collection of the target (a tenant, or the deployment) holding records a
        restore would overwrite; None when there is none. A tenant's tokens do not count: the
        admin restoring it holds one."""
        async with mongo_errors():
            for collection in COLLECTIONS:
                if not collection.owned or (tenant_id is not None and collection.name == TOKENS):
                    continue
                query = {} if tenant_id is None else {collection.field: tenant_id}
                if await self._db[collection.name].find_one(query, projection={"_id": 1}):
                    return collection.name
        return None

    async def interrupted_restore(self, target: str) -> str | None:
        """The fingerprint of the snapshot whose restore into `target` began and did not end."""
        async with mongo_errors():
            marker = await self._db[RESTORES].find_one({"_id": target})
        return None if marker is None else str(marker["snapshot"])

    async def begin_restore(self, target: str, fingerprint: str) -> None:
        """Marks `target` as being restored from the snapshot `fingerprint`."""
        async with mongo_errors():
            await self._db[RESTORES].replace_one(
                {"_id": target},
                {"_id": target, "snapshot": fingerprint, "started_at": utcnow()},
                upsert=True,
            )

    async def end_restore(self, target: str) -> None:
        """Clears the marker: the restore finished, or was undone."""
        async with mongo_errors():
            await self._db[RESTORES].delete_one({"_id": target})

    async def write(self, name: str, records: Sequence[MongoDoc]) -> None:
        """Puts records back as they were (replacing any of the same `_id`)."""
        if not records:
            return
        async with mongo_errors():
            await self._db[name].bulk_write(
                [ReplaceOne({"_id": record["_id"]}, record, upsert=True) for record in records],
                ordered=False,
            )

    async def remove(self, name: str, ids: Sequence[Any]) -> None:
        """Takes away the records `write` put."""
        async with mongo_errors():
            for start in range(0, len(ids), BATCH):
                await self._db[name].delete_many({"_id": {"$in": list(ids[start : start + BATCH])}})


def _selection(
    collection: Collection, tenant_id: str | None, kept: dict[str, set[Any]]
) -> MongoDoc:
    """The query of a collection's records: a tenant's (the whole deployment: all, and those
    referring to records not kept are left out as they are read)."""
    if tenant_id is None:
        return {}
    if collection.of is None:
        return {collection.field: tenant_id}
    return {collection.field: {"$in": list(kept[collection.of])}}


def _field(record: MongoDoc, path: str) -> Any:
    """The value at a dotted path of a record (None where it is missing)."""
    value: Any = record
    for part in path.split("."):
        value = value.get(part) if isinstance(value, dict) else None
    return value
