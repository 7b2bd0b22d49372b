"""`ragline ingest PATH... --kb KB`: upload files and follow them until indexed or failed."""

from __future__ import annotations

from functools import partial
from typing import Annotated, Any

import typer

from ragline_cli import output
from ragline_cli.connection import PAGE_SIZE, Client
from ragline_cli.context import JsonFlag, KbOption, client_of
from ragline_cli.errors import UnreadableFile, from_library
from ragline_cli.files import LocalFile, Selection, select, sha256_of
from ragline_cli.progress import (
    Follower,
    Item,
    Outcome,
    ProgressView,
    counts,
    follow,
    summary_line,
    summary_table,
)
from ragline_client import (
    InvalidRequestError,
    PayloadTooLargeError,
    Ragline,
    UnsupportedMediaTypeError,
)
from ragline_client.models import DocumentOut, KnowledgeBaseOut


def _known_documents(client: Ragline, kb_id: str) -> dict[str, DocumentOut]:
    """The KB's documents by the SHA-256 of their bytes (the newest of each)."""
    known: dict[str, DocumentOut] = {}
    for document in client.list_documents(kb_id, page_size=PAGE_SIZE):
        if document.sha256 and document.parse_status != "deleting":
            known.setdefault(document.sha256, document)
    return known


class Uploads:
    """Sends the files the KB does not hold yet; a file of bytes sent earlier in the run waits
    for that upload and shares its document."""

    def __init__(self, client: Client, kb: KnowledgeBaseOut) -> None:
        self.client = client
        self.kb = kb
        self.twins: dict[str, list[Item]] = {}

    def send(self, item: Item, file: LocalFile, sha256: str) -> None:
        """Uploads one file and records what the API made of it."""
        try:
            uploaded = self.client.upload(self.kb.id, file.path, file.upload_name)
        except UnreadableFile as error:
            item.outcome, item.error = Outcome.REJECTED, error.message
        except (PayloadTooLargeError, UnsupportedMediaTypeError, InvalidRequestError) as error:
            # This file is refused; the others still go.
            item.outcome, item.error = Outcome.REJECTED, from_library(error).message
        else:
            item.document = uploaded.document
            if uploaded.already_there:
                item.outcome = Outcome.UNCHANGED
            elif uploaded.document.version > 1:
                item.outcome = Outcome.NEW_VERSION
            else:
                item.outcome = Outcome.NEW
        for twin in self.twins.get(sha256, []):
            twin.document, twin.error = item.document, item.error
            twin.outcome = Outcome.REJECTED if item.error else Outcome.UNCHANGED


def ingest(
    ctx: typer.Context,
    paths: Annotated[
        list[str],
        typer.Argument(help="Files, folders, or glob patterns in quotes ('docs/**/*.md')."),
    ],
    kb: KbOption,
    recursive: Annotated[
        bool, typer.Option("--recursive", "-r", help="Take the files of subfolders too.")
    ] = False,
    include: Annotated[
        list[str] | None,
        typer.Option(help="Only files matching this pattern (repeatable).", show_default=False),
    ] = None,
    exclude: Annotated[
        list[str] | None,
        typer.Option(
            help="Leave out files matching this pattern (repeatable).", show_default=False
        ),
    ] = None,
    path_names: Annotated[
        bool,
        typer.Option(
            "--path-names",
            help="Name each upload by its path in the folder (guides/intro.md as "
            "guides--intro.md), for trees holding files of the same name.",
        ),
    ] = False,
    wait: Annotated[
        bool, typer.Option(help="Follow the documents until indexed or failed.")
    ] = True,
    timeout: Annotated[
        float | None, typer.Option(min=1, help="Stop following after this many seconds.")
    ] = None,
    json_out: JsonFlag = False,
) -> None:
    """Upload files to a knowledge base and show their progress through the pipeline.

    Files whose bytes the KB already holds are not sent (reported as unchanged); a file with
    the name of an earlier one and new content becomes its new version. Exits 1 if any
    document failed or any file was refused.
    """
    selection = select(
        paths,
        recursive=recursive,
        include=include or [],
        exclude=exclude or [],
        path_names=path_names,
    )
    client = client_of(ctx)
    knowledge_base = client.get_knowledge_base(kb)
    known = _known_documents(client, knowledge_base.id)
    uploads = Uploads(client, knowledge_base)
    items: list[Item] = []
    sends = []
    first_of: dict[str, Item] = {}
    for file in selection.files:
        item = Item(label=file.shown, outcome=Outcome.WAITING, path=str(file.path))
        items.append(item)
        try:
            sha256 = sha256_of(file.path)
        except UnreadableFile as error:
            item.outcome, item.error = Outcome.REJECTED, error.message
            continue
        if sha256 in known:
            item.outcome, item.document = Outcome.UNCHANGED, known[sha256]
        elif sha256 in first_of:
            uploads.twins.setdefault(sha256, []).append(item)
        else:
            first_of[sha256] = item
            sends.append(partial(uploads.send, item, file, sha256))
    unchanged = sum(1 for item in items if item.outcome is Outcome.UNCHANGED)
    follower = Follower(client, knowledge_base.id, items)
    view = ProgressView(follower, uploads=len(sends), unchanged=unchanged)

    def report() -> None:
        if json_out:
            output.print_json(_as_json(knowledge_base, items, selection))
            return
        if selection.skipped:
            output.say(
                f"left out {len(selection.skipped)} files of types Ragline does not ingest: "
                + ", ".join(shown for shown, _ in selection.skipped[:5])
                + (" …" if len(selection.skipped) > 5 else ""),
                style="dim",
            )
        output.show(summary_table(items), summary_line(items))

    code = follow(view, sends, wait=wait, timeout_s=timeout, json_out=json_out, report=report)
    raise typer.Exit(int(code))


def _as_json(kb: KnowledgeBaseOut, items: list[Item], selection: Selection) -> dict[str, Any]:
    return {
        "kb": {"id": kb.id, "code": kb.code, "name": kb.name},
        "files": [item.as_json() for item in items],
        "skipped": [{"path": shown, "reason": reason} for shown, reason in selection.skipped],
        "counts": counts(items),
    }
