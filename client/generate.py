"""Writes the client library's generated code from what it is generated from:

- `ragline_client/models.py` from the OpenAPI schema the API serves (datamodel-code-generator);
- `ragline_client/_sync/client.py` from `ragline_client/_async/client.py` (unasync: the same
  methods without `async`/`await`).

`python client/generate.py` writes both; `--check` only says whether the checked-in files
differ (the test suite runs the same check). It needs the server's code (to build the schema),
so it lives beside the library, not in it.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import tokenize_rt
import unasync

CLIENT = Path(__file__).resolve().parent
ROOT = CLIENT.parent
PACKAGE = CLIENT / "ragline_client"
MODELS = PACKAGE / "models.py"
ASYNC_CLIENT = PACKAGE / "_async" / "client.py"
SYNC_CLIENT = PACKAGE / "_sync" / "client.py"

HEADER = (
    '"""The API\'s request and answer models, generated from its OpenAPI schema by\n'
    'datamodel-code-generator (`python client/generate.py`): do not edit by hand."""'
)
CODEGEN_OPTIONS = (
    "--input-file-type=openapi",
    "--output-model-type=pydantic_v2.BaseModel",
    "--target-python-version=3.11",
    "--use-annotated",
    "--field-constraints",
    "--use-standard-collections",
    "--use-union-operator",
    "--use-schema-description",
    "--use-field-description",
    "--use-double-quotes",
    "--collapse-root-models",
    "--enum-field-as-literal=all",
    "--disable-timestamp",
    # A newer server may add fields to its answers: they are kept, not refused.
    "--extra-fields=allow",
    "--formatters",
    "ruff-format",
    "ruff-check",
)
# What unasync renames besides its own list (`__aenter__`, `AsyncIterator`, ...).
UNASYNC_NAMES = {
    "AsyncRagline": "Ragline",
    "AsyncClient": "Client",
    "AsyncByteStream": "SyncByteStream",
    "asyncio": "time",
    "aclose": "close",
    "aiter_bytes": "iter_bytes",
    "aread": "read",
    "_async": "_sync",
}
SYNC_HEADER = (
    "# Generated from ../_async/client.py by unasync (`python client/generate.py`): do not edit\n"
    "# by hand; change the async client and generate this one again.\n"
)


def served_schema() -> dict[str, object]:
    """The OpenAPI schema the API serves (built as `python -m ragline.api` builds its app)."""
    sys.path.insert(0, str(ROOT))
    from docs.hooks.openapi_page import served_schema as build

    return build()


def _ruff_format(source: str, path: Path) -> str:
    """`source` as `make lint` wants `path` formatted (the project's ruff settings)."""
    return subprocess.run(
        [
            str(Path(sys.executable).parent / "ruff"),
            "format",
            "--quiet",
            f"--stdin-filename={path.relative_to(ROOT)}",
            "-",
        ],
        input=source,
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
    ).stdout


def models_source(schema: dict[str, object]) -> str:
    """`models.py` as generated from `schema`."""
    with tempfile.TemporaryDirectory() as work:
        given, written = Path(work) / "openapi.json", Path(work) / "models.py"
        given.write_text(json.dumps(schema))
        subprocess.run(
            [
                str(Path(sys.executable).parent / "datamodel-codegen"),
                f"--input={given}",
                f"--output={written}",
                f"--custom-file-header={HEADER}",
                *CODEGEN_OPTIONS,
            ],
            check=True,
            capture_output=True,
            text=True,
            cwd=ROOT,
        )
        return _ruff_format(written.read_text(), MODELS)


def sync_client_source() -> str:
    """`_sync/client.py` as unasync makes it from the async client."""
    rule = unasync.Rule("/_async/", "/_sync/", additional_replacements=UNASYNC_NAMES)
    tokens = tokenize_rt.src_to_tokens(ASYNC_CLIENT.read_text())
    sync = tokenize_rt.tokens_to_src(rule._unasync_tokens(tokens))
    return _ruff_format(SYNC_HEADER + sync, SYNC_CLIENT)


def stale(schema: dict[str, object] | None = None) -> list[str]:
    """The generated files whose checked-in text differs from what they generate to."""
    wanted = {
        MODELS: models_source(schema if schema is not None else served_schema()),
        SYNC_CLIENT: sync_client_source(),
    }
    return [
        str(path.relative_to(ROOT))
        for path, text in wanted.items()
        if not path.is_file() or path.read_text() != text
    ]


def main() -> int:
    """Writes the generated files, or (`--check`) says which ones are stale."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="only say what is stale")
    args = parser.parse_args()
    if args.check:
        found = stale()
        for path in found:
            print(f"stale: {path} (run `python client/generate.py`)")
        return 1 if found else 0
    MODELS.write_text(models_source(served_schema()))
    SYNC_CLIENT.parent.mkdir(exist_ok=True)
    SYNC_CLIENT.write_text(sync_client_source())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
