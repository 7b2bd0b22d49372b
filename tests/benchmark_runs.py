"""Running a benchmark as its user does, for the modules that check the benchmarks run
(`tests/e2e/test_benchmarks_run.py`, `test_chaos_benchmark_run.py`,
`test_memory_checks_run.py`): `python -m benchmarks.<name>` from the repository's root, in a
process of its own, ending with the JSON object it promises."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
RUN_TIMEOUT_S = 600


def run_module(module: str, arguments: list[str]) -> subprocess.CompletedProcess[str]:
    """Runs `python -m benchmarks.<module>` from the repository's root, as a user does."""
    return subprocess.run(
        [sys.executable, "-m", f"benchmarks.{module}", *arguments],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT_S,
        check=False,
    )


def last_json(name: str, run: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    """The benchmark's last line, which must be one JSON object, after a clean exit that
    printed the settings of the stack it ran."""
    figures = final_figures(name, run)
    lines = run.stdout.strip().splitlines()
    assert any(line.startswith("stack settings: ") for line in lines), _tail(run)
    return figures


def final_figures(name: str, run: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    """The run's last line, which must be one JSON object, after a clean exit."""
    tail = _tail(run)
    assert run.returncode == 0, f"{name} exited {run.returncode}\n{tail}"
    lines = run.stdout.strip().splitlines()
    assert lines, f"{name} printed nothing\n{tail}"
    figures = json.loads(lines[-1])
    assert isinstance(figures, dict), tail
    return figures


def _tail(run: subprocess.CompletedProcess[str]) -> str:
    """The end of what the run printed, for a failed check's message."""
    return f"stdout:\n{run.stdout[-3000:]}\nstderr:\n{run.stderr[-3000:]}"
