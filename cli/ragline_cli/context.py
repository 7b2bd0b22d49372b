"""What every command shares: the global flags, the resolved config, a client of the API."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

import typer

from ragline_cli import output
from ragline_cli.config import Config, load_from_environment
from ragline_cli.connection import RATE_LIMIT_WAIT_S, Client

JsonFlag = Annotated[
    bool, typer.Option("--json", help="Print the result as JSON on stdout (for scripts).")
]
KbOption = Annotated[
    str, typer.Option("--kb", "-k", help="The knowledge base: its code or its id.")
]


@dataclass
class Globals:
    """The root command's flags, and the config once resolved."""

    url: str | None = None
    token: str | None = None
    rate_limit_wait_s: float = RATE_LIMIT_WAIT_S
    config: Config | None = None


def globals_of(ctx: typer.Context) -> Globals:
    """The root command's state (a fresh one if the root callback did not run)."""
    root = ctx.find_root()
    if not isinstance(root.obj, Globals):
        root.obj = Globals()
    return root.obj


def _note_rate_limit(detail: str, wait_s: float) -> None:
    output.note(f"rate-limited by the API ({detail}); waiting {wait_s:g} s as it asks")


def client_of(ctx: typer.Context) -> Client:
    """A client of the configured API, closed when the command ends."""
    state = globals_of(ctx)
    state.config = load_from_environment(state.url, state.token)
    client = Client(
        state.config, rate_limit_wait_s=state.rate_limit_wait_s, on_wait=_note_rate_limit
    )
    ctx.call_on_close(client.close)
    return client
