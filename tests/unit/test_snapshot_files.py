"""The snapshot format: what is written is read back, and a snapshot changed in any way is
refused with the file named, before anything of it is used."""

from __future__ import annotations

import gzip
import re
import tarfile
from datetime import UTC, datetime
from pathlib import Path

import pytest

from core.errors import SnapshotInvalid
from infra.files.snapshot_files import (
    MANIFEST,
    EmbeddingIdentity,
    Manifest,
    append_lines,
    pack,
    read_lines,
    unpack,
    verify,
    write_lines,
    write_manifest,
)

RECORDS = [b'{"_id": "kb_1", "name": "Handbook"}', b'{"_id": "kb_2", "name": "\\u00e9t\\u00e9"}']


def _snapshot(directory: Path) -> Manifest:
    kbs = write_lines(directory, "mongo/knowledge_bases.jsonl.gz", RECORDS[:1])
    kbs = append_lines(directory, kbs, RECORDS[1:])
    points = write_lines(directory, "vectors/points.jsonl.gz", [b'{"id": "p1"}'])
    empty = write_lines(directory, "mongo/bots.jsonl.gz", [])
    manifest = Manifest(
        created_at=datetime(2026, 11, 26, tzinfo=UTC),
        scope="tenant",
        tenant_id="default",
        embedding=EmbeddingIdentity(provider="local", model="m", dimensions=384),
        files=[kbs, points, empty],
    )
    return write_manifest(directory, manifest)


def test_what_is_written_is_verified_and_read_back(tmp_path: Path) -> None:
    written = _snapshot(tmp_path)
    manifest = verify(tmp_path)
    assert manifest == written
    assert manifest.records == {
        "mongo/knowledge_bases.jsonl.gz": 2,
        "vectors/points.jsonl.gz": 1,
        "mongo/bots.jsonl.gz": 0,
    }
    kbs = manifest.file("mongo/knowledge_bases.jsonl.gz")
    assert kbs is not None
    assert list(read_lines(tmp_path, kbs)) == RECORDS


def test_a_changed_byte_is_refused_naming_the_file(tmp_path: Path) -> None:
    _snapshot(tmp_path)
    path = tmp_path / "vectors/points.jsonl.gz"
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x01
    path.write_bytes(bytes(data))
    with pytest.raises(
        SnapshotInvalid, match=re.escape("vectors/points.jsonl.gz does not match its checksum")
    ):
        verify(tmp_path)


def test_a_file_replaced_is_refused_even_with_a_manifest_edited_to_match(tmp_path: Path) -> None:
    manifest = _snapshot(tmp_path)
    path = tmp_path / "mongo/knowledge_bases.jsonl.gz"
    path.write_bytes(gzip.compress(RECORDS[0] + b"\n"))
    with pytest.raises(SnapshotInvalid, match=re.escape("knowledge_bases.jsonl.gz does not match")):
        verify(tmp_path)
    # The manifest edited to the new file's size and checksum: its count still gives it away.
    path.unlink()
    rewritten = write_lines(tmp_path, "mongo/knowledge_bases.jsonl.gz", RECORDS[:1])
    lying = [rewritten.model_copy(update={"records": 2}), *manifest.files[1:]]
    write_manifest(tmp_path, manifest.model_copy(update={"files": lying}))
    with pytest.raises(SnapshotInvalid, match=re.escape("holds 1 records; manifest.json says 2")):
        verify(tmp_path)


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        (lambda d: (d / "mongo/bots.jsonl.gz").unlink(), "mongo/bots.jsonl.gz is missing"),
        (lambda d: (d / MANIFEST).unlink(), "manifest.json is missing"),
        (lambda d: (d / "mongo/extra.jsonl.gz").write_bytes(b""), "extra.jsonl.gz is not listed"),
        (lambda d: (d / MANIFEST).write_text('{"format": 2}'), "not a snapshot manifest"),
        (lambda d: (d / MANIFEST).write_text("not json"), "not a snapshot manifest"),
    ],
)
def test_a_missing_added_or_foreign_file_is_refused(
    tmp_path: Path, damage: object, message: str
) -> None:
    _snapshot(tmp_path)
    damage(tmp_path)  # type: ignore[operator]
    with pytest.raises(SnapshotInvalid, match=re.escape(message)):
        verify(tmp_path)


def test_a_manifest_naming_a_path_outside_the_snapshot_is_refused(tmp_path: Path) -> None:
    manifest = _snapshot(tmp_path)
    entry = manifest.files[0].model_copy(update={"name": "mongo/../../etc.jsonl.gz"})
    hostile = manifest.model_copy(update={"files": [entry]})
    (tmp_path / MANIFEST).write_text(hostile.model_dump_json())
    with pytest.raises(SnapshotInvalid, match=re.escape("is not a snapshot file's name")):
        verify(tmp_path)


def test_a_tar_round_trip_keeps_the_snapshot_and_refuses_links(tmp_path: Path) -> None:
    _snapshot(tmp_path / "a")
    pack(tmp_path / "a", tmp_path / "a.tar")
    unpack(tmp_path / "a.tar", tmp_path / "b")
    assert verify(tmp_path / "b") == verify(tmp_path / "a")

    with tarfile.open(tmp_path / "evil.tar", "w") as tar:
        link = tarfile.TarInfo("mongo/bots.jsonl.gz")
        link.type = tarfile.SYMTYPE
        link.linkname = "/etc/passwd"
        tar.addfile(link)
    with pytest.raises(SnapshotInvalid, match=re.escape("is not a plain file")):
        unpack(tmp_path / "evil.tar", tmp_path / "c")
    with tarfile.open(tmp_path / "outside.tar", "w") as tar:
        tar.add(tmp_path / "a" / MANIFEST, arcname="../manifest.json")
    with pytest.raises(SnapshotInvalid, match=re.escape("is not a snapshot file's name")):
        unpack(tmp_path / "outside.tar", tmp_path / "d")
