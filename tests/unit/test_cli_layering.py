"""The `ragline` CLI is a pure HTTP client: importing it loads none of the services, adapters,
workers, HTTP app or local stack."""

from __future__ import annotations

import json
import subprocess
import sys

SERVER_SIDE = ("services", "infra", "workers", "api", "devstack", "core")


def test_the_cli_loads_nothing_of_the_server() -> None:
    probe = (
        "import json, sys; import ragline.cli; "
        "print(json.dumps(sorted({name.split('.')[0] for name in sys.modules})))"
    )
    loaded = json.loads(
        subprocess.run(
            [sys.executable, "-c", probe], check=True, capture_output=True, text=True
        ).stdout
    )
    assert "ragline" in loaded
    assert "typer" in loaded
    assert [name for name in SERVER_SIDE if name in loaded] == []
