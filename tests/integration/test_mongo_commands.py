"""Every MongoDB command a process sends is counted, by command and the collection it names
(`ragline_mongo_commands_total`): what ops read a process's database load from, and what the
write-path benchmark divides by the records (real MongoDB; about a second)."""

from __future__ import annotations

from prometheus_client import REGISTRY

from infra.mongo.client import Database


def _sent(command: str, collection: str) -> float:
    labels = {"command": command, "collection": collection}
    return REGISTRY.get_sample_value("ragline_mongo_commands_total", labels) or 0.0


async def test_each_command_is_counted_by_kind_and_collection(db: Database) -> None:
    things = db["counted_things"]
    before = {
        kind: _sent(kind, "counted_things") for kind in ("insert", "find", "getMore", "update")
    }
    await things.insert_many([{"_id": n} for n in range(3)])
    await things.update_one({"_id": 0}, {"$set": {"seen": True}})
    # Three documents read one at a time: a find and two getMores.
    read = [doc async for doc in things.find({}).batch_size(1)]
    assert len(read) == 3
    sent = {kind: _sent(kind, "counted_things") - n for kind, n in before.items()}
    assert (sent["insert"], sent["update"], sent["find"]) == (1, 1, 1)
    assert sent["getMore"] >= 2, sent
