"""`ragline kb create|list|show`: knowledge bases."""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, Any

import typer

from ragline_cli import output
from ragline_cli.answers import as_json
from ragline_cli.context import JsonFlag, client_of
from ragline_client.models import KnowledgeBaseOut

app = typer.Typer(help="Create, list and show knowledge bases.", no_args_is_help=True)


class Visibility(StrEnum):
    """Who reads an admin's upload when it does not say."""

    shared = "shared"
    private = "private"
    restricted = "restricted"


def _rows(kb: KnowledgeBaseOut) -> list[tuple[str, object]]:
    return [
        ("id", kb.id),
        ("code", kb.code),
        ("name", kb.name),
        ("description", kb.description),
        ("status", kb.status),
        ("language", kb.default_language),
        ("visibility", kb.default_visibility),
        ("documents", kb.document_count),
        ("chunks", kb.chunk_count),
    ]


@app.command("create")
def create(
    ctx: typer.Context,
    name: Annotated[str, typer.Argument(help="The knowledge base's name.")],
    code: Annotated[
        str | None,
        typer.Option(help="A short name to use instead of the id (lowercase, digits, dashes)."),
    ] = None,
    description: Annotated[str, typer.Option(help="What it holds.")] = "",
    language: Annotated[str, typer.Option(help="Its documents' language.")] = "en",
    visibility: Annotated[
        Visibility, typer.Option(help="Who reads an admin's upload that does not say.")
    ] = Visibility.shared,
    json_out: JsonFlag = False,
) -> None:
    """Create a knowledge base (admin token)."""
    body: dict[str, Any] = {
        "name": name,
        "description": description,
        "default_language": language,
        "default_visibility": visibility.value,
    }
    if code:
        body["code"] = code
    kb = client_of(ctx).create_knowledge_base(body)
    if json_out:
        output.print_json(as_json(kb))
        return
    code = f", code {kb.code}" if kb.code else ""
    output.say(f"created knowledge base {kb.name!r}: id {kb.id}{code}")


@app.command("list")
def list_kbs(ctx: typer.Context, json_out: JsonFlag = False) -> None:
    """List the tenant's knowledge bases, newest first."""
    kbs = client_of(ctx).list_knowledge_bases()
    if json_out:
        output.print_json([as_json(kb) for kb in kbs])
        return
    if not kbs:
        output.say("no knowledge bases yet: `ragline kb create NAME`")
        return
    rows = [(kb.code, kb.name, kb.status, kb.document_count, kb.chunk_count, kb.id) for kb in kbs]
    output.show(output.table(None, ("Code", "Name", "Status", "Documents", "Chunks", "Id"), rows))


@app.command("show")
def show(
    ctx: typer.Context,
    kb: Annotated[str, typer.Argument(help="Its code or id.")],
    json_out: JsonFlag = False,
) -> None:
    """Show one knowledge base."""
    found = client_of(ctx).get_knowledge_base(kb)
    if json_out:
        output.print_json(as_json(found))
        return
    output.show(output.key_values(_rows(found)))
