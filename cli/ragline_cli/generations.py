"""`ragline generations list|show|migrate|watch|cancel|drop`: the vector store's generations,
one per embedding model, and changing the model without downtime."""

from __future__ import annotations

import time
from enum import StrEnum
from typing import Annotated

import typer
from rich.live import Live
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

from ragline_cli import output
from ragline_cli.answers import as_json
from ragline_cli.connection import Client
from ragline_cli.context import JsonFlag, client_of
from ragline_cli.errors import ExitCode
from ragline_client.models import GenerationOut

app = typer.Typer(
    help="The vector store's generations (one per embedding model): change the model.",
    no_args_is_help=True,
)

# How often `watch` asks for a build's progress.
POLL_S = 2.0
# The states a generation leaves a build in.
ENDED = frozenset({"live", "cancelled", "retired", "dropped"})


class Provider(StrEnum):
    """Where a model runs."""

    local = "local"
    gemini = "gemini"
    hashed = "hashed"


def _model(found: GenerationOut) -> str:
    """The model as the API names it: `provider:model/dimensions`."""
    model = found.generation.model
    if model.model:
        return f"{model.provider}:{model.model}/{model.dimensions}"
    if model.provider == "local":
        return f"local:packaged/{model.dimensions}"
    return f"{model.provider}/{model.dimensions}"


def _progress(found: GenerationOut) -> str:
    if found.generation.state != "building":
        return ""
    progress = found.generation.progress
    if progress is None:
        return ""
    copied = f"{progress.done or 0:,} of {progress.total or 0:,} copied"
    if progress.copied:
        return f"{copied}; check pass {progress.check_pass or 0} mended {progress.mended or 0}"
    left = f", {found.seconds_left / 60:.0f} min left" if found.seconds_left is not None else ""
    return f"{copied} at {progress.rate_per_s or 0:.0f}/s{left}"


@app.command("list")
def list_generations(ctx: typer.Context, json_out: JsonFlag = False) -> None:
    """List the generations, oldest first (admin token)."""
    found = client_of(ctx).list_generations()
    if json_out:
        output.print_json([as_json(g) for g in found])
        return
    rows = [(g.generation.number, g.generation.state, _model(g), _progress(g)) for g in found]
    output.show(output.table(None, ("Generation", "State", "Model", "Progress"), rows))


@app.command("show")
def show(
    ctx: typer.Context,
    number: Annotated[int, typer.Argument(help="The generation's number.")],
    json_out: JsonFlag = False,
) -> None:
    """Show one generation and a build's progress (admin token)."""
    found = client_of(ctx).get_generation(number)
    if json_out:
        output.print_json(as_json(found))
        return
    output.show(
        output.key_values(
            [
                ("generation", found.generation.number),
                ("state", found.generation.state),
                ("model", _model(found)),
                ("progress", _progress(found)),
                ("reason", found.generation.reason),
            ]
        )
    )


@app.command("migrate")
def migrate(
    ctx: typer.Context,
    provider: Annotated[Provider, typer.Option(help="Where the new model runs.")],
    dimensions: Annotated[int, typer.Option(min=1, help="The size of its vectors.")],
    model: Annotated[
        str, typer.Option(help="The provider's model (local: a path; empty: the packaged one).")
    ] = "",
    follow: Annotated[
        bool, typer.Option(help="Show the build's progress until searches switch.")
    ] = True,
    json_out: JsonFlag = False,
) -> None:
    """Change the embedding model without downtime (the deployment's admin token): a new
    generation is built in the background from the chunks already made, searches keep the
    live one until it is complete, then switch at once."""
    client = client_of(ctx)
    started = client.start_generation(provider=provider.value, model=model, dimensions=dimensions)
    if json_out:
        output.print_json(as_json(started))
        return
    output.say(f"generation {started.generation.number} is being built for {_model(started)}")
    if follow:
        _follow(client, started.generation.number)


@app.command("watch")
def watch(
    ctx: typer.Context,
    number: Annotated[int, typer.Argument(help="The generation being built.")],
) -> None:
    """Show a build's progress until it is live or cancelled (admin token)."""
    _follow(client_of(ctx), number)


@app.command("cancel")
def cancel(
    ctx: typer.Context,
    number: Annotated[int, typer.Argument(help="The generation being built.")],
) -> None:
    """Stop a build; the live generation serves on as it was (the deployment's admin token)."""
    found = client_of(ctx).cancel_generation(number)
    output.say(f"generation {number} is {found.generation.state}")


@app.command("drop")
def drop(
    ctx: typer.Context,
    number: Annotated[int, typer.Argument(help="A retired generation.")],
) -> None:
    """Drop a retired generation's store now, not after its grace period (the deployment's
    admin token)."""
    client_of(ctx).drop_generation(number)
    output.say(f"generation {number} is dropped within seconds")


def _follow(client: Client, number: int) -> None:
    """A progress bar of the copy, then the check passes, until the build ends."""
    bar = Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[status]}"),
        console=output.stderr(),
    )
    task = bar.add_task(f"generation {number}", total=None, status="")
    with Live(bar, console=output.stderr(), transient=False):
        while True:
            found = client.get_generation(number)
            progress = found.generation.progress
            if progress is not None:
                bar.update(
                    task,
                    completed=progress.done or 0,
                    total=progress.total or None,
                    status=_progress(found),
                )
            if found.generation.state in ENDED:
                break
            time.sleep(POLL_S)
    state = found.generation.state
    if state in ("live", "retired", "dropped"):
        output.say(f"generation {number} ({_model(found)}) went live")
        return
    output.warn(f"generation {number} was {state}: {found.generation.reason or ''}")
    raise typer.Exit(ExitCode.FAILED)
