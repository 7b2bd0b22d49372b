"""`ragline`: the command line of the Ragline API, a pure HTTP client (it imports nothing from
the services, adapters or workers)."""

from ragline_cli.app import app, main

__all__ = ["app", "main"]
