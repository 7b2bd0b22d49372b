"""Original uploads and extracted text, stored in MongoDB GridFS.

Keys look like `gridfs:<bucket>/<object id>`, so another backend can be added behind the same
key scheme later.

Reads made at the same moment (the extract stage's messages in flight) share two round trips,
the files' records and then their chunks (`core.coalescing`), where GridFS's reader takes two
per file.
"""

from __future__ import annotations

import gzip
import hashlib
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager, suppress
from dataclasses import dataclass
from datetime import UTC, datetime

from bson import Binary, ObjectId
from bson.errors import InvalidId
from gridfs import DEFAULT_CHUNK_SIZE, AsyncGridFSBucket, NoFile
from gridfs.asynchronous.grid_file import AsyncGridIn
from gridfs.errors import FileExists
from pymongo.errors import BulkWriteError, PyMongoError

from core.coalescing import Coalescer
from core.errors import NotFound, ServiceUnavailable
from infra.mongo.client import (
    EXTRACTED_BUCKET,
    ORIGINALS_BUCKET,
    Database,
    MongoDoc,
    mongo_errors,
)
from schemas.domain import ExtractedDocument

_PREFIX = "gridfs:"


def _upload_stream(bucket: AsyncGridFSBucket, filename: str, document_id: str) -> AsyncGridIn:
    """A new GridFS upload stream that does not probe the bucket for its indexes.

    PyMongo checks, before every upload, whether the bucket's collections are empty (an
    unfiltered `find_one` on each) so as to create the GridFS indexes lazily. `ensure_indexes`
    creates them at start-up instead, and on the local MongoDB server an unfiltered `find_one`
    scans the whole collection: each upload would cost time in proportion to all the files
    stored before it.
    """
    stream = bucket.open_upload_stream(filename, metadata={"document_id": document_id})
    object.__setattr__(stream, "_ensured_index", True)
    return stream


@asynccontextmanager
async def _gridfs_errors() -> AsyncIterator[None]:
    """`mongo_errors`, and a piece of a file found already stored: the driver retried its write
    after losing the server, which had stored it before it went. An outage, to try again."""
    try:
        async with mongo_errors():
            yield
    except FileExists as exc:
        raise ServiceUnavailable(
            "mongodb", f"part of a file was stored by a write the driver retried: {exc}"
        ) from exc


def _key(bucket: str, file_id: ObjectId) -> str:
    return f"{_PREFIX}{bucket}/{file_id}"


def _parse_key(key: str) -> tuple[str, ObjectId]:
    if not key.startswith(_PREFIX) or "/" not in key:
        raise NotFound("blob", key)
    bucket, _, raw_id = key[len(_PREFIX) :].partition("/")
    try:
        return bucket, ObjectId(raw_id)
    except InvalidId as exc:
        raise NotFound("blob", key) from exc


