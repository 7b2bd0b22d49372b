"""MongoDB connection, collection names and indexes (PyMongo's async API).

Writes made once per document or per message are an `update_one` followed by a read, or both
inside a transaction where they must be atomic, rather than `find_one_and_update`: the local
MongoDB server (SecantusDB) scans the whole collection for every find-and-modify, which makes
each of them slower in proportion to everything stored. Rare administrative writes keep it, and
so does the raise of a KB's revision (one round trip instead of two, and KBs are few).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from contextlib import asynccontextmanager, nullcontext
from typing import Any, TypeVar

import pymongo
from pymongo import AsyncMongoClient, UpdateOne, monitoring
from pymongo.asynchronous.client_session import AsyncClientSession
from pymongo.asynchronous.collection import AsyncCollection
from pymongo.asynchronous.database import AsyncDatabase
from pymongo.errors import ConnectionFailure, OperationFailure, PyMongoError

from core.deadlines import operation_bound_s
from core.errors import ServiceUnavailable
from infra.mongo.abandoned import end_later, may_be_left_open
from infra.mongo.cancellation import make_condition_waits_cancel_safe
from infra.process.metrics import MONGO_COMMANDS
from infra.settings.mongo import MongoSettings

KNOWLEDGE_BASES = "knowledge_bases"
DOCUMENTS = "knowledge_documents"
TOKENS = "api_tokens"
USERS = "users"
# One record per KB code in use: `{tenant}:{code}` as its id makes a code unique in a tenant.
KB_CODES = "kb_codes"
AUDIENCES = "audiences"
BOTS = "bots"
SOURCES = "document_sources"
EMBEDDINGS = "embedding_cache"
EVALUATIONS = "evaluations"
# Who changed what through the API, and how it ended.
AUDIT = "audit_log"
# LLM-written chunk contexts, by hash of provider, model, prompt version and chunk.
CONTEXTS = "context_cache"
# Pipeline events written with their changes, until Kafka acknowledges them (`infra.mongo.outbox`).
OUTBOX = "event_outbox"
# Messages a stage gave up on, for people to list and re-drive
# (`infra.mongo.dead_letter_repository`).
DEAD_LETTERS = "dead_letters"
# Crawl jobs, each job's URLs, pages as last fetched, and the one active job per KB.
CRAWL_JOBS = "crawl_jobs"
CRAWL_FRONTIER = "crawl_frontier"
CRAWL_PAGES = "crawl_pages"
CRAWL_ACTIVE = "crawl_active"
# A restore under way (`infra.mongo.snapshot`): one marker per deployment or tenant restored.
RESTORES = "restores"
ORIGINALS_BUCKET = "originals"
EXTRACTED_BUCKET = "extracted"

MongoDoc = dict[str, Any]
Database = AsyncDatabase[MongoDoc]


class CommandCounter(monitoring.CommandListener):
    """Counts every command the client sends (`ragline_mongo_commands_total`): what each
    process costs the database, by command and collection."""

    def started(self, event: monitoring.CommandStartedEvent) -> None:
        """One more command of its kind, on the collection it names."""
        MONGO_COMMANDS.labels(event.command_name, collection_of(event)).inc()

    def succeeded(self, event: monitoring.CommandSucceededEvent) -> None:
        """Nothing: a command is counted when sent."""

    def failed(self, event: monitoring.CommandFailedEvent) -> None:
        """Nothing: a command is counted when sent."""


def collection_of(event: monitoring.CommandStartedEvent) -> str:
    """The collection a command names (`{"insert": "docs", ...}`; a `getMore` names it under
    `collection`); empty for one on no collection."""
    field = "collection" if event.command_name == "getMore" else event.command_name
    target = event.command.get(field)
    return target if isinstance(target, str) else ""


def connect(settings: MongoSettings) -> AsyncMongoClient[MongoDoc]:
    """A client for the configured server; it connects lazily. Its commands are counted."""
    make_condition_waits_cancel_safe()
    return AsyncMongoClient(
        settings.url,
        tz_aware=True,
        serverSelectionTimeoutMS=settings.timeout_ms,
        connectTimeoutMS=settings.timeout_ms,
        event_listeners=[CommandCounter()],
    )


@asynccontextmanager
async def mongo_errors() -> AsyncIterator[None]:
    """Translates lost connections and timeouts into `ServiceUnavailable`; within a request
    with a long budget, bounds the operation by the normal one (`core.deadlines`)."""
    bound = operation_bound_s()
    try:
        with pymongo.timeout(bound) if bound is not None else nullcontext():
            yield
    except ConnectionFailure as exc:
        raise ServiceUnavailable("mongodb", str(exc)) from exc
    except PyMongoError as exc:
        transient = exc.timeout or (
            isinstance(exc, OperationFailure) and exc.has_error_label("RetryableWriteError")
        )
        if transient:
            raise ServiceUnavailable("mongodb", str(exc)) from exc
        raise


T = TypeVar("T")

# Documents per bulk write of `update_each`.
UPDATE_BATCH = 1_000


async def update_each(
    collection: AsyncCollection[MongoDoc], query: MongoDoc, update: MongoDoc
) -> list[Any]:
    """What `update_many(query, update)` does, as unordered bulk writes of one update per
    matching document; returns the ids of the documents matched.

    Each document is updated atomically, as by `update_many` (which is not atomic across
    documents either). The local MongoDB server's multi-document update holds its collection
    while it waits out a conflicting transaction, and that transaction's next write waits for
    the collection: both hang, and with them every later write to the collection (a fuzzed
    API found it). Single-document updates wait without holding anything.
    """
    async with mongo_errors():
        ids = [doc["_id"] async for doc in collection.find(query, {"_id": 1})]
        for start in range(0, len(ids), UPDATE_BATCH):
            batch = ids[start : start + UPDATE_BATCH]
            await collection.bulk_write(
                [UpdateOne({**query, "_id": key}, update) for key in batch], ordered=False
            )
    return ids


async def in_transaction(
    client: AsyncMongoClient[MongoDoc], work: Callable[[AsyncClientSession], Awaitable[T]]
) -> T:
    """Runs `work` in one transaction (the driver retries it whole on a transient error). One
    that fails without the server's answer is ended once the server answers again
    (`infra.mongo.abandoned`)."""
    async with mongo_errors(), client.start_session() as session:
        try:
            result: T = await session.with_transaction(work)
        except BaseException as exc:
            if may_be_left_open(exc):
                end_later(client, session)
            raise
    return result


def from_mongo(doc: MongoDoc) -> MongoDoc:
    """A stored record with `_id` renamed to `id`."""
    out = dict(doc)
    out["id"] = out.pop("_id")
    return out


def with_ids(ids: Iterable[str]) -> MongoDoc:
    """A query for the records with these ids (an equality for one: the cheaper read)."""
    unique = sorted(set(ids))
    return {"_id": unique[0] if len(unique) == 1 else {"$in": unique}}
