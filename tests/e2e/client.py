"""A small HTTP client for the end-to-end tests: what an admin or the agent runtime does."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
from aiokafka import AIOKafkaProducer

from schemas.events import RecordPublished
from schemas.topics import RECORDS_INGEST
from tests.conftest import RunningPipeline

FINAL = {"indexed", "failed"}
WAIT_S = 120
# Test clients drop an idle connection after 2 s, long before the API closes it
# (`api.keep_alive_s`): a request sent on a connection the server is closing at that moment
# fails with "Server disconnected without sending a response".
CLIENT_LIMITS = httpx.Limits(keepalive_expiry=2.0)


class Api:
    """Calls the running API as an admin (bearer token) and as the search caller (secret)."""

    def __init__(self, http: httpx.AsyncClient, running: RunningPipeline, token: str) -> None:
        self.http = http
        self.running = running
        self.token = token

    @property
    def auth(self) -> dict[str, str]:
        """The admin's Authorization header."""
        return {"Authorization": f"Bearer {self.token}"}

    async def create_kb(self, name: str = "Handbook") -> dict[str, Any]:
        """Creates a knowledge base; returns it."""
        response = await self.http.post(
            "/api/v1/knowledge-bases", json={"name": name}, headers=self.auth
        )
        assert response.status_code == 201, response.text
        return dict(response.json())

    async def upload(
        self, kb_id: str, filename: str, data: bytes, expect: int = 202
    ) -> dict[str, Any]:
        """Uploads a file; returns the document (or the error body)."""
        response = await self.http.post(
            f"/api/v1/knowledge-bases/{kb_id}/documents",
            files={"file": (filename, data)},
            headers=self.auth,
        )
        assert response.status_code == expect, response.text
        return dict(response.json())

    async def document(self, kb_id: str, document_id: str) -> dict[str, Any]:
        """One document."""
        response = await self.http.get(
            f"/api/v1/knowledge-bases/{kb_id}/documents/{document_id}", headers=self.auth
        )
        assert response.status_code == 200, response.text
        return dict(response.json())

    async def wait_final(self, kb_id: str, document_id: str) -> dict[str, Any]:
        """Polls a document until it is indexed or failed (two minutes at most; then fails with
        the document as last seen)."""
        document: dict[str, Any] = {}
        try:
            async with asyncio.timeout(WAIT_S):
                while True:
                    document = await self.document(kb_id, document_id)
                    if document["parse_status"] in FINAL:
                        return document
                    await asyncio.sleep(0.2)
        except TimeoutError:
            raise AssertionError(f"not indexed or failed in {WAIT_S} s: {document}") from None

    async def search(
        self, kb_ids: list[str], query: str, top_k: int = 5, tenant_id: str = "default"
    ) -> list[dict[str, Any]]:
        """The tenant-form internal search; returns the hits."""
        return await self.internal_search(
            {"tenant_id": tenant_id, "kb_ids": kb_ids, "query": query, "top_k": top_k}
        )

    async def ask_bot(self, bot_id: str, query: str, **extra: Any) -> dict[str, Any]:
        """A bot's internal search (session `call-1`); returns the whole answer."""
        response = await self.http.post(
            "/api/v1/internal/knowledge/search",
            json={"bot_id": bot_id, "session_id": "call-1", "query": query, **extra},
            headers={"X-Internal-Secret": self.running.internal_secret},
        )
        assert response.status_code == 200, response.text
        return dict(response.json())

    async def ask_bot_cached(
        self, bot_id: str, query: str, timeout_s: float = 10.0, **extra: Any
    ) -> dict[str, Any]:
        """The bot's search asked until its answer comes from the cache (a search's answer is
        cached just after it is sent); fails if it does not within `timeout_s`."""
        async with asyncio.timeout(timeout_s):
            while True:
                answer = await self.ask_bot(bot_id, query, **extra)
                if answer["metrics"]["cache"]["result"]:
                    return answer
                await asyncio.sleep(0.01)

    async def internal_search(self, body: dict[str, Any]) -> list[dict[str, Any]]:
        """The internal search with this body (a bot's or the tenant form); returns the hits."""
        response = await self.http.post(
            "/api/v1/internal/knowledge/search",
            json=body,
            headers={"X-Internal-Secret": self.running.internal_secret},
        )
        assert response.status_code == 200, response.text
        return list(response.json()["hits"])

    async def chunks(self, kb_id: str, document_id: str) -> list[dict[str, Any]]:
        """The document's chunks as the vector store holds them."""
        response = await self.http.get(
            f"/api/v1/knowledge-bases/{kb_id}/documents/{document_id}/chunks", headers=self.auth
        )
        assert response.status_code == 200, response.text
        return list(response.json()["items"])

    async def kb(self, kb_id: str) -> dict[str, Any]:
        """One knowledge base."""
        response = await self.http.get(f"/api/v1/knowledge-bases/{kb_id}", headers=self.auth)
        assert response.status_code == 200, response.text
        return dict(response.json())

    async def text(self, kb_id: str, body: dict[str, Any], expect: int = 202) -> dict[str, Any]:
        """Indexes a text through `POST .../documents/text`."""
        response = await self.http.post(
            f"/api/v1/knowledge-bases/{kb_id}/documents/text", json=body, headers=self.auth
        )
        assert response.status_code == expect, response.text
        return dict(response.json())

    async def batch(self, kb_id: str, records: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Upserts records through `POST .../documents/batch`; returns the per-record results."""
        response = await self.http.post(
            f"/api/v1/knowledge-bases/{kb_id}/documents/batch",
            json={"records": records},
            headers=self.auth,
            timeout=120,
        )
        assert response.status_code == 202, response.text
        return list(response.json()["results"])

    async def documents(self, kb_id: str, **params: Any) -> dict[str, Any]:
        """A page of the document list."""
        response = await self.http.get(
            f"/api/v1/knowledge-bases/{kb_id}/documents", params=params, headers=self.auth
        )
        assert response.status_code == 200, response.text
        return dict(response.json())

    async def delete(self, kb_id: str, document_id: str) -> None:
        """Deletes a document."""
        response = await self.http.delete(
            f"/api/v1/knowledge-bases/{kb_id}/documents/{document_id}", headers=self.auth
        )
        assert response.status_code == 204, response.text

    async def metric(self, url: str, name: str) -> float:
        """The sum of a Prometheus metric's samples (all labels) at a /metrics URL."""
        text = (await self.http.get(url)).text
        total = 0.0
        for line in text.splitlines():
            if line.startswith(name) and not line.startswith("#"):
                head, _, value = line.rpartition(" ")
                if head == name or head.startswith(name + "{"):
                    total += float(value)
        return total

    async def stage_messages(self, outcome: str | None = None) -> float:
        """Pipeline messages the stages have handled so far (`ragline_stage_messages_total`),
        with this outcome (`ok`, `skipped`, ...) or any: summed over every stage worker and the
        API process (which runs the index stage when it owns the embedded vector store)."""
        urls = [f"{self.running.url}/metrics"] + [
            self.worker_metrics(stage, number)
            for stage in ("extract", "chunk", "embed", "index")
            for number in range(len(self.running.pipeline.workers(stage)))
        ]
        total = 0.0
        for url in urls:
            for line in (await self.http.get(url)).text.splitlines():
                head, _, value = line.rpartition(" ")
                if not head.startswith("ragline_stage_messages_total{"):
                    continue
                if outcome is None or f'outcome="{outcome}"' in head:
                    total += float(value)
        return total

    def worker_metrics(self, stage: str, number: int = 0) -> str:
        """The /metrics URL of one worker of a stage."""
        worker = self.running.pipeline.workers(stage)[number]
        return f"http://127.0.0.1:{worker.env['RAGLINE_METRICS_PORT']}/metrics"


async def publish_record(running: RunningPipeline, event: RecordPublished) -> None:
    """Publishes a connector's record straight to the records topic (as a connector does)."""
    producer = AIOKafkaProducer(bootstrap_servers=running.settings().kafka.bootstrap_servers)
    await producer.start()
    try:
        await producer.send_and_wait(RECORDS_INGEST, event.model_dump_json().encode(), event.key)
    finally:
        await producer.stop()
