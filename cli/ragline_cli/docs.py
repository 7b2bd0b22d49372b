"""`ragline docs list` and `ragline reindex`: a knowledge base's documents."""

from __future__ import annotations

from enum import StrEnum
from functools import partial
from itertools import islice
from typing import Annotated

import typer
from rich.text import Text

from ragline_cli import output
from ragline_cli.answers import as_json, kb_label
from ragline_cli.connection import PAGE_SIZE
from ragline_cli.context import JsonFlag, KbOption, client_of
from ragline_cli.errors import UsageError, from_library
from ragline_cli.progress import (
    Follower,
    Item,
    Outcome,
    ProgressView,
    follow,
    summary_line,
    summary_table,
)
from ragline_client import (
    ConflictError,
    InvalidRequestError,
    NotFoundError,
    PermissionDeniedError,
)

app = typer.Typer(help="List a knowledge base's documents.", no_args_is_help=True)


class Status(StrEnum):
    """A document status to filter on (`stalled`: in progress but not moving)."""

    queued = "queued"
    extracting = "extracting"
    chunking = "chunking"
    embedding = "embedding"
    indexing = "indexing"
    indexed = "indexed"
    failed = "failed"
    stalled = "stalled"


StatusOption = Annotated[Status | None, typer.Option(help="Only documents in this status.")]


@app.command("list")
def list_documents(
    ctx: typer.Context,
    kb: KbOption,
    status: StatusOption = None,
    limit: Annotated[int, typer.Option(min=1, help="At most this many documents.")] = 50,
    all_pages: Annotated[bool, typer.Option("--all", help="Every document (no limit).")] = False,
    json_out: JsonFlag = False,
) -> None:
    """List documents, newest first, with their status, chunks and why any failed."""
    client = client_of(ctx)
    found = client.list_documents(kb, status=status.value if status else None, page_size=PAGE_SIZE)
    documents = list(found if all_pages else islice(found, limit))
    if json_out:
        output.print_json([as_json(document) for document in documents])
        return
    if not documents:
        output.say("no documents" + (f" {status.value}" if status else ""))
        return
    rows = []
    for document in documents:
        style = {"indexed": "green", "failed": "red"}.get(document.parse_status, "yellow")
        rows.append(
            (
                document.filename,
                document.version,
                Text(document.parse_status + (" (stalled)" if document.stalled else ""), style),
                document.chunk_count,
                document.id,
                document.parse_error,
            )
        )
    columns = ("File", "Version", "Status", "Chunks", "Id", "Error")
    output.show(output.table(None, columns, rows))


def reindex(
    ctx: typer.Context,
    kb: KbOption,
    document_ids: Annotated[
        list[str] | None, typer.Argument(help="The documents to re-index.", show_default=False)
    ] = None,
    status: StatusOption = None,
    wait: Annotated[
        bool, typer.Option(help="Follow the documents until indexed or failed.")
    ] = True,
    timeout: Annotated[
        float | None, typer.Option(min=1, help="Stop following after this many seconds.")
    ] = None,
    json_out: JsonFlag = False,
) -> None:
    """Run the pipeline again on documents (by id, or all in a status, e.g. --status failed)
    and follow them as `ingest` does."""
    if bool(document_ids) == bool(status):
        raise UsageError("name the documents to re-index, or pick them with --status (not both)")
    client = client_of(ctx)
    knowledge_base = client.get_knowledge_base(kb)
    if status:
        found = client.list_documents(knowledge_base.id, status=status.value, page_size=PAGE_SIZE)
        ids = [document.id for document in found]
        if not ids:
            if json_out:
                output.print_json({"kb": as_json(knowledge_base), "documents": []})
            else:
                output.say(f"no {status.value} documents in {kb_label(knowledge_base)}")
            return
    else:
        ids = list(document_ids or [])
    items = [Item(label=document_id, outcome=Outcome.WAITING) for document_id in ids]
    follower = Follower(client, knowledge_base.id, items)
    view = ProgressView(follower, uploads=0)

    def sender(item: Item) -> None:
        try:
            document = client.reindex_document(knowledge_base.id, item.label)
        except (NotFoundError, PermissionDeniedError, ConflictError, InvalidRequestError) as error:
            # This document cannot be re-indexed; the others still are.
            item.outcome, item.error = Outcome.REJECTED, from_library(error).message
            return
        item.outcome, item.document, item.label = Outcome.REINDEXED, document, document.filename

    sends = [partial(sender, item) for item in items]

    def report() -> None:
        if json_out:
            documents = [item.as_json() for item in items]
            output.print_json({"kb": as_json(knowledge_base), "documents": documents})
        else:
            output.show(summary_table(items), summary_line(items))

    code = follow(view, sends, wait=wait, timeout_s=timeout, json_out=json_out, report=report)
    raise typer.Exit(int(code))
