"""What every Ragline process opens first, the store process included: logging, the memory
trace, the periodic release of free memory, the garbage collector's pauses measured and its
`/metrics` endpoint."""

from __future__ import annotations

from contextlib import AsyncExitStack

from infra.process.collector import measure_pauses
from infra.process.logs import configure_logging
from infra.process.malloc import releasing_free_memory
from infra.process.memory_trace import trace_memory
from infra.process.metrics import serve_metrics
from infra.settings import Settings


async def open_process_basics(
    settings: Settings, name: str, stack: AsyncExitStack, *, metrics_server: bool = True
) -> None:
    """Opens, for as long as `stack` is open, what every process `name` has: logging, the
    memory trace, the periodic release of free memory, the collector's pauses measured and,
    with `metrics_server`, `/metrics` on a port of its own (the API serves it on its HTTP
    port)."""
    configure_logging(settings.log_level)
    measure_pauses()
    trace_memory(settings.memory_trace_frames, settings.run_dir, name)
    await stack.enter_async_context(releasing_free_memory(settings.release_free_memory_every_s))
    if metrics_server:
        serve_metrics(settings.metrics_host, settings.metrics_port)
