"""The embedded store in a process of its own (`StoreServer`), and the store every other process
uses to reach it (`RemoteVectorStore`).

The embedded engine's binding holds the GIL for much of every call (measured: half the GIL's
time in an API process at 32 searches at once went to the engine's calls), so in the API
process the store takes turns with every request's Python, and the machine's second core
waits. In a process of its own its calls run beside the API's, on the other core.

One local call per store operation: each request and each answer is a pickle, framed by its
length, over a Unix socket in the run directory (made only for its owner: a process that can
reach it is the same user, as a process that can read the store's files is). Requests of every
caller run concurrently in the server, so the engine's batching of rankings still works across
API processes. A call that the server cannot answer (it is gone or restarting) fails with
`ServiceUnavailable`; the next call connects again.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import os
import pickle
import struct
from collections.abc import AsyncIterator, Callable, Collection, Sequence
from pathlib import Path
from typing import Any

from core.errors import PermanentError, RaglineError, ServiceUnavailable
from core.filters import Filter, SearchScope
from infra.vectorstore.base import (
    ChunkPoint,
    PublishedDocument,
    Rankings,
    RankQuery,
    ScoredChunk,
    StoredChunk,
    VectorQuery,
    WithdrawnDocument,
)
from infra.vectorstore.edge import EdgeVectorStore
from schemas.chunks import ChunkPayload

log = logging.getLogger(__name__)

_LENGTH = struct.Struct(">I")
# What a caller may ask of a served store: the `VectorStore` protocol.
CALLS = frozenset(
    {
        "ensure_collection",
        "drop",
        "upsert",
        "publish_document",
        "withdraw_document",
        "delete",
        "set_readers",
        "delete_points",
        "document_chunks",
        "search",
        "rank",
        "read",
        "count",
        "export_page",
        "get_points",
    }
)


async def _send(writer: asyncio.StreamWriter, message: Any) -> None:
    data = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
    writer.write(_LENGTH.pack(len(data)) + data)
    await writer.drain()


async def _receive(reader: asyncio.StreamReader) -> Any:
    (length,) = _LENGTH.unpack(await reader.readexactly(_LENGTH.size))
    return pickle.loads(await reader.readexactly(length))  # noqa: S301 - the store's own socket


class StoreNotOpen(ServiceUnavailable):
    """The store process has not opened the store called for (it started again since): the
    caller opens it and calls again."""

    def __init__(self, name: str) -> None:
        super().__init__("vector store", f"the store {name!r} is not open in the store process")
        self.name = name

    def __reduce__(self) -> tuple[Any, ...]:
        return (StoreNotOpen, (self.name,))


class StoreServer:
    """Serves embedded stores on a Unix socket: each call names its store (a generation's:
    `schemas.index_generations`), which the caller's `ensure_collection` opened."""

    def __init__(
        self, open_store: Callable[[str, int], EdgeVectorStore], socket_path: Path
    ) -> None:
        """`open_store(name, dimensions)`: the (unopened) store called `name`."""
        self._open_store = open_store
        self._stores: dict[str, EdgeVectorStore] = {}
        self._opening = asyncio.Lock()
        self._path = socket_path
        self._server: asyncio.Server | None = None

    async def start(self) -> None:
        """Listens (a socket file left by an earlier run is replaced)."""
        self._path.parent.mkdir(parents=True, exist_ok=True)
        with contextlib.suppress(FileNotFoundError):
            self._path.unlink()
        # Only its owner may connect: the socket is made with no other permissions.
        previous = os.umask(0o177)
        try:
            self._server = await asyncio.start_unix_server(self._serve, path=str(self._path))
        finally:
            os.umask(previous)
        log.info("vector store served on %s", self._path)

    async def close(self) -> None:
        """Stops listening, then closes the stores."""
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
            self._server = None
        stores, self._stores = self._stores, {}
        for store in stores.values():
            await store.close()

    async def _store(self, name: str, method: str, args: tuple[Any, ...]) -> EdgeVectorStore:
        """The store a call names: opened by `ensure_collection` (its argument: the vector
        size), and by `drop` if it was not open."""
        store = self._stores.get(name)
        if store is not None:
            return store
        if method not in ("ensure_collection", "drop"):
            raise StoreNotOpen(name)
        async with self._opening:
            if name not in self._stores:
                store = self._open_store(name, *args)
                await store.ensure_collection()
                self._stores[name] = store
            return self._stores[name]

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        lock = asyncio.Lock()
        calls: set[asyncio.Task[None]] = set()
        try:
            while True:
                try:
                    call_id, name, method, args = await _receive(reader)
                except (asyncio.IncompleteReadError, ConnectionError):
                    return
                task = asyncio.create_task(self._answer(writer, lock, call_id, name, method, args))
                calls.add(task)
                task.add_done_callback(calls.discard)
        finally:
            for task in calls:
                task.cancel()
            writer.close()

    async def _answer(
        self,
        writer: asyncio.StreamWriter,
        lock: asyncio.Lock,
        call_id: int,
        name: str,
        method: str,
        args: tuple[Any, ...],
    ) -> None:
        try:
            if method not in CALLS:
                raise PermanentError(f"the vector store has no call {method!r}")
            store = await self._store(name, method, args)
            if method == "ensure_collection":
                answer: Any = (True, None)
            elif method == "drop":
                self._stores.pop(name, None)
                await store.drop()
                answer = (True, None)
            else:
                answer = (True, await getattr(store, method)(*args))
        except RaglineError as exc:
            answer = (False, exc)
        except Exception as exc:  # answered, not raised: the caller decides
            log.warning("vector store call %s failed: %s", method, exc)
            answer = (False, ServiceUnavailable("vector store", str(exc)))
        async with lock:
            with contextlib.suppress(ConnectionError):
                await _send(writer, (call_id, *answer))


