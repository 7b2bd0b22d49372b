"""Admin endpoints for documents, under /api/v1/knowledge-bases/{kb_id}/documents."""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, Query, Request, Response, status
from fastapi.responses import JSONResponse

from api.bodies import TEXT_BODY, UPLOAD_BODY
from api.deadline import bulk_operation
from api.deps import (
    AdminPrincipal,
    CallerDep,
    DocumentServiceDep,
    GovernanceServiceDep,
    IntakeServiceDep,
    KbId,
    RemovalServiceDep,
    SyncServiceDep,
)
from api.responses import AUTHENTICATED, BODY, refusals
from api.uploads import receive_upload
from core.errors import InvalidRequest, UnsupportedDocumentType
from core.governance import GovernanceChange
from infra.process.metrics import UPLOADS
from schemas.api import (
    BatchIn,
    BatchOut,
    DocumentContent,
    DocumentList,
    DocumentOut,
    IngestResult,
    RecordReplace,
    StoredChunk,
    StoredChunks,
    SyncIn,
    SyncOut,
    TextDocumentIn,
    governance_change,
)
from schemas.domain import ParseStatus, Record, new_document_id
from schemas.formats import CONTENT_TYPES, SUPPORTED_EXTENSIONS, extension_of
from services.document_service import DocumentService
from services.intake_service import Ingested, Outcome
from services.policy_service import Submission

# Every route names a KB, which may not exist.
router = APIRouter(
    prefix="/api/v1/knowledge-bases/{kb_id}/documents",
    tags=["documents"],
    responses={**AUTHENTICATED, **refusals(404)},
)


def _check_supported(filename: str) -> None:
    extension = extension_of(filename)
    if extension not in CONTENT_TYPES:
        raise UnsupportedDocumentType(extension, SUPPORTED_EXTENSIONS)


LIST_FIELDS = ("audience_tags", "user_grants", "tags")
GOVERNANCE_FORM_FIELDS = ("visibility_mode", "owner_user_id", *LIST_FIELDS)


def _form_governance(fields: dict[str, str]) -> GovernanceChange:
    values: dict[str, object] = {}
    for name in GOVERNANCE_FORM_FIELDS:
        raw = fields.get(name, "").strip()
        if not raw:
            continue
        if name in LIST_FIELDS:
            values[name] = [part.strip() for part in raw.split(",") if part.strip()]
        else:
            values[name] = raw
    return governance_change(values)


def _answer(document_service: DocumentService, ingested: Ingested) -> JSONResponse:
    """202 when work was started, 200 when the content was already there."""
    body = DocumentOut.of(ingested.document, document_service.stalled_before())
    code = 200 if ingested.outcome is Outcome.UNCHANGED else 202
    return JSONResponse(body.model_dump(mode="json"), status_code=code)


@router.post(
    "",
    status_code=status.HTTP_202_ACCEPTED,
    response_model=DocumentOut,
    responses={
        200: {
            "model": DocumentOut,
            "description": "identical bytes were uploaded before: that one",
        },
        **refusals(409, 415, 429, *BODY),
    },
    openapi_extra=UPLOAD_BODY,
)
@bulk_operation
async def upload_document(
    kb_id: KbId,
    request: Request,
    caller: CallerDep,
    intake_service: IntakeServiceDep,
    document_service: DocumentServiceDep,
    reindex: Annotated[bool, Query(description="re-run the pipeline on identical bytes")] = False,
) -> JSONResponse:
    """Stores the file (multipart field `file`) and queues it for ingestion; answers at once.

    A file with the same name as an earlier one is a new version of it: the old version stays
    searchable until the new one is indexed, then the new one replaces it. Optional fields say
    who may read it (`visibility_mode`, `audience_tags`, `user_grants`, `owner_user_id`,
    `tags`); left out, an admin's upload takes the KB's default visibility and a user's is
    private to them.
    """
    # Checked before the bytes come in, so that nothing is stored for a KB that is not there.
    kb = await intake_service.writable_kb(caller.tenant_id, kb_id)
    await intake_service.admit(caller.tenant_id)
    document_id = new_document_id()
    try:
        received = await receive_upload(
            request.headers.get("content-type"),
            request.headers.get("content-length"),
            request.stream(),
            file_field="file",
            max_bytes=intake_service.max_upload_bytes,
            check_filename=_check_supported,
            open_sink=lambda filename: intake_service.open_original(filename, document_id),
            discard=intake_service.discard,
        )
    except Exception:
        UPLOADS.labels("rejected").inc()
        raise
    try:
        change = _form_governance(received.fields)
    except InvalidRequest:
        await intake_service.discard(received.stored)
        raise
    ingested = await intake_service.accept_file(
        caller.tenant_id,
        kb_id,
        document_id,
        received.filename,
        received.stored,
        by=Submission(caller.reader, change),
        title=received.fields.get("title", "").strip() or None,
        reindex=reindex,
        kb=kb,
    )
    UPLOADS.labels("duplicate" if ingested.outcome is Outcome.UNCHANGED else "accepted").inc()
    return _answer(document_service, ingested)


