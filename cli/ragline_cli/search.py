"""`ragline search QUERY`: a person's search with the configured token."""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, Literal

import typer
from rich.text import Text

from ragline_cli import output
from ragline_cli.answers import as_json
from ragline_cli.context import JsonFlag, client_of


class Mode(StrEnum):
    """How passages are ranked."""

    hybrid = "hybrid"
    dense = "dense"
    sparse = "sparse"


# Each mode as the client library names it.
RETRIEVAL_MODES: dict[Mode, Literal["hybrid", "dense", "sparse"]] = {
    Mode.hybrid: "hybrid",
    Mode.dense: "dense",
    Mode.sparse: "sparse",
}


def search(
    ctx: typer.Context,
    query: Annotated[str, typer.Argument(help="What to look for.")],
    kb: Annotated[
        list[str] | None,
        typer.Option(
            "--kb",
            "-k",
            help="Only this knowledge base, code or id (repeatable).",
            show_default=False,
        ),
    ] = None,
    top_k: Annotated[int, typer.Option("--top-k", "-n", min=1, max=50, help="Passages.")] = 5,
    mode: Annotated[
        Mode | None,
        typer.Option(
            help="Retrieval mode (default: the KBs' own default retrieval when they share one, "
            "else hybrid).",
            show_default=False,
        ),
    ] = None,
    threshold: Annotated[
        float | None,
        typer.Option(
            min=0, max=1, help="Minimum cosine similarity of a passage.", show_default=False
        ),
    ] = None,
    json_out: JsonFlag = False,
) -> None:
    """Search the knowledge bases the token may read."""
    answer = client_of(ctx).search(
        query,
        kb_ids=kb or None,
        top_k=top_k,
        retrieval_mode=None if mode is None else RETRIEVAL_MODES[mode],
        score_threshold=threshold,
    )
    results = answer.results
    if json_out:
        output.print_json([as_json(result) for result in results])
        return
    if not results:
        output.say("no passages found")
        return
    console = output.stdout()
    for rank, result in enumerate(results, 1):
        heading = Text(f"{rank}. ", style="bold")
        heading.append(f"{result.score:.3f}  ", style="cyan")
        heading.append(result.citation or result.document_title, style="bold")
        console.print(heading)
        console.print(Text("   " + output.truncate(result.content, 400)))
        console.print(Text(f"   {result.source} · {result.retrieval_rationale}", style="dim"))
