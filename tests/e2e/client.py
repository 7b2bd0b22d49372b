"""A small HTTP client for the end-to-end tests: what an admin or the agent runtime does."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx

from tests.conftest import RunningPipeline

FINAL = {"indexed", "failed"}
WAIT_S = 120


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
        """Polls a document until it is indexed or failed (two minutes at most)."""
        async with asyncio.timeout(WAIT_S):
            while True:
                document = await self.document(kb_id, document_id)
                if document["parse_status"] in FINAL:
                    return document
                await asyncio.sleep(0.2)

    async def search(
        self, kb_ids: list[str], query: str, top_k: int = 5, tenant_id: str = "default"
    ) -> list[dict[str, Any]]:
        """The tenant-form internal search; returns the hits."""
        response = await self.http.post(
            "/api/v1/internal/knowledge/search",
            json={"tenant_id": tenant_id, "kb_ids": kb_ids, "query": query, "top_k": top_k},
            headers={"X-Internal-Secret": self.running.internal_secret},
        )
        assert response.status_code == 200, response.text
        return list(response.json()["hits"])
