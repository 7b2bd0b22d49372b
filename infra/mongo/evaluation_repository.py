"""Stored evaluations of knowledge bases, in MongoDB."""

from __future__ import annotations

from pymongo import DESCENDING

from core.errors import NotFound
from infra.mongo.client import EVALUATIONS, Database, from_mongo, mongo_errors
from schemas.evaluation import Evaluation


class EvaluationRepository:
    """Keeps evaluations, scoped to a tenant and a KB."""

    def __init__(self, db: Database) -> None:
        self._evaluations = db[EVALUATIONS]

    async def save(self, evaluation: Evaluation) -> None:
        """Stores a new evaluation."""
        record = evaluation.model_dump(mode="json", exclude={"id"})
        record["_id"] = evaluation.id
        record["created_at"] = evaluation.created_at
        async with mongo_errors():
            await self._evaluations.insert_one(record)

    async def get(self, tenant_id: str, kb_id: str, evaluation_id: str) -> Evaluation:
        """One evaluation of the tenant's KB; `NotFound` otherwise."""
        async with mongo_errors():
            doc = await self._evaluations.find_one(
                {"_id": evaluation_id, "tenant_id": tenant_id, "kb_id": kb_id}
            )
        if doc is None:
            raise NotFound("evaluation", evaluation_id)
        return Evaluation.model_validate(from_mongo(doc))

    async def list_recent(self, tenant_id: str, kb_id: str, limit: int) -> list[Evaluation]:
        """The KB's evaluations, newest first."""
        async with mongo_errors():
            cursor = (
                self._evaluations.find({"tenant_id": tenant_id, "kb_id": kb_id})
                .sort("created_at", DESCENDING)
                .limit(limit)
            )
            return [Evaluation.model_validate(from_mongo(doc)) async for doc in cursor]