def _whole(record: MongoDoc, pieces: list[tuple[int, bytes]]) -> bytes | None:
    """A stored file's bytes from its chunks, or None if any is missing or out of size (a
    file being deleted: its record goes first, then its chunks)."""
    pieces.sort()
    length, size = int(record["length"]), int(record["chunkSize"])
    if [n for n, _ in pieces] != list(range(-(-length // size))):
        return None
    data = b"".join(piece for _, piece in pieces)
    return data if len(data) == length else None


@dataclass(frozen=True)
class NewFile:
    """A document's original bytes, to store (`BlobStore.store_originals`)."""

    data: bytes
    filename: str
    document_id: str


@dataclass
class StoredUpload:
    """What is known about an upload once its bytes are stored; `data` holds the bytes of a
    small one (`BlobStore`'s `keep_bytes`), to carry in its pipeline event."""

    storage_key: str
    size_bytes: int
    sha256: str
    data: bytes | None = None


class OriginalUpload:
    """An upload being streamed into storage; hashes and counts bytes as they arrive."""

    def __init__(self, bucket: str, stream: AsyncGridIn, keep_bytes: int = 0) -> None:
        self._bucket = bucket
        self._stream = stream
        self._hash = hashlib.sha256()
        self.size_bytes = 0
        self._keep_bytes = keep_bytes
        self._kept: bytearray | None = bytearray() if keep_bytes else None

    async def write(self, data: bytes) -> None:
        """Appends bytes."""
        self._hash.update(data)
        self.size_bytes += len(data)
        if self._kept is not None:
            self._kept += data
            if len(self._kept) > self._keep_bytes:
                self._kept = None
        async with _gridfs_errors():
            await self._stream.write(data)

    async def finish(self) -> StoredUpload:
        """Closes the stream and returns the stored file's key, size and sha256."""
        async with _gridfs_errors():
            await self._stream.close()
        return StoredUpload(
            storage_key=_key(self._bucket, self._stream._id),
            size_bytes=self.size_bytes,
            sha256=self._hash.hexdigest(),
            data=None if self._kept is None else bytes(self._kept),
        )

    async def abort(self) -> None:
        """Discards what was written."""
        async with mongo_errors():
            await self._stream.abort()


class BlobStore:
    """Reads and writes the originals and extracted text of documents."""

    def __init__(self, db: Database, keep_bytes: int = 0) -> None:
        """`keep_bytes`: an original no larger is also handed back in memory (`StoredUpload.
        data`), for its pipeline event to carry so the extract stage reads no GridFS."""
        self._keep_bytes = keep_bytes
        self._originals = AsyncGridFSBucket(db, bucket_name=ORIGINALS_BUCKET)
        self._originals_db = db
        self._extracted = AsyncGridFSBucket(db, bucket_name=EXTRACTED_BUCKET)
        self._reads: Coalescer[str, bytes | None] = Coalescer(self._read_all, max_batch=16)

    def start_original(self, filename: str, document_id: str) -> OriginalUpload:
        """Opens a stream for an upload's bytes."""
        return OriginalUpload(
            ORIGINALS_BUCKET,
            _upload_stream(self._originals, filename, document_id),
            self._keep_bytes,
        )

    async def store_original(self, data: bytes, filename: str, document_id: str) -> StoredUpload:
        """Stores a document's original bytes in one go (records, which arrive whole)."""
        upload = self.start_original(filename, document_id)
        await upload.write(data)
        return await upload.finish()

    async def store_originals(self, files: Sequence[NewFile]) -> list[StoredUpload]:
        """Stores several documents' original bytes in two writes (records of a batch), each
        file as GridFS stores it: its chunks (`DEFAULT_CHUNK_SIZE` bytes each) first, then
        the file records that make them visible, so that no reader finds a file without its
        bytes. GridFS's own writer takes one write per chunk and one per file."""
        if not files:
            return []
        ids = [ObjectId() for _ in files]
        now = datetime.now(UTC)
        chunks = [
            {
                "files_id": file_id,
                "n": n,
                "data": Binary(file.data[start : start + DEFAULT_CHUNK_SIZE]),
            }
            for file_id, file in zip(ids, files, strict=True)
            for n, start in enumerate(range(0, len(file.data), DEFAULT_CHUNK_SIZE))
        ]
        records = [
            {
                "_id": file_id,
                "length": len(file.data),
                "chunkSize": DEFAULT_CHUNK_SIZE,
                "uploadDate": now,
                "filename": file.filename,
                "metadata": {"document_id": file.document_id},
            }
            for file_id, file in zip(ids, files, strict=True)
        ]
        db = self._originals_db
        try:
            async with mongo_errors():
                if chunks:
                    await db[f"{ORIGINALS_BUCKET}.chunks"].insert_many(chunks, ordered=False)
                await db[f"{ORIGINALS_BUCKET}.files"].insert_many(records, ordered=False)
        except BulkWriteError as exc:
            # A write the driver retried after losing the server, which had stored part of it.
            await self._forget(ids)
            raise ServiceUnavailable(
                "mongodb", f"a batch of originals was cut short: {exc}"
            ) from exc
        except ServiceUnavailable:
            with suppress(ServiceUnavailable, PyMongoError):
                await self._forget(ids)
            raise
        return [
            StoredUpload(
                _key(ORIGINALS_BUCKET, file_id),
                len(file.data),
                hashlib.sha256(file.data).hexdigest(),
                file.data if 0 < len(file.data) <= self._keep_bytes else None,
            )
            for file_id, file in zip(ids, files, strict=True)
        ]

    async def _forget(self, ids: list[ObjectId]) -> None:
        """Deletes what was stored of a batch of originals."""
        async with mongo_errors():
            await self._originals_db[f"{ORIGINALS_BUCKET}.files"].delete_many({"_id": {"$in": ids}})
            await self._originals_db[f"{ORIGINALS_BUCKET}.chunks"].delete_many(
                {"files_id": {"$in": ids}}
            )

    async def read(self, key: str) -> bytes:
        """The whole content stored under `key`, read with the others asked for at the same
        moment."""
        _parse_key(key)
        (data,) = await self._reads.submit([key])
        if data is None:
            raise NotFound("blob", key)
        return data

    async def _read_all(self, keys: list[str]) -> list[bytes | None]:
        """The content of each key (None: not stored, or not whole), by bucket in two reads."""
        found: dict[str, bytes | None] = {}
        by_bucket: dict[str, set[ObjectId]] = {}
        for key in keys:
            bucket, file_id = _parse_key(key)
            by_bucket.setdefault(bucket, set()).add(file_id)
        db = self._originals_db
        async with mongo_errors():
            for bucket, ids in by_bucket.items():
                files = {
                    record["_id"]: record
                    async for record in db[f"{bucket}.files"].find(
                        {"_id": {"$in": sorted(ids)}}, {"length": 1, "chunkSize": 1}
                    )
                }
                pieces: dict[ObjectId, list[tuple[int, bytes]]] = {file_id: [] for file_id in files}
                if any(int(record["length"]) > 0 for record in files.values()):
                    async for chunk in db[f"{bucket}.chunks"].find(
                        {"files_id": {"$in": sorted(files)}}
                    ):
                        pieces[chunk["files_id"]].append((int(chunk["n"]), bytes(chunk["data"])))
                for file_id in ids:
                    record = files.get(file_id)
                    found[_key(bucket, file_id)] = (
                        None if record is None else _whole(record, pieces[file_id])
                    )
        return [found[key] for key in keys]

    async def delete(self, key: str) -> None:
        """Deletes what is stored under `key`; a missing key is not an error."""
        bucket, file_id = _parse_key(key)
        try:
            async with mongo_errors():
                await self._bucket(bucket).delete(file_id)
        except NoFile:
            return

    async def put_extracted(self, document_id: str, extracted: ExtractedDocument) -> str:
        """Stores a document's extracted text (gzip JSON) and returns its key."""
        data = gzip.compress(extracted.model_dump_json().encode(), compresslevel=3)
        stream = _upload_stream(self._extracted, document_id, document_id)
        try:
            async with _gridfs_errors():
                await stream.write(data)
                await stream.close()
        except ServiceUnavailable:
            # What was stored of it goes, if the server can take the request now.
            with suppress(PyMongoError):
                await stream.abort()
            raise
        return _key(EXTRACTED_BUCKET, stream._id)

    async def get_extracted(self, key: str) -> ExtractedDocument:
        """A document's extracted text."""
        return ExtractedDocument.model_validate_json(gzip.decompress(await self.read(key)))

    async def delete_extracted(self, document_id: str) -> None:
        """Deletes every stored extraction of a document."""
        async with mongo_errors():
            cursor = self._extracted.find({"filename": document_id})
            ids = [grid_out._id async for grid_out in cursor]
            for file_id in ids:
                try:
                    await self._extracted.delete(file_id)
                except NoFile:
                    continue

    def _bucket(self, name: str) -> AsyncGridFSBucket:
        if name == ORIGINALS_BUCKET:
            return self._originals
        if name == EXTRACTED_BUCKET:
            return self._extracted
        raise NotFound("blob bucket", name)
