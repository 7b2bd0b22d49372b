"""Wiki pages: Markdown pages addressed by a topic slug, unique in a tenant.

A page is a knowledge item like any other: written through the intake on the version line
`wiki:<topic>` of its KB (a new write is a new version that replaces the old one once indexed),
chunked by its headings, searchable and governed like documents.
"""

from __future__ import annotations

from core.errors import Conflict, NotFound
from core.governance import GovernanceChange, Reader
from infra.mongo.blob_store import BlobStore
from infra.mongo.document_repository import DocumentRepository
from infra.mongo.knowledge_base_repository import KnowledgeBaseRepository
from schemas.domain import Document, ItemKind, Record
from services.intake_service import Ingested, IntakeService, TextItem
from services.policy_service import PolicyService, Submission
from services.removal_service import RemovalService


def wiki_source_key(topic: str) -> str:
    """The version line of a wiki page."""
    return f"wiki:{topic}"


class WikiService:
    """Writes, reads, lists and deletes wiki pages as the caller may."""

    def __init__(
        self,
        documents: DocumentRepository,
        kbs: KnowledgeBaseRepository,
        intake: IntakeService,
        removal: RemovalService,
        blobs: BlobStore,
    ) -> None:
        self._documents = documents
        self._kbs = kbs
        self._intake = intake
        self._removal = removal
        self._blobs = blobs

    async def write(
        self,
        tenant_id: str,
        reader: Reader,
        *,
        kb_id: str,
        topic: str,
        title: str,
        content: str,
        summary: str = "",
        change: GovernanceChange | None = None,
    ) -> Ingested:
        """Creates the page, or a new version of it (its owner or an admin only), in the KB
        `kb_id` names by id or code."""
        kb_id = await self._kbs.resolve(tenant_id, kb_id)
        versions = await self._documents.wiki_pages(tenant_id, topic)
        if versions:
            newest = PolicyService.manageable(reader, versions[0])
            if newest.kb_id != kb_id:
                raise Conflict(f"wiki topic {topic!r} belongs to knowledge base {newest.kb_id}")
        record = Record(title=title, content=content, metadata={"summary": summary})
        item = TextItem(
            record,
            wiki_source_key(topic),
            kind=ItemKind.WIKI,
            topic=topic,
            summary=summary,
            text=content,
        )
        by = Submission(reader, change or GovernanceChange())
        return (await self._intake.accept_texts(tenant_id, kb_id, [item], by))[0]

    async def read(self, tenant_id: str, reader: Reader, topic: str) -> tuple[Document, str]:
        """The newest version of the page the caller may read, with its Markdown."""
        for version in await self._documents.wiki_pages(tenant_id, topic):
            if PolicyService.visible(reader, version):
                return version, (await self._blobs.read(version.storage_key)).decode("utf-8")
        raise NotFound("wiki page", topic)

    async def list_pages(self, tenant_id: str, reader: Reader) -> list[Document]:
        """The newest version of each page the caller may read, by topic."""
        pages: dict[str, Document] = {}
        for version in await self._documents.wiki_pages(tenant_id):
            if version.topic not in pages and PolicyService.visible(reader, version):
                pages[version.topic or ""] = version
        return list(pages.values())

    async def delete(self, tenant_id: str, reader: Reader, topic: str) -> None:
        """Deletes every version of the page (its owner or an admin only)."""
        versions = await self._documents.wiki_pages(tenant_id, topic)
        if not versions:
            raise NotFound("wiki page", topic)
        PolicyService.manageable(reader, versions[0])
        for version in versions:
            await self._removal.delete_document(tenant_id, version.kb_id, version.id, reader)
