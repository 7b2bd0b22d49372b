"""MkDocs hook: the CLI reference, from the `ragline` command's typer app.

`<!-- generated: cli -->` on a page becomes every command and subcommand, as `--help` shows
them: usage, help text, arguments and options (with their defaults, bounds and choices), and
the epilog. It is read from the app when the site is built, so it cannot drift from the code.
"""

from __future__ import annotations

import importlib.util
import inspect
from collections.abc import Iterator
from typing import Any

MARKER = "<!-- generated: cli -->"
PROGRAM = "ragline"


def cli_app() -> Any:
    """The `ragline` command's typer app (the one place it is imported)."""
    from ragline_cli import app

    return app


def commands(app: Any = None) -> Iterator[tuple[str, Any, Any]]:
    """Every command of the app, the root first, each with its full name and a context."""
    import typer
    from typer.core import TyperGroup
    from typer.main import get_command

    root = get_command(app or cli_app())

    def walk(name: str, command: Any, parent: Any) -> Iterator[tuple[str, Any, Any]]:
        context = typer.Context(command, info_name=name.rsplit(" ", 1)[-1], parent=parent)
        yield name, command, context
        if isinstance(command, TyperGroup):
            for sub in command.list_commands(context):
                child = command.get_command(context, sub)
                if child is not None and not child.hidden:
                    yield from walk(f"{name} {sub}", child, context)

    yield from walk(PROGRAM, root, None)


def render(app: Any = None) -> str:
    """The reference: a section per command."""
    from typer.core import TyperGroup

    package = package_of(app)
    intro = f"Generated from the `{package}` package's typer app, as `{PROGRAM} --help` shows it"
    if importlib.util.find_spec(f"{package}.__main__") is not None:
        intro += f"; `python -m {package}` runs the same command"
    parts = [intro + "."]
    for name, command, context in commands(app):
        depth = name.count(" ")
        parts.append(f"{'#' * min(2 + depth, 4)} `{name}` {{#{anchor(name)}}}")
        if command.help:
            parts.append(inspect.cleandoc(command.help))
        usage = " ".join(command.collect_usage_pieces(context))
        parts.append(f"```\n{name} {usage}\n```")
        arguments: list[str] = []
        options: list[str] = []
        for parameter in command.get_params(context):
            record = parameter.get_help_record(context)
            if record is None or record[0] == "--help":
                continue
            row = f"| `{_cell(record[0])}` | {_cell(record[1])} |"
            (arguments if parameter.param_type_name == "argument" else options).append(row)
        if arguments:
            parts.append("| argument | |\n|---|---|\n" + "\n".join(arguments))
        if options:
            parts.append("| option | |\n|---|---|\n" + "\n".join(options))
        if isinstance(command, TyperGroup):
            rows = [
                f"| [`{sub}`](#{anchor(f'{name} {sub}')}) | "
                f"{_cell(_first_paragraph(child.help or ''))} |"
                for sub in command.list_commands(context)
                if (child := command.get_command(context, sub)) is not None and not child.hidden
            ]
            parts.append("| command | |\n|---|---|\n" + "\n".join(rows))
        if command.epilog:
            parts.append(inspect.cleandoc(command.epilog))
    return "\n\n".join(parts) + "\n"


def package_of(app: Any = None) -> str:
    """The top-level package the app is defined in (`ragline_cli`)."""
    from typer.main import get_command

    callback = get_command(app or cli_app()).callback
    return str(getattr(callback, "__module__", "") or "").split(".")[0]


def _first_paragraph(text: str) -> str:
    return inspect.cleandoc(text).split("\n\n", 1)[0]


def anchor(name: str) -> str:
    """A command's heading id: `ragline-kb-create`."""
    return name.replace(" ", "-")


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


# -- MkDocs events --------------------------------------------------------------------------------


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    """Fills the marker with the reference."""
    if MARKER not in markdown:
        return markdown
    return markdown.replace(MARKER, render())
