"""The API process's long-lived services, built once in the lifespan."""

from __future__ import annotations

from dataclasses import dataclass

from infra.blob_store import BlobStore
from infra.bots import BotRepository
from infra.documents import DocumentRepository
from infra.knowledge_bases import KnowledgeBaseRepository
from infra.settings import Settings
from infra.tokens import TokenRepository
from infra.vectorstore.base import VectorStore
from services.evaluation import Evaluations
from services.intake import Intake, Removal
from services.search.access import AccessGuard
from services.search.service import SearchService


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
