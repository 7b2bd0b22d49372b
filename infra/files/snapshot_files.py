"""A backup snapshot on disk: a manifest and gzipped JSON-lines files, each with its checksum.

    DIR/manifest.json                   what the snapshot holds (`Manifest`)
    DIR/mongo/<collection>.jsonl.gz     one record per line (MongoDB extended JSON)
    DIR/vectors/points.jsonl.gz         one vector-store point per line

The manifest names every file with its number of records, its size and its SHA-256, so a
snapshot is checked whole (`verify`) before anything of it is applied: a file changed, cut
short, missing or added, or a manifest of another format, is refused with the file named.
This module knows lines of bytes, not what they hold (`infra.mongo.snapshot` and
`services.backup_service` encode them).
"""

from __future__ import annotations

import gzip
import hashlib
import re
import tarfile
from collections.abc import Iterable, Iterator
from datetime import datetime
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ValidationError

from core.errors import SnapshotInvalid

MANIFEST = "manifest.json"
FORMAT = 1
# A file's name in the manifest: a folder and a plain file name, nothing that can leave DIR.
_FILE_NAME = re.compile(r"^(mongo|vectors)/[A-Za-z0-9_.-]+\.jsonl\.gz$")
_READ_BYTES = 1 << 20


class SnapshotFile(BaseModel):
    """One file of a snapshot, as the manifest lists it."""

    name: str
    records: int
    bytes: int
    sha256: str


class EmbeddingIdentity(BaseModel):
    """The model the snapshot's vectors were made with: a store of another cannot take them."""

    provider: str
    model: str
    dimensions: int


class Manifest(BaseModel):
    """What a snapshot holds."""

    format: Literal[1] = 1
    created_at: datetime
    # "deployment": every tenant; "tenant": `tenant_id`'s records only.
    scope: Literal["deployment", "tenant"]
    tenant_id: str | None = None
    embedding: EmbeddingIdentity
    files: list[SnapshotFile]
    # Documents by pipeline status when the snapshot was taken (those in progress are started
    # again when it is restored).
    documents: dict[str, int] = {}

    def file(self, name: str) -> SnapshotFile | None:
        """The manifest's entry for `name`, if it lists one."""
        return next((entry for entry in self.files if entry.name == name), None)

    @property
    def records(self) -> dict[str, int]:
        """Records per file."""
        return {entry.name: entry.records for entry in self.files}


def new_file(name: str) -> SnapshotFile:
    """The entry of a file not written yet."""
    return SnapshotFile(name=name, records=0, bytes=0, sha256="")


def write_lines(directory: Path, name: str, lines: Iterable[bytes]) -> SnapshotFile:
    """Writes one file of records (each a line without a newline in it); returns its entry.
    More records go to it with `append_lines`."""
    return append_lines(directory, new_file(name), lines)


def append_lines(directory: Path, entry: SnapshotFile, lines: Iterable[bytes]) -> SnapshotFile:
    """Adds records to a file (a new gzip member); returns its entry, whose size and checksum
    `write_manifest` takes once the file is whole (not after every batch: each would read the
    whole file again)."""
    _check_name(entry.name)
    path = directory / entry.name
    path.parent.mkdir(parents=True, exist_ok=True)
    records = entry.records
    with gzip.open(path, "ab", compresslevel=5) as out:
        for line in lines:
            if b"\n" in line:
                raise ValueError(f"a record of {entry.name} holds a newline")
            out.write(line)
            out.write(b"\n")
            records += 1
    return entry.model_copy(update={"records": records})


def write_manifest(directory: Path, manifest: Manifest) -> Manifest:
    """Writes the manifest, with each file's size and checksum taken now, last: a directory
    without one is not a snapshot. Returns it as written."""
    files = []
    for entry in manifest.files:
        size, digest = _size_and_digest(directory / entry.name)
        files.append(entry.model_copy(update={"bytes": size, "sha256": digest}))
    sealed = manifest.model_copy(update={"files": files})
    (directory / MANIFEST).write_text(sealed.model_dump_json(indent=2) + "\n")
    return sealed