@router.post(
    "/text",
    status_code=status.HTTP_202_ACCEPTED,
    response_model=DocumentOut,
    responses={
        200: {"model": DocumentOut, "description": "unchanged: that document"},
        **refusals(409, 429, *BODY),
    },
    openapi_extra=TEXT_BODY,
)
@bulk_operation
async def ingest_text(
    kb_id: KbId,
    request: Request,
    caller: CallerDep,
    intake_service: IntakeServiceDep,
    document_service: DocumentServiceDep,
) -> JSONResponse:
    """Indexes a text (`title`, `content`; optional `external_id`, `url`, `metadata` and the
    governance fields), as JSON or as form fields."""
    body = await _text_body(request)
    by = Submission(caller.reader, body.governance())
    await intake_service.admit(caller.tenant_id)
    ingested = await intake_service.accept_record(caller.tenant_id, kb_id, body.record(), by)
    return _answer(document_service, ingested)


async def _text_body(request: Request) -> TextDocumentIn:
    content_type = request.headers.get("content-type", "")
    if content_type.startswith(("multipart/form-data", "application/x-www-form-urlencoded")):
        form = await request.form(max_files=0, max_fields=10)
        fields: dict[str, object] = {
            key: value for key, value in form.items() if isinstance(value, str)
        }
        for name in LIST_FIELDS:
            if isinstance(fields.get(name), str):
                fields[name] = [p.strip() for p in str(fields[name]).split(",") if p.strip()]
        try:
            return TextDocumentIn.model_validate(fields)
        except ValueError as exc:
            raise InvalidRequest(f"invalid body: {exc}") from exc
    try:
        return TextDocumentIn.model_validate_json(await request.body())
    except ValueError as exc:
        raise InvalidRequest(f"invalid body: {exc}") from exc


@router.post("/batch", status_code=status.HTTP_202_ACCEPTED, responses=refusals(409, 429, *BODY))
@bulk_operation
async def ingest_batch(
    kb_id: KbId, body: BatchIn, caller: CallerDep, intake_service: IntakeServiceDep
) -> BatchOut:
    """Upserts up to 1,000 records by `external_id`; unchanged records cost nothing. The
    governance fields apply to every record (`confirm_tenant_wide: true` is required to make
    them `shared` without an audience)."""
    by = Submission(caller.reader, body.governance(), body.confirm_tenant_wide)
    await intake_service.admit(caller.tenant_id, len(body.records))
    ingested = await intake_service.accept_records(caller.tenant_id, kb_id, body.records, by)
    return BatchOut(
        results=[
            IngestResult(
                external_id=record.external_id,
                document_id=result.document.id,
                outcome=result.outcome.value,
                parse_status=result.document.parse_status,
            )
            for record, result in zip(body.records, ingested, strict=True)
        ]
    )


@router.post("/sync", status_code=status.HTTP_202_ACCEPTED, responses=refusals(409, *BODY))
@bulk_operation
async def sync_source(
    kb_id: KbId,
    body: SyncIn,
    principal: AdminPrincipal,
    caller: CallerDep,
    sync_service: SyncServiceDep,
) -> SyncOut:
    """Makes the KB's documents of `source` exactly these records (a full sync): new
    ones are added, changed ones re-indexed (the old version stays searchable until the new
    one is indexed), and the source's documents not named here are deleted."""
    by = Submission(caller.reader, body.governance(), body.confirm_tenant_wide)
    synced = await sync_service.sync(principal.tenant_id, kb_id, body.source, body.records, by)
    return SyncOut(
        run=synced.run,
        removed=synced.removed,
        results=[
            IngestResult(
                external_id=record.external_id,
                document_id=result.document.id,
                outcome=result.outcome.value,
                parse_status=result.document.parse_status,
            )
            for record, result in zip(body.records, synced.results, strict=True)
        ],
    )


