"""Runs one worker process: `python -m workers <name>`, until SIGINT or SIGTERM.

The names are the stages (`records`, `crawl`, `extract`, `chunk`, `embed`, `index`; each one's
home is `workers/<name>/`) and the relay (`relay`: the outbox and recovery, not a stage). Run
as many of each as the load needs: a stage's processes share its topic's partitions.
"""

from __future__ import annotations

import argparse
import asyncio

from infra.settings import Settings
from workers.hosting import StageProcess, stage_app

WORKERS = ("relay", "records", "crawl", "extract", "chunk", "embed", "index")


def stage(name: str) -> StageProcess:
    """The stage called `name` (its modules are imported only by the process that runs it: the
    embed worker's model libraries stay out of the others)."""
    match name:
        case "records":
            from workers.records.app import RECORDS

            return RECORDS
        case "crawl":
            from workers.crawl.app import CRAWL

            return CRAWL
        case "extract":
            from workers.extract.app import EXTRACT

            return EXTRACT
        case "chunk":
            from workers.chunk.app import CHUNK

            return CHUNK
        case "embed":
            from workers.embed.app import EMBED

            return EMBED
        case "index":
            from workers.index.app import INDEX

            return INDEX
    raise ValueError(f"no stage is called {name!r}")


async def run(name: str, settings: Settings) -> None:
    """Runs the worker `name` until it is stopped."""
    if name == "relay":
        from workers.relay.app import run as run_relay

        await run_relay(settings)
    else:
        await stage_app(settings, stage(name)).run()


def main(argv: list[str] | None = None) -> None:
    """Parses the worker's name and runs it with the settings of the environment."""
    parser = argparse.ArgumentParser(prog="python -m workers", description=__doc__)
    parser.add_argument("name", choices=WORKERS)
    args = parser.parse_args(argv)
    asyncio.run(run(args.name, Settings()))


if __name__ == "__main__":
    main()
