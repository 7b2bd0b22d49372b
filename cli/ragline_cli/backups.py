"""`ragline backup DIR` and `ragline restore DIR`: a snapshot of the tenant (or, with the
deployment's admin token and --deployment, of every tenant) into a folder, and back."""

from __future__ import annotations

import json
import tarfile
import tempfile
from pathlib import Path
from typing import Annotated, Any, Literal

import typer

from ragline_cli import output
from ragline_cli.answers import as_json
from ragline_cli.context import JsonFlag, client_of
from ragline_cli.errors import UsageError

MANIFEST = "manifest.json"

DeploymentFlag = Annotated[
    bool,
    typer.Option(
        "--deployment",
        help="Every tenant, not the token's own (needs the deployment's admin token).",
    ),
]


def _scope(deployment: bool) -> Literal["tenant", "deployment"]:
    return "deployment" if deployment else "tenant"


def backup(
    ctx: typer.Context,
    directory: Annotated[
        Path, typer.Argument(help="An empty or new folder to write the snapshot into.")
    ],
    deployment: DeploymentFlag = False,
    json_out: JsonFlag = False,
) -> None:
    """Back up the tenant's knowledge bases, documents (originals included), versions,
    people, tokens (hashed), bots, crawl state, dead letters and vectors into DIR: a
    manifest with counts and checksums, and the files it lists."""
    if directory.exists() and (not directory.is_dir() or any(directory.iterdir())):
        raise UsageError(f"{directory} is not an empty folder: a snapshot goes into a new one")
    directory.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="ragline-backup-") as work:
        archive = Path(work) / "snapshot.tar"
        client_of(ctx).create_backup(archive, scope=_scope(deployment))
        with tarfile.open(archive, "r:") as tar:
            tar.extractall(directory, filter="data")
    manifest = _manifest(directory)
    if json_out:
        output.print_json(manifest)
        return
    output.show(
        output.table(
            f"Snapshot of {manifest.get('tenant_id') or 'the deployment'} in {directory}",
            ["file", "records"],
            [(entry["name"], entry["records"]) for entry in manifest["files"]],
        )
    )


def restore(
    ctx: typer.Context,
    directory: Annotated[Path, typer.Argument(help="A folder `ragline backup` wrote.")],
    deployment: DeploymentFlag = False,
    json_out: JsonFlag = False,
) -> None:
    """Restore a snapshot into the tenant (or, with --deployment, the deployment), which must
    hold no data. The API checks every file against the manifest's checksums before it writes
    anything, and undoes a restore that fails."""
    manifest = _manifest(directory)
    names = [MANIFEST, *(str(entry["name"]) for entry in manifest.get("files", []))]
    with tempfile.TemporaryDirectory(prefix="ragline-restore-") as work:
        archive = Path(work) / "snapshot.tar"
        with tarfile.open(archive, "w") as tar:
            for name in names:
                path = directory / name
                if not path.is_file():
                    raise UsageError(f"{path} is missing: the snapshot is incomplete")
                tar.add(path, arcname=name, recursive=False)
        restored = client_of(ctx).restore_backup(archive, scope=_scope(deployment))
    if json_out:
        output.print_json(as_json(restored))
        return
    output.show(
        output.table(
            f"Restored from {directory}",
            ["collection", "records"],
            sorted(restored.records.items()),
        ),
        output.key_values(
            [
                ("vector points", restored.points),
                ("documents started again", restored.restarted_documents),
            ]
        ),
    )


def _manifest(directory: Path) -> dict[str, Any]:
    path = directory / MANIFEST
    try:
        manifest = json.loads(path.read_text())
    except FileNotFoundError as exc:
        raise UsageError(f"{path} is missing: {directory} is not a Ragline snapshot") from exc
    except (OSError, ValueError) as exc:
        raise UsageError(f"{path} cannot be read: {exc}") from exc
    if not isinstance(manifest, dict) or not isinstance(manifest.get("files"), list):
        raise UsageError(f"{path} is not a snapshot manifest")
    return manifest
