"""Admin endpoints for documents, under /api/v1/knowledge-bases/{kb_id}/documents."""

from __future__ import annotations

from fastapi import APIRouter, Request, Response, status

from api.deps import AdminPrincipal, ServicesDep
from schemas.api import DocumentList, DocumentOut

router = APIRouter(prefix="/api/v1/knowledge-bases/{kb_id}/documents", tags=["documents"])


@router.post(
    "",
    status_code=status.HTTP_202_ACCEPTED,
    openapi_extra={
        "requestBody": {
            "required": True,
            "content": {
                "multipart/form-data": {
                    "schema": {
                        "type": "object",
                        "required": ["file"],
                        "properties": {
                            "file": {"type": "string", "format": "binary"},
                            "title": {"type": "string"},
                        },
                    }
                }
            },
        }
    },
)
async def upload_document(
    kb_id: str, request: Request, principal: AdminPrincipal, services: ServicesDep
) -> DocumentOut:
    """Stores the file (multipart field `file`) and queues it for ingestion; answers at once."""
    document = await services.document_service.upload(
        principal.tenant_id,
        kb_id,
        request.headers.get("content-type"),
        request.headers.get("content-length"),
        request.stream(),
    )
    return DocumentOut.of(document)


@router.get("")
async def list_documents(
    kb_id: str, principal: AdminPrincipal, services: ServicesDep
) -> DocumentList:
    """The knowledge base's documents, newest first."""
    await services.kbs.get(principal.tenant_id, kb_id)
    documents = await services.documents.list_in_kb(principal.tenant_id, kb_id)
    return DocumentList(items=[DocumentOut.of(d) for d in documents])


@router.get("/{document_id}")
async def get_document(
    kb_id: str, document_id: str, principal: AdminPrincipal, services: ServicesDep
) -> DocumentOut:
    """One document with its pipeline status."""
    return DocumentOut.of(await services.documents.get(principal.tenant_id, kb_id, document_id))


@router.delete("/{document_id}", status_code=status.HTTP_204_NO_CONTENT)
async def delete_document(
    kb_id: str, document_id: str, principal: AdminPrincipal, services: ServicesDep
) -> Response:
    """Deletes the document: gone from search when this returns, then its files."""
    await services.document_service.delete(principal.tenant_id, kb_id, document_id)
    return Response(status_code=status.HTTP_204_NO_CONTENT)
