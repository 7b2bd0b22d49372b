"""Where a process's memory went: its mappings from /proc (smaps) and its Python allocations
(tracemalloc snapshots the process writes on SIGUSR2, see `infra.process.memory_trace`), each
taken at two moments and compared. The soak uses it to attribute growth.

Mappings are summed by name: a file's path, `[heap]`, `[stack]`, or `[anon]` for every
unnamed anonymous mapping (where malloc's arenas, large allocations and native libraries'
memory live), so a growth shows up as private heap or anonymous memory, or as pages of
mapped files (such as the vector store's segment files, which the kernel may drop).
"""

from __future__ import annotations

import json
import os
import re
import time
import tracemalloc
from dataclasses import dataclass
from pathlib import Path

from infra.process.memory_trace import MALLOC_SUFFIX, SNAPSHOT_SIGNAL, SNAPSHOT_SUFFIX

# The smaps fields kept, in kB.
FIELDS = ("Rss", "Private_Clean", "Private_Dirty", "Anonymous")
_HEADER = re.compile(r"^[0-9a-f]+-[0-9a-f]+ \S+ \S+ \S+ \S+\s*(.*)$")
_FIELD = re.compile(r"^(\w+):\s+(\d+) kB$")
# Frames of these files are never the one to blame.
_TRACE_NOISE = (tracemalloc.__file__, "<frozen importlib._bootstrap>", "<unknown>")

Mappings = dict[str, dict[str, int]]


def descendants(pid: int) -> list[int]:
    """The pids of a process's descendants (from /proc)."""
    parents: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        parents.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    found, todo = [], [pid]
    while todo:
        kids = parents.get(todo.pop(), [])
        found += kids
        todo += kids
    return found


def process_tree_rss_mb(pid: int, field: str = "VmRSS") -> float:
    """Resident memory of a process and its descendants, in MB: all of it (`VmRSS`), or only
    its private memory (`RssAnon`: without the pages of files it maps, such as the vector
    store's segment files, which the kernel can drop and read again)."""
    total_kb = 0
    for one in (pid, *descendants(pid)):
        try:
            status = Path(f"/proc/{one}/status").read_text()
        except OSError:
            continue
        match = re.search(rf"{field}:\s+(\d+) kB", status)
        total_kb += int(match.group(1)) if match else 0
    return round(total_kb / 1024, 1)


def parse_smaps(text: str) -> Mappings:
    """The kB of each of `FIELDS`, and the count of mappings (`mappings`), summed by mapping
    name (a file's path, `[heap]`, `[stack]`..., `[anon]` for the unnamed)."""
    found: Mappings = {}
    current: dict[str, int] | None = None
    for line in text.splitlines():
        header = _HEADER.match(line)
        if header:
            name = header.group(1).strip() or "[anon]"
            name = name.removesuffix(" (deleted)")
            current = found.setdefault(name, dict.fromkeys(("mappings", *FIELDS), 0))
            current["mappings"] += 1
            continue
        field = _FIELD.match(line)
        if field and current is not None and field.group(1) in FIELDS:
            current[field.group(1)] += int(field.group(2))
    return found


def add_mappings(into: Mappings, more: Mappings) -> Mappings:
    """Adds `more` into `into` (a process tree's mappings summed); returns `into`."""
    for name, figures in more.items():
        total = into.setdefault(name, dict.fromkeys(figures, 0))
        for key, value in figures.items():
            total[key] = total.get(key, 0) + value
    return into


def tree_mappings(pids: list[int]) -> Mappings:
    """The summed mappings of these processes (those gone are skipped)."""
    total: Mappings = {}
    for pid in pids:
        try:
            add_mappings(total, parse_smaps(Path(f"/proc/{pid}/smaps").read_text()))
        except OSError:
            continue
    return total


def is_file(name: str) -> bool:
    """Whether a mapping name is a file's path (not `[heap]`, `[anon]`, ...)."""
    return name.startswith("/")


def totals(mappings: Mappings) -> dict[str, int]:
    """kB: all resident (`rss`), private anonymous (`anonymous`), and resident pages of
    mapped files (`file`)."""
    return {
        "rss": sum(m["Rss"] for m in mappings.values()),
        "anonymous": sum(m["Anonymous"] for m in mappings.values()),
        "file": sum(m["Rss"] for name, m in mappings.items() if is_file(name)),
    }


def mapping_growth(start: Mappings, end: Mappings, top: int = 6) -> list[tuple[str, int, int]]:
    """The mappings whose resident kB changed most (by size of the change): name, kB at
    start, kB at end."""
    names = set(start) | set(end)
    rss = {name: (start.get(name, {}).get("Rss", 0), end.get(name, {}).get("Rss", 0))
           for name in names}  # fmt: skip
    ordered = sorted(names, key=lambda name: (-abs(rss[name][1] - rss[name][0]), name))
    return [(name, *rss[name]) for name in ordered[:top] if rss[name][1] != rss[name][0]]


