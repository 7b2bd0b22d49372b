"""Output: tables and lines for people on stdout, JSON for scripts, errors on stderr.

Text that comes from the API or from files is never read as rich markup (a title with
`[brackets]` prints as it is).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable, Sequence
from typing import Any

from rich.console import Console, RenderableType
from rich.table import Table
from rich.text import Text

from ragline_cli.errors import CliError


def stdout() -> Console:
    """A console on the current stdout (made per use, so test runners' streams are seen)."""
    return Console(highlight=False)


def stderr() -> Console:
    """A console on the current stderr."""
    return Console(stderr=True, highlight=False)


def plain(value: object) -> Text:
    """A value as literal text (no markup), `-` for nothing."""
    return Text("-" if value is None or value == "" else str(value))


def print_json(value: Any) -> None:
    """Writes one JSON document to stdout (plain text: no colour, no wrapping)."""
    sys.stdout.write(json.dumps(value, indent=2, ensure_ascii=False, default=str) + "\n")
    sys.stdout.flush()


def table(title: str | None, columns: Sequence[str], rows: Iterable[Sequence[object]]) -> Table:
    """A table of literal cells."""
    result = Table(title=title, title_justify="left", show_edge=False, header_style="bold")
    for column in columns:
        result.add_column(column, overflow="fold")
    for row in rows:
        result.add_row(*(cell if isinstance(cell, Text) else plain(cell) for cell in row))
    return result


def key_values(pairs: Iterable[tuple[str, object]]) -> Table:
    """Two columns: a field's name, its value."""
    result = Table(show_header=False, show_edge=False, box=None, pad_edge=False)
    result.add_column(style="bold")
    result.add_column(overflow="fold")
    for key, value in pairs:
        result.add_row(Text(key), value if isinstance(value, Text) else plain(value))
    return result


def show(*renderables: RenderableType) -> None:
    """Prints for a person on stdout."""
    console = stdout()
    for renderable in renderables:
        console.print(renderable)


def say(message: str, style: str | None = None) -> None:
    """One line for a person on stdout."""
    stdout().print(Text(message, style=style or ""))


def note(message: str) -> None:
    """A passing remark on stderr (stdout stays the result)."""
    stderr().print(Text(message, style="dim"))


def warn(message: str) -> None:
    """A warning on stderr."""
    stderr().print(Text(f"warning: {message}", style="yellow"))


def report_error(error: CliError) -> None:
    """An error on stderr: its message only, never a traceback."""
    stderr().print(Text(f"error: {error.message}", style="red"))


def truncate(text: str, limit: int) -> str:
    """Whitespace collapsed, cut to `limit` characters with an ellipsis."""
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1].rstrip() + "…"
