"""The relay process (`python -m workers relay`): wiring and its loop (the logic is in
`services.recovery_service`).

Every `relay.poll_s` it sends the outbox's due events; every `relay.reconcile_every_s` it
checks whether the broker lost its topics (then records its new epoch and re-drives everything
in flight) and re-drives documents that stopped moving. Any number of relays may run: sending an
event twice and re-driving a document twice are both harmless, though one is enough.
"""

from __future__ import annotations

import asyncio
import logging
import signal
import time
from collections.abc import Awaitable
from contextlib import AsyncExitStack

from core.errors import RetryableError
from core.periodic import Periodic
from infra.kafka.client import broker_is_new, build_broker
from infra.process.metrics import OUTBOX_PENDING
from infra.settings import Settings
from ragline.process import open_process
from ragline.system import System
from services.recovery_service import ReconcilerService

log = logging.getLogger(__name__)


async def run(settings: Settings, stop: asyncio.Event | None = None) -> None:
    """Runs until `stop` is set (or SIGINT / SIGTERM)."""
    stop = stop or _stop_on_signals()
    broker = build_broker(settings.kafka, "ragline-relay")
    async with AsyncExitStack() as stack:
        system = await open_process(settings, "relay", stack, broker)
        await broker.start()
        stack.push_async_callback(broker.stop)
        relay_service = system.relay_service
        reconciler_service = system.reconciler_service
        next_check = 0.0

        async def step() -> None:
            nonlocal next_check
            await _step("sending the outbox", relay_service.drain())
            if time.monotonic() >= next_check:
                await _step("reconciling", _reconcile(settings, system, reconciler_service))
                next_check = time.monotonic() + settings.relay.reconcile_every_s

        async with Periodic("relaying", settings.relay.poll_s, step, at_once=True):
            log.info("relay ready")
            await stop.wait()


async def _reconcile(
    settings: Settings, system: System, reconciler_service: ReconcilerService
) -> None:
    if await broker_is_new(settings.kafka):
        # First the new epoch, so that the stages read their partitions again from the start
        # and find the re-driven events wherever their old positions point.
        await system.broker_epoch.begin()
        count = await reconciler_service.redrive_in_flight("broker_restart")
        log.info("the broker is new or lost its topics: %d documents in flight re-driven", count)
    await reconciler_service.redrive_stalled()
    OUTBOX_PENDING.set(await system.outbox.count())


async def _step(what: str, work: Awaitable[object]) -> None:
    """Runs one step; a service being down is logged and tried again on the next round."""
    try:
        await work
    except RetryableError as exc:
        log.warning("%s: %s (trying again)", what, exc)


def _stop_on_signals() -> asyncio.Event:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    return stop
