"""`ragline config`: where the CLI finds the API and its token (nothing is sent)."""

from __future__ import annotations

import os

import typer

from ragline_cli import output
from ragline_cli.config import Setting, how_to_configure, resolve
from ragline_cli.context import JsonFlag, globals_of
from ragline_cli.errors import NotConfigured


def _masked(token: str) -> str:
    return token[:6] + "…" if len(token) > 10 else "…"


def config(ctx: typer.Context, json_out: JsonFlag = False) -> None:
    """Show the API URL and token the CLI would use, and where each comes from."""
    state = globals_of(ctx)
    resolved = resolve(state.url, state.token, os.environ)

    def described(setting: Setting | None, secret: bool) -> dict[str, str] | None:
        if setting is None:
            return None
        value = _masked(setting.value) if secret else setting.value
        return {"value": value, "source": setting.source}

    url, token = described(resolved.url, False), described(resolved.token, True)
    if json_out:
        output.print_json({"url": url, "token": token, "file": str(resolved.path)})
    else:
        output.show(
            output.key_values(
                [
                    ("url", f"{url['value']}  (from {url['source']})" if url else None),
                    ("token", f"{token['value']}  (from {token['source']})" if token else None),
                    ("file", resolved.path),
                ]
            )
        )
    if url is None or token is None:
        raise NotConfigured(f"incomplete: {how_to_configure(resolved.path)}")
