"""`ragline`: the command line of the Ragline API, built on its client library
(`ragline_client`); it imports nothing of the server (services, adapters, workers)."""

from ragline_cli.app import app, main

__all__ = ["app", "main"]
