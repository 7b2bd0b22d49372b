"""What the machine gave a long run, minute by minute: whether a slowdown is the product's.

A latency that drifts over a long run is the product's only if the machine stayed the same. Two
figures tell them apart:
- `Probe`: a fixed piece of pure-Python work, timed in a process of its own every minute. The
  work does not change, so its time moves only with what the machine gives it: a neighbour on
  the same cores, a slower host, the product's own processes crowding it.
- `MachineTimes`: the machine's CPU accounts (`/proc/stat`) between two readings: how busy its
  cores were and how much time the host took from them (`steal`, on a virtual machine).
"""

from __future__ import annotations

import asyncio
import multiprocessing
import statistics
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path

# The probe's work: a sum over this many integers, about 25 ms on a quiet core of this kind.
PROBE_SIZE = 400_000
# Times the work is done per probe; the median is the probe's figure.
PROBE_REPEATS = 5


def fixed_work(size: int = PROBE_SIZE, repeats: int = PROBE_REPEATS) -> tuple[float, float]:
    """The median wall and CPU milliseconds of `repeats` runs of the same sum."""
    walls: list[float] = []
    cpus: list[float] = []
    for _ in range(repeats):
        wall, cpu = time.perf_counter(), time.thread_time()
        sum(i * i for i in range(size))
        walls.append((time.perf_counter() - wall) * 1000)
        cpus.append((time.thread_time() - cpu) * 1000)
    return statistics.median(walls), statistics.median(cpus)


class Probe:
    """Runs `fixed_work` on demand in one process kept for the whole run (no start-up cost in
    the figure, and not the caller's event loop or GIL)."""

    def __init__(self) -> None:
        # Spawned, not forked: the caller may already run threads.
        self._pool = ProcessPoolExecutor(
            max_workers=1, mp_context=multiprocessing.get_context("spawn")
        )
        self._pool.submit(fixed_work, 1, 1).result()  # the process is up before the first probe

    async def measure(self) -> tuple[float, float]:
        """Wall and CPU milliseconds of the fixed work, now (a wall above the CPU is time the
        work waited for a core)."""
        return await asyncio.wrap_future(self._pool.submit(fixed_work))

    def close(self) -> None:
        self._pool.shutdown()


@dataclass(frozen=True)
class MachineTimes:
    """The machine's CPU accounts since boot, in clock ticks (`/proc/stat`'s first line)."""

    busy: int
    idle: int
    steal: int

    @classmethod
    def read(cls, stat: Path = Path("/proc/stat")) -> MachineTimes:
        # cpu user nice system idle iowait irq softirq steal guest guest_nice
        values = [int(v) for v in stat.read_text().splitlines()[0].split()[1:]]
        user, nice, system, idle, iowait, irq, softirq, steal = values[:8]
        return cls(busy=user + nice + system + irq + softirq, idle=idle + iowait, steal=steal)

    def since(self, before: MachineTimes) -> dict[str, float]:
        """Between `before` and this reading, in % of the machine's cores: how busy they were,
        and how much the host took (steal)."""
        busy, idle, steal = (
            self.busy - before.busy,
            self.idle - before.idle,
            self.steal - before.steal,
        )
        total = busy + idle + steal
        if total <= 0:
            return {"busy_pct": 0.0, "steal_pct": 0.0}
        return {
            "busy_pct": round(busy / total * 100, 1),
            "steal_pct": round(steal / total * 100, 2),
        }


def cpu_pct_between(
    before: dict[str, float], after: dict[str, float], wall_s: float
) -> dict[str, float]:
    """Each process's CPU between two readings of CPU seconds, in % of one core."""
    if wall_s <= 0:
        return {}
    return {
        name: round((after[name] - before.get(name, 0.0)) / wall_s * 100, 1)
        for name in after
        if not name.startswith("_")
    }