def read_manifest(directory: Path) -> Manifest:
    """The snapshot's manifest; `SnapshotInvalid` if it is missing or not one."""
    path = directory / MANIFEST
    try:
        text = path.read_text()
    except FileNotFoundError as exc:
        raise SnapshotInvalid(f"{MANIFEST} is missing: this is not a Ragline snapshot") from exc
    except (OSError, UnicodeDecodeError) as exc:
        raise SnapshotInvalid(f"{MANIFEST} cannot be read: {exc}") from exc
    try:
        manifest = Manifest.model_validate_json(text)
    except ValidationError as exc:
        problem = exc.errors()[0]
        where = ".".join(str(part) for part in problem["loc"]) or "the manifest"
        raise SnapshotInvalid(
            f"{MANIFEST} is not a snapshot manifest of format {FORMAT}: {where}: {problem['msg']}"
        ) from exc
    for entry in manifest.files:
        _check_name(entry.name)
    return manifest


def verify(directory: Path) -> Manifest:
    """The manifest, once every file it lists is there with its size, checksum and number of
    records, and no other file is: `SnapshotInvalid` naming the first that is not."""
    manifest = read_manifest(directory)
    listed = {entry.name for entry in manifest.files}
    if len(listed) != len(manifest.files):
        raise SnapshotInvalid(f"{MANIFEST} lists a file twice")
    for entry in manifest.files:
        path = directory / entry.name
        if not path.is_file():
            raise SnapshotInvalid(f"{entry.name} is missing")
        size, digest = _size_and_digest(path)
        if size != entry.bytes or digest != entry.sha256:
            raise SnapshotInvalid(
                f"{entry.name} does not match its checksum in {MANIFEST} "
                f"({size} bytes, sha256 {digest[:12]}…; the manifest says {entry.bytes} bytes, "
                f"sha256 {entry.sha256[:12]}…): the snapshot was changed or damaged"
            )
        records = sum(1 for _ in read_lines(directory, entry))
        if records != entry.records:
            raise SnapshotInvalid(
                f"{entry.name} holds {records} records; {MANIFEST} says {entry.records}"
            )
    extra = sorted(
        str(path.relative_to(directory))
        for path in directory.rglob("*")
        if path.is_file() and str(path.relative_to(directory)) not in listed | {MANIFEST}
    )
    if extra:
        raise SnapshotInvalid(f"{extra[0]} is not listed in {MANIFEST}")
    return manifest


def read_lines(directory: Path, entry: SnapshotFile) -> Iterator[bytes]:
    """The records of one file, in order (`SnapshotInvalid` if it does not decompress)."""
    try:
        with gzip.open(directory / entry.name, "rb") as lines:
            for line in lines:
                yield line.rstrip(b"\n")
    except (OSError, EOFError) as exc:
        raise SnapshotInvalid(f"{entry.name} cannot be read: {exc}") from exc


def pack(directory: Path, archive: Path) -> None:
    """Writes the snapshot in `directory` as one tar: the manifest first, then its files."""
    manifest = read_manifest(directory)
    with tarfile.open(archive, "w") as tar:
        for name in (MANIFEST, *(entry.name for entry in manifest.files)):
            tar.add(directory / name, arcname=name, recursive=False)


def unpack(archive: Path, directory: Path) -> None:
    """Extracts a snapshot's tar into `directory`: regular files with a snapshot file's name
    only (`SnapshotInvalid` for anything else: a link, a folder outside, another name)."""
    with tarfile.open(archive, "r:") as tar:
        members = tar.getmembers()
        for member in members:
            if not member.isfile():
                raise SnapshotInvalid(f"{member.name!r} in the snapshot is not a plain file")
            if member.name != MANIFEST:
                _check_name(member.name)
        tar.extractall(directory, members=members, filter="data")


def _check_name(name: str) -> None:
    if not _FILE_NAME.match(name) or ".." in name:
        raise SnapshotInvalid(f"{name!r} is not a snapshot file's name")


def _size_and_digest(path: Path) -> tuple[int, str]:
    digest = hashlib.sha256()
    size = 0
    with path.open("rb") as data:
        while block := data.read(_READ_BYTES):
            digest.update(block)
            size += len(block)
    return size, digest.hexdigest()
