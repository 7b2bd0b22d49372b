"""Backups and restores: a snapshot of the caller's tenant, or (with the deployment's own admin
token) of the whole deployment, as a tar of the snapshot's files (`infra.files.snapshot_files`)."""

from __future__ import annotations

import asyncio
import shutil
import tarfile
import tempfile
from pathlib import Path
from typing import Annotated, Literal

from fastapi import APIRouter, BackgroundTasks, File, Query, UploadFile
from fastapi.responses import FileResponse

from api.deadline import bulk_operation
from api.deps import AdminPrincipal, BackupServiceDep, ServicesDep
from api.responses import AUTHENTICATED, BODY, refusals
from core.errors import Forbidden, SnapshotInvalid
from infra.files.snapshot_files import pack, unpack
from infra.mongo.token_repository import BOOTSTRAP_TOKEN_ID
from schemas.api import RestoreOut
from schemas.domain import Principal

router = APIRouter(prefix="/api/v1", tags=["backups"], responses=AUTHENTICATED)

Scope = Annotated[
    Literal["tenant", "deployment"],
    Query(description="the caller's tenant, or every tenant (the deployment's admin token)"),
]
TAR = "application/x-tar"


def _tenant_of(principal: Principal, scope: str) -> str | None:
    """The tenant a backup or restore is about (None: the deployment), if the caller may."""
    if scope == "tenant":
        return principal.tenant_id
    if principal.token_id != BOOTSTRAP_TOKEN_ID:
        raise Forbidden("the whole deployment is backed up and restored with its admin token")
    return None


@router.post(
    "/backups",
    response_class=FileResponse,
    responses={
        200: {"content": {TAR: {}}, "description": "the snapshot, as a tar"},
        **refusals(422),
    },
)
@bulk_operation
async def create_backup(
    principal: AdminPrincipal,
    backup_service: BackupServiceDep,
    services: ServicesDep,
    cleanup: BackgroundTasks,
    scope: Scope = "tenant",
) -> FileResponse:
    """Takes a snapshot of the tenant's (or deployment's) records, stored files and vector
    points, consistent while uploads go on, and sends it as a tar: `manifest.json` (counts
    and checksums) and the files it lists."""
    tenant_id = _tenant_of(principal, scope)
    work = Path(tempfile.mkdtemp(prefix="backup-", dir=_work_dir(services.settings.run_dir)))
    cleanup.add_task(shutil.rmtree, work, ignore_errors=True)
    snapshot = work / "snapshot"
    snapshot.mkdir()
    manifest = await backup_service.backup(tenant_id, snapshot)
    archive = work / "snapshot.tar"
    await asyncio.to_thread(pack, snapshot, archive)
    stamp = manifest.created_at.strftime("%Y%m%dT%H%M%SZ")
    return FileResponse(
        archive, media_type=TAR, filename=f"ragline-{tenant_id or 'deployment'}-{stamp}.tar"
    )


@router.post("/restores", responses=refusals(409, *BODY))
@bulk_operation
async def restore_backup(
    principal: AdminPrincipal,
    backup_service: BackupServiceDep,
    services: ServicesDep,
    file: Annotated[UploadFile, File(description="a snapshot tar from `POST /backups`")],
    scope: Scope = "tenant",
) -> RestoreOut:
    """Restores a snapshot into the caller's tenant (or the deployment), which must hold no
    data. Every file is checked against the manifest's checksums before anything is written;
    a restore that fails is undone. Documents the snapshot caught in progress start again."""
    tenant_id = _tenant_of(principal, scope)
    work = Path(tempfile.mkdtemp(prefix="restore-", dir=_work_dir(services.settings.run_dir)))
    try:
        archive = work / "snapshot.tar"
        await asyncio.to_thread(_save, file, archive)
        unpacked = work / "snapshot"
        try:
            await asyncio.to_thread(unpack, archive, unpacked)
        except (tarfile.TarError, OSError) as exc:
            raise SnapshotInvalid(f"the snapshot is not a readable tar: {exc}") from exc
        report = await backup_service.restore(tenant_id, unpacked)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return RestoreOut(
        records=report.records,
        points=report.points,
        restarted_documents=len(report.restarted_documents),
    )


def _save(upload: UploadFile, archive: Path) -> None:
    with archive.open("wb") as out:
        shutil.copyfileobj(upload.file, out)


def _work_dir(run_dir: Path) -> Path:
    path = run_dir / "backups"
    path.mkdir(parents=True, exist_ok=True)
    return path