class RemoteVectorStore:
    """A `VectorStore` served by a store process on a Unix socket (`StoreServer`)."""

    def __init__(
        self, socket_path: Path, name: str, dimensions: int, connect_timeout_s: float = 30.0
    ) -> None:
        """The store called `name` (for vectors of `dimensions`) in the store process."""
        self._name = name
        self._dimensions = dimensions
        self._path = socket_path
        self._connect_timeout_s = connect_timeout_s
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None
        self._receiver: asyncio.Task[None] | None = None
        self._pending: dict[int, asyncio.Future[Any]] = {}
        self._ids = itertools.count()
        self._lock = asyncio.Lock()

    async def ensure_collection(self) -> None:
        """Connects (waiting up to the connect timeout for the store process to listen)."""
        deadline = asyncio.get_running_loop().time() + self._connect_timeout_s
        while True:
            try:
                await self._connect()
                break
            except ServiceUnavailable:
                if asyncio.get_running_loop().time() > deadline:
                    raise
                await asyncio.sleep(0.1)
        await self._call("ensure_collection", self._dimensions)

    async def drop(self) -> None:
        """Has the store process delete the store, then disconnects."""
        await self._call("drop", self._dimensions)
        await self.close()

    async def upsert(self, points: Sequence[ChunkPoint]) -> None:
        await self._call("upsert", list(points))

    async def publish_document(self, document: PublishedDocument) -> None:
        await self._call("publish_document", document)

    async def withdraw_document(self, document: WithdrawnDocument) -> None:
        await self._call("withdraw_document", document)

    async def delete(self, selector: Filter) -> None:
        await self._call("delete", selector)

    async def set_readers(self, selector: Filter, readers: Sequence[str]) -> None:
        await self._call("set_readers", selector, list(readers))

    async def delete_points(self, point_ids: Sequence[str]) -> None:
        await self._call("delete_points", list(point_ids))

    async def document_chunks(
        self, tenant_id: str, document_id: str, limit: int = 10_000
    ) -> list[ChunkPayload]:
        found: list[ChunkPayload] = await self._call(
            "document_chunks", tenant_id, document_id, limit
        )
        return found

    async def search(self, query: VectorQuery) -> list[ScoredChunk]:
        found: list[ScoredChunk] = await self._call("search", query)
        return found

    async def rank(self, query: RankQuery) -> Rankings:
        rankings: Rankings = await self._call("rank", query)
        return rankings

    async def read(
        self, scope: SearchScope, point_ids: Sequence[str], dense: Collection[str] = ()
    ) -> dict[str, StoredChunk]:
        found: dict[str, StoredChunk] = await self._call(
            "read", scope, list(point_ids), frozenset(dense)
        )
        return found

    async def count(self, selector: Filter) -> int:
        counted: int = await self._call("count", selector)
        return counted

    async def export_points(
        self, selector: Filter | None, batch: int = 256
    ) -> AsyncIterator[list[ChunkPoint]]:
        offset: str | None = None
        while True:
            points, offset = await self.export_page(selector, batch, offset)
            if points:
                yield points
            if offset is None:
                return

    async def get_points(self, point_ids: Sequence[str]) -> list[ChunkPoint]:
        found: list[ChunkPoint] = await self._call("get_points", list(point_ids))
        return found

    async def export_page(
        self, selector: Filter | None, batch: int, offset: str | None
    ) -> tuple[list[ChunkPoint], str | None]:
        page: tuple[list[ChunkPoint], str | None] = await self._call(
            "export_page", selector, batch, offset
        )
        return page

    async def close(self) -> None:
        """Disconnects (the store process keeps the store)."""
        await self._disconnect(ServiceUnavailable("vector store", "the connection was closed"))

    async def _connect(self) -> None:
        async with self._lock:
            if self._writer is not None:
                return
            try:
                reader, writer = await asyncio.open_unix_connection(str(self._path))
            except (OSError, ConnectionError) as exc:
                raise ServiceUnavailable(
                    "vector store", f"the store process at {self._path} does not answer: {exc}"
                ) from exc
            self._reader, self._writer = reader, writer
            self._receiver = asyncio.create_task(self._receive_answers(reader))

    async def _receive_answers(self, reader: asyncio.StreamReader) -> None:
        try:
            while True:
                call_id, ok, value = await _receive(reader)
                future = self._pending.pop(call_id, None)
                if future is None or future.done():
                    continue
                if ok:
                    future.set_result(value)
                else:
                    future.set_exception(value)
        except (asyncio.IncompleteReadError, ConnectionError, OSError) as exc:
            gone = ServiceUnavailable("vector store", f"the store process went away: {exc}")
            await self._disconnect(gone, from_receiver=True)

    async def _disconnect(self, error: Exception, from_receiver: bool = False) -> None:
        writer, self._writer, self._reader = self._writer, None, None
        receiver, self._receiver = self._receiver, None
        pending, self._pending = self._pending, {}
        for future in pending.values():
            if not future.done():
                future.set_exception(error)
        if writer is not None:
            writer.close()
        if receiver is not None and not from_receiver:
            receiver.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await receiver

    async def _call(self, method: str, *args: Any) -> Any:
        try:
            return await self._send_call(method, *args)
        except StoreNotOpen:
            # The store process started again: open the store there, and call once more.
            await self._send_call("ensure_collection", self._dimensions)
            return await self._send_call(method, *args)

    async def _send_call(self, method: str, *args: Any) -> Any:
        await self._connect()
        writer = self._writer
        if writer is None:
            raise ServiceUnavailable("vector store", "not connected to the store process")
        call_id = next(self._ids)
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._pending[call_id] = future
        try:
            await _send(writer, (call_id, self._name, method, args))
        except (ConnectionError, OSError) as exc:
            self._pending.pop(call_id, None)
            await self._disconnect(ServiceUnavailable("vector store", str(exc)))
            raise ServiceUnavailable(
                "vector store", f"cannot reach the store process: {exc}"
            ) from exc
        return await future