@router.put(
    "/{document_id}",
    status_code=status.HTTP_202_ACCEPTED,
    response_model=DocumentOut,
    responses={
        200: {"model": DocumentOut, "description": "unchanged: that document"},
        **refusals(409, *BODY),
    },
)
@bulk_operation
async def replace_record(
    kb_id: KbId,
    document_id: str,
    body: RecordReplace,
    caller: CallerDep,
    intake_service: IntakeServiceDep,
    document_service: DocumentServiceDep,
) -> JSONResponse:
    """Replaces a record's title, body and URL: a new version that takes the old one's place
    once indexed (200 with the document if nothing changed). Files get 409: upload a new
    version instead."""
    record = Record(title=body.title, content=body.content, url=body.url, metadata=body.metadata)
    by = Submission(caller.reader, GovernanceChange())
    ingested = await intake_service.replace_record(caller.tenant_id, kb_id, document_id, record, by)
    return _answer(document_service, ingested)


@router.get("", responses=refusals(422))
async def list_documents(
    kb_id: KbId,
    caller: CallerDep,
    document_service: DocumentServiceDep,
    status_filter: Annotated[
        ParseStatus | Literal["stalled"] | None,
        Query(alias="status", description="a parse status, or `stalled`"),
    ] = None,
    external_id: Annotated[
        str | None, Query(max_length=512, description="only the versions of this record")
    ] = None,
    limit: Annotated[int, Query(ge=1, le=200)] = 50,
    cursor: Annotated[str | None, Query(description="next_cursor of the previous page")] = None,
) -> DocumentList:
    """The knowledge base's documents the caller may see, newest first, a page at a time."""
    page = await document_service.list_page(
        caller.tenant_id,
        kb_id,
        caller.reader,
        status=status_filter if isinstance(status_filter, ParseStatus) else None,
        stalled=status_filter == "stalled",
        external_id=external_id,
        limit=limit,
        cursor=cursor,
    )
    stalled_before = document_service.stalled_before()
    return DocumentList(
        items=[DocumentOut.of(d, stalled_before) for d in page.items],
        next_cursor=page.next_cursor,
    )


@router.get("/{document_id}")
async def get_document(
    kb_id: KbId, document_id: str, caller: CallerDep, document_service: DocumentServiceDep
) -> DocumentOut:
    """One document with its pipeline status and governance (404 if the caller may not
    read it)."""
    document = await document_service.get(caller.tenant_id, kb_id, document_id, caller.reader)
    return DocumentOut.of(document, document_service.stalled_before())


@router.patch("/{document_id}", responses=refusals(409, *BODY))
async def change_governance(
    kb_id: KbId,
    document_id: str,
    body: GovernanceChange,
    caller: CallerDep,
    governance_service: GovernanceServiceDep,
    document_service: DocumentServiceDep,
) -> DocumentOut:
    """Changes who owns and who may read the item (every version of it), or archives it
    (`archived: true`). Search sees the change when this returns; nothing is re-embedded."""
    document = await governance_service.change(caller.principal, kb_id, document_id, body)
    return DocumentOut.of(document, document_service.stalled_before())


@router.get("/{document_id}/content")
async def document_content(
    kb_id: KbId, document_id: str, caller: CallerDep, document_service: DocumentServiceDep
) -> DocumentContent:
    """The item's text (404 if the caller may not read it)."""
    document = await document_service.get(caller.tenant_id, kb_id, document_id, caller.reader)
    content = await document_service.content(caller.tenant_id, kb_id, document_id, caller.reader)
    return DocumentContent(document_id=document.id, title=document.title, content=content)


@router.get("/{document_id}/chunks", responses=refusals(422))
async def document_chunks(
    kb_id: KbId,
    document_id: str,
    caller: CallerDep,
    document_service: DocumentServiceDep,
    limit: Annotated[int, Query(ge=1, le=10_000)] = 1000,
) -> StoredChunks:
    """The document's chunks as the vector store holds them (what search can return)."""
    payloads = await document_service.chunks(
        caller.tenant_id, kb_id, document_id, caller.reader, limit
    )
    return StoredChunks(items=[StoredChunk.of(payload) for payload in payloads])


@router.post(
    "/{document_id}/reindex", status_code=status.HTTP_202_ACCEPTED, responses=refusals(409)
)
async def reindex_document(
    kb_id: KbId, document_id: str, caller: CallerDep, intake_service: IntakeServiceDep
) -> DocumentOut:
    """Runs the pipeline again on the stored original; what is indexed stays searchable."""
    document = await intake_service.reindex(caller.tenant_id, kb_id, document_id, caller.reader)
    return DocumentOut.of(document)


@router.delete("/{document_id}", status_code=status.HTTP_204_NO_CONTENT)
async def delete_document(
    kb_id: KbId, document_id: str, caller: CallerDep, removal_service: RemovalServiceDep
) -> Response:
    """Deletes the document (its owner or an admin): gone from search when this returns,
    then its files."""
    await removal_service.delete_document(caller.tenant_id, kb_id, document_id, caller.reader)
    return Response(status_code=status.HTTP_204_NO_CONTENT)
