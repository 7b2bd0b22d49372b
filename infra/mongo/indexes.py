"""MongoDB's indexes: each one named for the query it serves, made at every start.

An index costs a write on every insert, and on every update that changes one of its fields, so
only the indexes a query uses are kept. Each is named for that query (`documents_newest_first`
serves a KB's document list), so that an index found unused on a server (`$indexStats`) says
which query stopped using it. `tests/integration/test_mongo_indexes.py` asserts, by `explain`,
that each hot query is served by its index.

`ensure_indexes` makes the indexes that are missing and drops, first, an index of the same
keys under another name (one made before the indexes were named) or one that is no longer
wanted (`RETIRED`). Several processes starting at once run it together: a drop that finds
nothing, or a creation that finds the index made, is no error.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from pymongo import ASCENDING, DESCENDING, IndexModel
from pymongo.errors import OperationFailure

from infra.mongo.client import (
    AUDIENCES,
    AUDIT,
    BOTS,
    CRAWL_FRONTIER,
    CRAWL_JOBS,
    DEAD_LETTERS,
    DOCUMENTS,
    EVALUATIONS,
    EXTRACTED_BUCKET,
    KNOWLEDGE_BASES,
    ORIGINALS_BUCKET,
    OUTBOX,
    SOURCES,
    TOKENS,
    USERS,
    Database,
    MongoDoc,
    mongo_errors,
)

# The server's answer to a drop of an index that is not there.
INDEX_NOT_FOUND = 27


@dataclass(frozen=True)
class Index:
    """One index: the collection, its name (the query it serves) and its keys."""

    collection: str
    name: str
    keys: tuple[tuple[str, int], ...]
    options: MongoDoc = field(default_factory=dict)

    def model(self) -> IndexModel:
        """The index as PyMongo creates it."""
        return IndexModel(list(self.keys), name=self.name, **self.options)


def _gridfs(bucket: str) -> tuple[Index, ...]:
    """The indexes the GridFS spec asks for, under the names every driver gives them (PyMongo
    would create them lazily, at the cost of probing both collections before every upload;
    see `infra.mongo.blob_store`)."""
    return (
        Index(
            f"{bucket}.files",
            "filename_1_uploadDate_1",
            (("filename", ASCENDING), ("uploadDate", ASCENDING)),
        ),
        Index(
            f"{bucket}.chunks",
            "files_id_1_n_1",
            (("files_id", ASCENDING), ("n", ASCENDING)),
            {"unique": True},
        ),
    )


INDEXES: tuple[Index, ...] = (
    # A tenant's KBs, newest first; a KB by its code.
    Index(
        KNOWLEDGE_BASES,
        "kbs_newest_first",
        (("tenant_id", ASCENDING), ("created_at", DESCENDING)),
    ),
    Index(KNOWLEDGE_BASES, "kb_by_code", (("tenant_id", ASCENDING), ("code", ASCENDING))),
    # A KB's document list, newest first (created_at, then id), and the same of one status.
    Index(
        DOCUMENTS,
        "documents_newest_first",
        (
            ("tenant_id", ASCENDING),
            ("kb_id", ASCENDING),
            ("created_at", DESCENDING),
            ("_id", DESCENDING),
        ),
    ),
    Index(
        DOCUMENTS,
        "documents_of_status_newest_first",
        (
            ("tenant_id", ASCENDING),
            ("kb_id", ASCENDING),
            ("parse_status", ASCENDING),
            ("created_at", DESCENDING),
            ("_id", DESCENDING),
        ),
    ),
    # An upload's identical bytes already in the KB (`find_identical`).
    Index(DOCUMENTS, "identical_bytes", (("kb_id", ASCENDING), ("sha256", ASCENDING))),
    # A KB's counts, from its documents' chunk counts alone (`KnowledgeBaseRepository.counted`).
    Index(
        DOCUMENTS,
        "kb_counts",
        (("kb_id", ASCENDING), ("indexed_chunk_count", ASCENDING)),
    ),
    # A source's versions: the latest, and those older than one going live.
    Index(
        DOCUMENTS,
        "versions_of_source",
        (("kb_id", ASCENDING), ("source_key", ASCENDING), ("version", DESCENDING)),
    ),
    # Documents of a status that have not moved since a time: in progress (the reconciler and
    # the stalled gauge, one query per status) or being deleted (the removal sweep).
    Index(
        DOCUMENTS,
        "unmoved_by_status",
        (("parse_status", ASCENDING), ("updated_at", ASCENDING)),
    ),
    # When a stage last moved any document on (the reconciler's question).
    Index(DOCUMENTS, "last_progress", (("progressed_at", DESCENDING),)),
    # The runs the reconciler failed, for the API process's sweep to withdraw.
    Index(DOCUMENTS, "runs_to_withdraw", (("withdraw_generation", ASCENDING),)),
    # A KB's documents of one external id (the list's filter).
    Index(
        DOCUMENTS,
        "documents_by_external_id",
        (("kb_id", ASCENDING), ("external_id", ASCENDING)),
    ),
    # A source's documents for a full sync: those not in the run, the lines in it. (Every
    # field the queries name is in the index: the local server uses an index only then.)
    Index(
        DOCUMENTS,
        "documents_of_sync_source",
        (
            ("tenant_id", ASCENDING),
            ("kb_id", ASCENDING),
            ("source", ASCENDING),
            ("sync_run", ASCENDING),
            ("parse_status", ASCENDING),
        ),
    ),
    # The versions of one knowledge item, newest first; a tenant's wiki pages by topic.
    Index(
        DOCUMENTS,
        "versions_of_item",
        (("tenant_id", ASCENDING), ("knowledge_item_id", ASCENDING), ("version", DESCENDING)),
    ),
    Index(
        DOCUMENTS,
        "wiki_pages_by_topic",
        (("tenant_id", ASCENDING), ("kind", ASCENDING), ("topic", ASCENDING)),
    ),
    # A KB's version lines (removed with the KB).
    Index(SOURCES, "version_lines_of_kb", (("kb_id", ASCENDING),)),
    Index(BOTS, "bots_newest_first", (("tenant_id", ASCENDING), ("created_at", DESCENDING))),
    # The bots that search a KB (told when it changes or goes).
    Index(BOTS, "bots_of_kb", (("knowledge.kb_ids", ASCENDING),)),
    Index(TOKENS, "tokens_of_tenant", (("tenant_id", ASCENDING),)),
    Index(AUDIT, "audit_newest_first", (("tenant_id", ASCENDING), ("at", DESCENDING))),
    Index(USERS, "user_by_id", (("tenant_id", ASCENDING), ("user_id", ASCENDING))),
    Index(AUDIENCES, "audiences_of_member", (("tenant_id", ASCENDING), ("members", ASCENDING))),
    # The outbox's oldest entries (the relay), and a document's (sent, then deleted).
    Index(OUTBOX, "outbox_oldest_first", (("created_at", ASCENDING),)),
    Index(OUTBOX, "outbox_of_document", (("document_id", ASCENDING),)),
    Index(
        DEAD_LETTERS,
        "dead_letters_newest_first",
        (("tenant_id", ASCENDING), ("at", DESCENDING)),
    ),
    Index(
        CRAWL_JOBS,
        "crawl_jobs_newest_first",
        (("tenant_id", ASCENDING), ("kb_id", ASCENDING), ("created_at", DESCENDING)),
    ),
    Index(CRAWL_FRONTIER, "frontier_of_job", (("job_id", ASCENDING),)),
    Index(
        EVALUATIONS,
        "evaluations_newest_first",
        (("tenant_id", ASCENDING), ("kb_id", ASCENDING), ("created_at", DESCENDING)),
    ),
    *_gridfs(ORIGINALS_BUCKET),
    *_gridfs(EXTRACTED_BUCKET),
)

# Indexes once made and no longer wanted, by collection: dropped at start. (Those two served
# their queries on MongoDB, with the queries' other fields filtered after, but not on the local
# server, which scanned the collection instead.)
RETIRED: dict[str, tuple[str, ...]] = {DOCUMENTS: ("kb_id_1_source_1", "knowledge_item_id_1")}


async def ensure_indexes(db: Database) -> None:
    """Makes every index of `INDEXES` that is missing, after dropping those it replaces (the
    same keys under another name) and the retired ones; safe to run at every start, by several
    processes at once."""
    by_collection: dict[str, list[Index]] = {}
    for index in INDEXES:
        by_collection.setdefault(index.collection, []).append(index)
    async with mongo_errors():
        for collection, wanted in by_collection.items():
            existing = {
                str(spec["name"]): tuple((str(k), int(v)) for k, v in spec["key"].items())
                async for spec in await db[collection].list_indexes()
            }
            names = {index.name for index in wanted}
            keys = {index.keys for index in wanted}
            for name, key in existing.items():
                renamed = key in keys and name not in names
                if renamed or name in RETIRED.get(collection, ()):
                    await _drop(db, collection, name)
            missing = [index.model() for index in wanted if index.name not in existing]
            if missing:
                await db[collection].create_indexes(missing)


async def _drop(db: Database, collection: str, name: str) -> None:
    try:
        await db[collection].drop_index(name)
    except OperationFailure as exc:
        if exc.code != INDEX_NOT_FOUND:
            raise
