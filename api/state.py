"""The API process's long-lived services, built once in the lifespan."""

from __future__ import annotations

from dataclasses import dataclass

from api.services.access import AccessGuard
from api.services.evaluation import Evaluations
from api.services.search import SearchService
from infra.blob_store import BlobStore
from infra.bots import BotRepository
from infra.documents import DocumentRepository
from infra.ingestion import Intake, Removal
from infra.knowledge_bases import KnowledgeBaseRepository
from infra.settings import Settings
from infra.tokens import TokenRepository
from infra.vectorstore.base import VectorStore


@dataclass
class Services:
    """Everything a route may call."""

    settings: Settings
    tokens: TokenRepository
    kbs: KnowledgeBaseRepository
    documents: DocumentRepository
    blobs: BlobStore
    intake: Intake
    removal: Removal
    bots: BotRepository
    guard: AccessGuard
    search: SearchService
    evaluations: Evaluations
    store: VectorStore
    ready: bool = False
