"""Each hot query is served by an index, as the server's own `explain` says (real MongoDB
protocol; about 2 s): the queries every document, message or sweep makes, against a database
with Ragline's indexes (`infra.mongo.indexes`) and a few hundred documents in it."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from infra.mongo.client import DOCUMENTS, KNOWLEDGE_BASES, OUTBOX, SOURCES, Database, MongoDoc
from infra.mongo.document_repository import IN_PROGRESS, WITHDRAW
from infra.mongo.indexes import INDEXES, ensure_indexes
from schemas.domain import ParseStatus, utcnow

NOW = utcnow()


@dataclass(frozen=True)
class Query:
    """A query as Ragline sends it: what it is for, and its collection, filter and sort."""

    what: str
    collection: str
    filter: MongoDoc
    sort: MongoDoc | None = None


HOT = (
    Query("a document by id", DOCUMENTS, {"_id": "doc_7"}),
    Query("documents by id", DOCUMENTS, {"_id": {"$in": ["doc_1", "doc_2"]}}),
    Query(
        "a KB's documents, newest first",
        DOCUMENTS,
        {"tenant_id": "acme", "kb_id": "kb_1"},
        {"created_at": -1, "_id": -1},
    ),
    Query(
        "a KB's failed documents, newest first",
        DOCUMENTS,
        {"tenant_id": "acme", "kb_id": "kb_1", "parse_status": "failed"},
        {"created_at": -1, "_id": -1},
    ),
    Query("an upload's identical bytes", DOCUMENTS, {"kb_id": "kb_1", "sha256": "f" * 64}),
    Query("a source's versions", DOCUMENTS, {"kb_id": "kb_1", "source_key": "record:r7"}),
    Query(
        "a source's older versions",
        DOCUMENTS,
        {"kb_id": "kb_1", "source_key": "record:r7", "version": {"$lt": 3}},
    ),
    *(
        Query(
            f"documents {status} that have not moved",
            DOCUMENTS,
            {"parse_status": status, "updated_at": {"$lt": NOW}},
            {"updated_at": 1},
        )
        for status in IN_PROGRESS
    ),
    *(
        Query(
            f"the last move of a document {status}",
            DOCUMENTS,
            {"parse_status": status},
            {"updated_at": -1},
        )
        for status in IN_PROGRESS
    ),
    Query(
        "documents being deleted since a time",
        DOCUMENTS,
        {"parse_status": ParseStatus.DELETING.value, "updated_at": {"$lt": NOW}},
    ),
    Query(
        "the last progress",
        DOCUMENTS,
        {"progressed_at": {"$gt": NOW - timedelta(days=1)}},
        {"progressed_at": -1},
    ),
    Query("runs to withdraw", DOCUMENTS, {WITHDRAW: {"$gt": 0}}),
    Query(
        "the version lines in a sync run",
        DOCUMENTS,
        {"tenant_id": "acme", "kb_id": "kb_1", "source": "wiki", "sync_run": "run_2"},
    ),
    Query(
        "a sync source's documents",
        DOCUMENTS,
        {"tenant_id": "acme", "kb_id": "kb_1", "source": "wiki"},
    ),
    Query(
        "an item's versions",
        DOCUMENTS,
        {"tenant_id": "acme", "knowledge_item_id": "doc_7"},
        {"version": -1},
    ),
    Query("a KB's version lines", SOURCES, {"kb_id": "kb_1"}),
    Query("a version line", SOURCES, {"_id": "kb_1\x00record:r7"}),
    Query("KBs' revisions", KNOWLEDGE_BASES, {"_id": {"$in": ["kb_1", "kb_2"]}}),
    Query(
        "the outbox's oldest entries",
        OUTBOX,
        {"created_at": {"$lt": NOW}},
        {"created_at": 1},
    ),
    Query("a document's outbox entries", OUTBOX, {"document_id": "doc_7"}),
)


async def _filled(db: Database) -> None:
    """Ragline's indexes and a few hundred documents of two KBs, some versions and statuses."""
    await ensure_indexes(db)
    statuses = [s.value for s in ParseStatus]
    await db[DOCUMENTS].insert_many(
        [
            {
                "_id": f"doc_{n}",
                "tenant_id": "acme",
                "kb_id": f"kb_{n % 2 + 1}",
                "source_key": f"record:r{n % 50}",
                "version": n // 50 + 1,
                "parse_status": statuses[n % len(statuses)],
                "sha256": f"{n:064x}",
                "created_at": NOW - timedelta(seconds=n),
                "updated_at": NOW - timedelta(seconds=n),
                "progressed_at": NOW - timedelta(seconds=n),
                "knowledge_item_id": f"doc_{n % 50}",
                "source": "wiki" if n % 3 else None,
                "sync_run": f"run_{n % 4}",
            }
            for n in range(300)
        ]
    )
    await db[SOURCES].insert_many(
        [{"_id": f"kb_1\x00record:r{n}", "kb_id": "kb_1"} for n in range(50)]
    )
    await db[OUTBOX].insert_many(
        [{"created_at": NOW - timedelta(seconds=n), "document_id": f"doc_{n}"} for n in range(50)]
    )


def _stages(plan: Any) -> list[MongoDoc]:
    """Every stage of an explained plan, nested or not."""
    if isinstance(plan, dict):
        found = [plan] if "stage" in plan else []
        for value in plan.values():
            found += _stages(value)
        return found
    if isinstance(plan, list):
        return [stage for item in plan for stage in _stages(item)]
    return []


async def _explained(db: Database, query: Query) -> list[MongoDoc]:
    command: MongoDoc = {"find": query.collection, "filter": query.filter}
    if query.sort:
        command["sort"] = query.sort
    answer = await db.command({"explain": command, "verbosity": "queryPlanner"})
    return _stages(answer["queryPlanner"]["winningPlan"])


async def test_each_hot_query_is_served_by_an_index(db: Database) -> None:
    await _filled(db)
    unserved = []
    for query in HOT:
        stages = await _explained(db, query)
        names = {stage["stage"] for stage in stages}
        if "COLLSCAN" in names or not names & {"IXSCAN", "IDHACK", "EXPRESS_IXSCAN"}:
            unserved.append((query.what, stages))
    assert unserved == []


async def test_every_index_is_named_once_and_made_once_named(db: Database) -> None:
    # Indexes made before they were named (the same keys under the server's own name) are
    # replaced, not kept beside their named twins.
    await db[DOCUMENTS].create_index([("kb_id", 1), ("sha256", 1)])
    await ensure_indexes(db)
    await ensure_indexes(db)
    made = [spec async for spec in await db[DOCUMENTS].list_indexes()]
    assert sorted(spec["name"] for spec in made) == sorted(
        ["_id_", *(index.name for index in INDEXES if index.collection == DOCUMENTS)]
    )
    assert len({(index.collection, index.name) for index in INDEXES}) == len(INDEXES)
