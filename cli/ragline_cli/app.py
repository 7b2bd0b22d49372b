"""The `ragline` command: its global flags, its commands, and the one place errors become
messages and exit codes."""

from __future__ import annotations

from typing import Annotated, Any

import typer
from typer.core import TyperGroup

from ragline_cli import backups, docs, evaluate, generations, ingest, kb, output, search, tokens
from ragline_cli.config_show import config
from ragline_cli.connection import RATE_LIMIT_WAIT_S
from ragline_cli.context import Globals, globals_of
from ragline_cli.errors import ApiError, CliError, ExitCode, from_library
from ragline_client import RaglineError

EXIT_CODES = """Exit codes:

- 0: done
- 1: a document failed, a file was refused, or an evaluation scored under --fail-under
- 2: bad arguments or input file
- 3: not configured (no API URL or token)
- 4: the API refused the request (not found, conflict, invalid, too large, unsupported type)
- 5: the API refused the token (401, 403)
- 6: the API could not be reached, failed (5xx), or kept rate-limiting
- 7: --timeout passed with documents still in progress
- 130: interrupted"""


def _explained(error: CliError, state: Globals) -> CliError:
    """Adds where a token the API did not know (401) came from."""
    if isinstance(error, ApiError) and error.status == 401 and state.config is not None:
        error.message += f"; the token from {state.config.token.source} was refused"
    return error


class RaglineGroup(TyperGroup):
    """The root command: a CliError (or a client library's error) from any command is shown
    as one line on stderr and becomes its exit code; no traceback."""

    def invoke(self, ctx: Any) -> Any:
        """Runs the command, turning typed errors into messages and exit codes."""
        try:
            return super().invoke(ctx)
        except (CliError, RaglineError) as raised:
            error = raised if isinstance(raised, CliError) else from_library(raised)
            output.report_error(_explained(error, globals_of(ctx)))
            raise typer.Exit(int(error.exit_code)) from None
        except KeyboardInterrupt:
            output.stderr().print("interrupted: what the API accepted goes on being processed")
            raise typer.Exit(int(ExitCode.INTERRUPTED)) from None


app = typer.Typer(
    cls=RaglineGroup,
    name="ragline",
    help="Ragline from the command line: knowledge bases, ingestion, search, evaluations, "
    "tokens, backups and restores, over the HTTP API.\n\n"
    "Where the API is and which token to use: --url and --token, else RAGLINE_URL and "
    "RAGLINE_TOKEN, else url and token in ~/.config/ragline/config.toml (under "
    "XDG_CONFIG_HOME if set); `ragline config` shows what is found.",
    epilog=EXIT_CODES,
    no_args_is_help=True,
    add_completion=False,
    rich_markup_mode="markdown",
    pretty_exceptions_show_locals=False,
)


@app.callback()
def root(
    ctx: typer.Context,
    url: Annotated[
        str | None,
        typer.Option(help="The API's base URL (env RAGLINE_URL).", show_default=False),
    ] = None,
    token: Annotated[
        str | None,
        typer.Option(help="A bearer token (env RAGLINE_TOKEN).", show_default=False),
    ] = None,
    rate_limit_wait: Annotated[
        float,
        typer.Option(
            min=0, help="Seconds one request may wait out the API's rate limits (429) in all."
        ),
    ] = RATE_LIMIT_WAIT_S,
) -> None:
    """Flags beat RAGLINE_URL / RAGLINE_TOKEN, which beat ~/.config/ragline/config.toml."""
    ctx.obj = Globals(url=url, token=token, rate_limit_wait_s=rate_limit_wait)


app.command("ingest")(ingest.ingest)
app.command("search")(search.search)
app.add_typer(kb.app, name="kb")
app.add_typer(docs.app, name="docs")
app.command("reindex")(docs.reindex)
app.add_typer(tokens.app, name="tokens")
app.command("eval")(evaluate.evaluate)
app.command("config")(config)
app.command("backup")(backups.backup)
app.command("restore")(backups.restore)
app.add_typer(generations.app, name="generations")


def main() -> None:
    """The console script."""
    app()