def format_mappings(start: Mappings, end: Mappings, top: int = 6) -> list[str]:
    """Lines: the totals at start and end, then the mappings that changed most."""
    before, after = totals(start), totals(end)
    lines = [
        "  " + ", ".join(
            f"{key} {before[key] / 1024:.1f} -> {after[key] / 1024:.1f} MB "
            f"({(after[key] - before[key]) / 1024:+.1f})"
            for key in ("rss", "anonymous", "file")
        )
    ]  # fmt: skip
    counts = {name: end.get(name, start.get(name, {})).get("mappings", 0) for name in end}
    for name, kb_start, kb_end in mapping_growth(start, end, top):
        lines.append(
            f"  {(kb_end - kb_start) / 1024:+8.1f} MB  {kb_start / 1024:7.1f} -> "
            f"{kb_end / 1024:7.1f} MB  {_short(name)} ({counts.get(name, 0)} mappings)"
        )
    return lines


def _short(path: str, keep: int = 70) -> str:
    return path if len(path) <= keep else "..." + path[-keep + 3 :]


# -- tracemalloc ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Grower:
    """One allocation site whose live memory changed between two snapshots."""

    size_diff: int
    size: int
    count_diff: int
    frames: tuple[tuple[str, int], ...]  # innermost first


def snapshot_growth(
    start: tracemalloc.Snapshot, end: tracemalloc.Snapshot, top: int = 8
) -> list[Grower]:
    """The allocation sites (whole tracebacks) whose live memory grew most from `start` to
    `end`, tracemalloc's own frames left out."""
    noise = [tracemalloc.Filter(False, name) for name in _TRACE_NOISE]
    diffs = end.filter_traces(noise).compare_to(start.filter_traces(noise), "traceback")
    growers = [d for d in diffs if d.size_diff > 0][:top]
    return [
        Grower(
            d.size_diff,
            d.size,
            d.count_diff,
            tuple((f.filename, f.lineno) for f in reversed(list(d.traceback))),
        )
        for d in growers
    ]


def blame(frames: tuple[tuple[str, int], ...], roots: tuple[str, ...]) -> str:
    """Where an allocation came from, in a line: the innermost frame, and the innermost one
    in the project (a path under one of `roots`) if that is another."""
    if not frames:
        return "?"
    inner = f"{_short(frames[0][0], 60)}:{frames[0][1]}"
    own = next((f for f in frames if _own(f[0], roots)), None)
    if own is None or own == frames[0]:
        return inner
    root = next(r for r in roots if own[0].startswith(r))
    return f"{inner} <- {own[0].removeprefix(root).lstrip('/')}:{own[1]}"


def _own(path: str, roots: tuple[str, ...]) -> bool:
    return path.startswith(roots) and "site-packages" not in path


def format_growers(growers: list[Grower], roots: tuple[str, ...]) -> list[str]:
    """Lines: each grower's growth, its size at the end, its blocks' growth and where from."""
    return [
        f"  {g.size_diff / 1024 / 1024:+8.2f} MB  (now {g.size / 1024 / 1024:.2f} MB, "
        f"{g.count_diff:+d} blocks)  {blame(g.frames, roots)}"
        for g in growers
    ]


def request_snapshots(
    pids: dict[str, int], directory: Path, timeout_s: float = 120.0
) -> dict[str, Path]:
    """Signals each process to write a tracemalloc snapshot; waits for the new files and
    returns them by process name (a process that wrote none in time is left out)."""
    before = set(directory.glob(f"*{SNAPSHOT_SUFFIX}")) if directory.is_dir() else set()
    for pid in pids.values():
        try:
            os.kill(pid, SNAPSHOT_SIGNAL)
        except ProcessLookupError:
            continue
    found: dict[str, Path] = {}
    deadline = time.monotonic() + timeout_s
    while len(found) < len(pids) and time.monotonic() < deadline:
        time.sleep(0.5)
        for path in set(directory.glob(f"*{SNAPSHOT_SUFFIX}")) - before:
            for name, pid in pids.items():
                if f"-{pid}-" in path.name:
                    found[name] = path
    return found


def malloc_figures(snapshot: Path) -> dict[str, int]:
    """What malloc held when the process wrote this snapshot (`infra.process.memory_trace`), in
    bytes; empty if it wrote none."""
    path = snapshot.with_name(snapshot.name.removesuffix(SNAPSHOT_SUFFIX) + MALLOC_SUFFIX)
    try:
        figures: dict[str, int] = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return figures


def format_malloc(start: dict[str, int], end: dict[str, int]) -> str:
    """A line: each of malloc's figures at start and end, in MB."""
    return "  malloc: " + ", ".join(
        f"{key} {start[key] / 2**20:.1f} -> {end[key] / 2**20:.1f} MB "
        f"({(end[key] - start[key]) / 2**20:+.1f})"
        for key in start
        if key in end
    )
