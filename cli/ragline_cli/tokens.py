"""`ragline tokens issue|list|revoke`: the tenant's API tokens, through the API."""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, Any

import typer

from ragline_cli import output
from ragline_cli.answers import as_json, moment
from ragline_cli.context import JsonFlag, client_of
from ragline_cli.errors import UsageError

app = typer.Typer(help="Issue, list and revoke API tokens (admin token).", no_args_is_help=True)


class Role(StrEnum):
    """What a token may do."""

    user = "user"
    admin = "admin"


@app.command("issue")
def issue(
    ctx: typer.Context,
    name: Annotated[str, typer.Argument(help="What the token is for.")],
    role: Annotated[Role, typer.Option(help="admin, or user (reads what they may).")] = Role.user,
    user_id: Annotated[
        str | None, typer.Option(help="The person a user token stands for.", show_default=False)
    ] = None,
    expires_in: Annotated[
        int | None,
        typer.Option(min=1, help="Refuse the token after this many seconds.", show_default=False),
    ] = None,
    json_out: JsonFlag = False,
) -> None:
    """Issue a token; its secret is shown this once."""
    if role is Role.user and not user_id:
        raise UsageError("a user token needs --user-id")
    body: dict[str, Any] = {"name": name, "role": role.value}
    if user_id:
        body["user_id"] = user_id
    if expires_in:
        body["expires_in_s"] = expires_in
    issued = client_of(ctx).create_token(body)
    if json_out:
        output.print_json(as_json(issued))
        return
    output.show(
        output.key_values(
            [
                ("id", issued.id),
                ("name", issued.name),
                ("role", issued.role),
                ("user", issued.user_id),
                ("expires", moment(issued.expires_at) or "never"),
                ("token", issued.token),
            ]
        )
    )
    output.say("the secret is shown only this once", style="yellow")


@app.command("list")
def list_tokens(ctx: typer.Context, json_out: JsonFlag = False) -> None:
    """List the tenant's tokens (without their secrets)."""
    tokens = client_of(ctx).list_tokens()
    if json_out:
        output.print_json([as_json(token) for token in tokens])
        return
    rows = [
        (
            t.id,
            t.name,
            t.role,
            t.user_id or t.bot_id,
            moment(t.created_at),
            moment(t.expires_at) or "never",
        )
        for t in tokens
    ]
    output.show(output.table(None, ("Id", "Name", "Role", "For", "Created", "Expires"), rows))


@app.command("revoke")
def revoke(
    ctx: typer.Context,
    token_id: Annotated[str, typer.Argument(help="The token's id (not its secret).")],
    json_out: JsonFlag = False,
) -> None:
    """Revoke a token: the next request with it is refused."""
    client_of(ctx).revoke_token(token_id)
    if json_out:
        output.print_json({"revoked": token_id})
        return
    output.say(f"revoked {token_id}")
