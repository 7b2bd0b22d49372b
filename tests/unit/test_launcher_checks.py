"""What the launcher's start-up checks conclude: a stack's API is ready only when the API itself
answers, and a stage whose consumer group does not settle is reported with the process that
hosts it. Costs about a second: one sleeping child process and one metrics server."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry, start_http_server

from devstack.launcher import ManagedProcess, Pipeline, free_port


def test_an_unsettled_stage_is_reported_with_its_process_and_log(tmp_path: Path) -> None:
    port = free_port()  # nothing serves /metrics there
    worker = ManagedProcess(
        "index-1",
        [
            sys.executable,
            "-c",
            "import time; print('joining group ragline.index', flush=True); time.sleep(60)",
        ],
        {"RAGLINE_METRICS_PORT": str(port)},
        tmp_path / "index-1.log",
    )
    pipeline = Pipeline(tmp_path, {"RAGLINE_QDRANT__URL": "http://127.0.0.1:1"})
    pipeline.processes.append(worker)
    worker.start()
    try:
        while "joining" not in worker.tail():
            assert worker.alive(), worker.tail()
            time.sleep(0.05)
        with pytest.raises(RuntimeError) as raised:
            pipeline.wait_settled(partitions=6, timeout=0.3)
    finally:
        worker.stop()
    message = str(raised.value)
    assert "{'index': 0.0}" in message
    assert "--- index-1 (running; assigned partitions not served)" in message
    assert "joining group ragline.index" in message


def test_a_metrics_server_on_the_api_port_is_not_a_ready_api(tmp_path: Path) -> None:
    # Another stack's worker took the port first: its metrics server answers every path 200.
    port = free_port()
    server, thread = start_http_server(port, addr="127.0.0.1", registry=CollectorRegistry())
    try:
        assert not Pipeline(tmp_path, {}, api_port=port).api_ready()
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
