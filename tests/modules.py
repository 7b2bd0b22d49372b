"""What the docs and manifests name as `python -m <module>` exists and runs as a program."""

from __future__ import annotations

import importlib.util
from pathlib import Path


def assert_runs_as_module(module: str) -> None:
    """`python -m module` would run something: a package with a `__main__`, or a module with
    a `__main__` guard."""
    spec = importlib.util.find_spec(module)
    assert spec is not None, module
    if spec.submodule_search_locations is not None:  # a package runs its __main__
        assert importlib.util.find_spec(f"{module}.__main__") is not None, module
    else:
        assert spec.origin is not None
        assert 'if __name__ == "__main__":' in Path(spec.origin).read_text(), module
