"""The `ragline` CLI is a distribution of its own (`cli/`, `ragline-cli`) built on the client
library (`ragline_client`): it loads nothing of the server, agrees with the server on which files
it ingests, prints the API's answers whole, and turns the library's typed errors into one line
and an exit code. The commands run here against a stand-in of the API on a local port."""

from __future__ import annotations

import io
import json
import subprocess
import sys
import tarfile
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner, Result

from ragline_cli import app
from ragline_cli.formats import SUPPORTED_EXTENSIONS, is_supported
from schemas import formats

SERVER_SIDE = ("services", "infra", "workers", "api", "devstack", "core", "schemas", "ragline")
KB_PATH = "/api/v1/knowledge-bases/handbook"
DOCUMENTS_PATH = "/api/v1/knowledge-bases/kb_1/documents"
SEARCH_PATH = "/api/v1/knowledge/search"
WHEN = "2025-05-01T09:30:00.120000Z"


@dataclass(frozen=True)
class Answer:
    """One scripted answer of the stand-in API."""

    status: int
    body: Any
    headers: dict[str, str] = field(default_factory=dict)


class StandIn:
    """The API on a local port: each (method, path) answers its scripted answers in turn (the
    last one again once they run out), and every request is recorded."""

    def __init__(self) -> None:
        self.scripts: dict[tuple[str, str], list[Answer]] = {}
        self.requests: list[tuple[str, str]] = []
        self.url = ""

    def script(self, method: str, path: str, *answers: Answer) -> None:
        """What the API answers to `method path`, in turn."""
        self.scripts[(method, path)] = list(answers)

    def next_answer(self, method: str, path: str) -> Answer:
        """The answer to a request (a 404 for anything unscripted)."""
        self.requests.append((method, path))
        answers = self.scripts.get((method, path))
        if not answers:
            return Answer(404, {"detail": f"nothing scripted for {method} {path}"})
        return answers.pop(0) if len(answers) > 1 else answers[0]

    def sent(self, method: str, path: str) -> int:
        """How many times `method path` was requested."""
        return self.requests.count((method, path))


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def _answer(self) -> None:
        self.rfile.read(int(self.headers.get("content-length") or 0))
        answer = self.server.stand_in.next_answer(self.command, self.path.split("?")[0])
        body = answer.body if isinstance(answer.body, bytes) else json.dumps(answer.body).encode()
        self.send_response(answer.status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        for name, value in answer.headers.items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST = do_DELETE = _answer

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: the test reads `StandIn.requests`."""


class _Server(ThreadingHTTPServer):
    stand_in: StandIn


@pytest.fixture
def api() -> Iterator[StandIn]:
    """A stand-in of the API, serving on a local port for one test."""
    stand_in = StandIn()
    server = _Server(("127.0.0.1", 0), _Handler)
    server.stand_in = stand_in
    stand_in.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield stand_in
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def _run(api: StandIn, tmp_path: Path, *args: str) -> Result:
    """`ragline ARGS` against the stand-in, configured by the environment."""
    env = {
        "RAGLINE_URL": api.url,
        "RAGLINE_TOKEN": "rl_test",
        "XDG_CONFIG_HOME": str(tmp_path / "config"),
        "COLUMNS": "200",
        "NO_COLOR": "1",
    }
    result = CliRunner().invoke(app, list(args), env=env)
    assert result.exception is None or isinstance(result.exception, SystemExit), result.stderr
    assert "Traceback" not in result.stdout + result.stderr
    return result


def _kb(**extra: Any) -> dict[str, Any]:
    return {
        "id": "kb_1",
        "tenant_id": "default",
        "name": "Handbook [staff]",
        "description": "",
        "default_language": "en",
        "default_visibility": "shared",
        "code": "handbook",
        "status": "active",
        "document_count": 3,
        "chunk_count": 12,
        "created_at": WHEN,
        "updated_at": WHEN,
        **extra,
    }


def _document(document_id: str, filename: str, **extra: Any) -> dict[str, Any]:
    return {
        "id": document_id,
        "kb_id": "kb_1",
        "filename": filename,
        "title": filename,
        "content_type": "text/plain",
        "size_bytes": 10,
        "sha256": "0" * 64,
        "storage_key": f"originals/{document_id}",
        "source_key": f"file:{filename}",
        "version": 1,
        "external_id": None,
        "url": None,
        "parse_status": "indexed",
        "parse_error": None,
        "chunk_count": 1,
        "chunks_embedded": 1,
        "text_char_count": 10,
        "attempts": {},
        "stage_started_at": {},
        "created_at": WHEN,
        "updated_at": WHEN,
        "knowledge_item_id": f"item_{document_id}",
        "kind": "document",
        "owner_user_id": None,
        "creator_user_id": None,
        "visibility_mode": "shared",
        "audience_tags": [],
        "user_grants": [],
        "tags": [],
        "archived_at": None,
        "last_error": None,
        **extra,
    }


def _search_answer() -> dict[str, Any]:
    hit = {
        "content": "Paddles carry a two-year warranty.",
        "source": "doc_1",
        "score": 0.8123,
        "document_title": "Warranty",
        "chunk_index": 0,
        "retrieval_rationale": "semantic match",
        "kb_id": "kb_1",
        "citation": "Warranty, p. 1",
    }
    return {"results": [hit]}


def test_the_cli_loads_the_client_library_and_nothing_of_the_server() -> None:
    probe = (
        "import json, sys; import ragline_cli; "
        "print(json.dumps(sorted({name.split('.')[0] for name in sys.modules})))"
    )
    loaded = json.loads(
        subprocess.run(
            [sys.executable, "-c", probe], check=True, capture_output=True, text=True
        ).stdout
    )
    assert {"ragline_cli", "ragline_client", "pydantic", "typer"} <= set(loaded)
    assert [name for name in SERVER_SIDE if name in loaded] == []


def test_the_cli_skips_exactly_the_files_the_server_refuses() -> None:
    assert SUPPORTED_EXTENSIONS == formats.SUPPORTED_EXTENSIONS
    for name in ("a.PDF", "notes.md", "x.tar.gz", "README", "page.Htm", ".hidden.txt", "a.docx"):
        assert is_supported(name) == formats.is_supported(name), name


def test_json_prints_the_answer_whole_with_what_a_newer_api_adds(
    api: StandIn, tmp_path: Path
) -> None:
    answer = _kb(added_by_a_newer_api={"kept": True})
    api.script("GET", KB_PATH, Answer(200, answer))

    assert json.loads(_run(api, tmp_path, "kb", "show", "handbook", "--json").stdout) == answer
    shown = _run(api, tmp_path, "kb", "show", "handbook").stdout
    assert "Handbook [staff]" in shown  # as it is, not read as markup
    assert "active" in shown


def test_times_are_shown_as_the_api_writes_them(api: StandIn, tmp_path: Path) -> None:
    token = {
        "id": "tok_1",
        "tenant_id": "default",
        "role": "user",
        "name": "help desk",
        "user_id": "alice",
        "created_at": WHEN,
    }
    api.script("GET", "/api/v1/tokens", Answer(200, {"items": [token]}))

    shown = _run(api, tmp_path, "tokens", "list").stdout
    row = next(line for line in shown.splitlines() if "tok_1" in line).replace("│", " ")
    assert row.split() == ["tok_1", "help", "desk", "user", "alice", WHEN, "never"]


@pytest.mark.parametrize(
    ("answer", "code", "said"),
    [
        (Answer(401, {"detail": "invalid token"}), 5, "; the token from RAGLINE_TOKEN was refused"),
        (Answer(403, {"detail": "an admin token is needed"}), 5, ""),
        (Answer(404, {"detail": "knowledge base 'handbook' not found"}), 4, ""),
        (Answer(409, {"detail": "the knowledge base is being deleted"}), 4, ""),
        (Answer(500, {"detail": "internal error"}), 6, ""),
        (Answer(502, b"Bad Gateway"), 6, ""),
        (Answer(503, {"detail": "search is slow"}, {"retry-after": "1"}), 6, ""),
    ],
)
def test_a_refusal_is_one_line_and_its_exit_code(
    api: StandIn, tmp_path: Path, answer: Answer, code: int, said: str
) -> None:
    api.script("GET", KB_PATH, answer)

    refused = _run(api, tmp_path, "kb", "show", "handbook")
    assert refused.exit_code == code
    detail = answer.body.decode() if isinstance(answer.body, bytes) else answer.body["detail"]
    assert refused.stderr.splitlines() == [f"error: {detail} (HTTP {answer.status}){said}"]
    assert refused.stdout == ""
    assert api.sent("GET", KB_PATH) == 1  # not sent again, a 503 neither


def test_an_answer_the_cli_cannot_read_exits_4_on_one_line(api: StandIn, tmp_path: Path) -> None:
    api.script("GET", KB_PATH, Answer(200, {"id": 7, "name": "Handbook"}))

    unreadable = _run(api, tmp_path, "kb", "show", "handbook")
    assert unreadable.exit_code == 4
    assert unreadable.stderr.splitlines() == [
        f"error: unexpected answer to GET {KB_PATH}: id: Input should be a valid string "
        "(and 9 more problems); is this Ragline's API? (HTTP 200)"
    ]


def test_a_rate_limit_is_waited_out_as_retry_after_says_then_given_up(
    api: StandIn, tmp_path: Path
) -> None:
    limited = Answer(429, {"detail": "too many searches"}, {"retry-after": "0.5"})
    api.script("POST", SEARCH_PATH, limited, Answer(200, _search_answer()))

    waited = _run(api, tmp_path, "search", "paddle warranty")
    assert waited.exit_code == 0
    assert waited.stderr.splitlines() == [
        "rate-limited by the API (too many searches); waiting 0.5 s as it asks"
    ]
    assert "two-year warranty" in waited.stdout
    assert api.sent("POST", SEARCH_PATH) == 2

    # Waits add up per request: with 0.7 s allowed, one wait of 0.5 s, then the API's message.
    api.script("POST", SEARCH_PATH, limited)
    refused = _run(api, tmp_path, "--rate-limit-wait", "0.7", "search", "paddle warranty")
    assert refused.exit_code == 6
    assert refused.stderr.splitlines() == [
        "rate-limited by the API (too many searches); waiting 0.5 s as it asks",
        "error: too many searches (HTTP 429)",
    ]
    assert api.sent("POST", SEARCH_PATH) == 4


def test_an_upload_of_bytes_the_kb_holds_is_reported_unchanged(
    api: StandIn, tmp_path: Path
) -> None:
    api.script("GET", KB_PATH, Answer(200, _kb()))
    api.script("GET", DOCUMENTS_PATH, Answer(200, {"items": [], "next_cursor": None}))
    # Another client uploaded the second file's bytes after the CLI listed the KB: 200 with
    # that document, not 202 with a new one.
    api.script(
        "POST",
        DOCUMENTS_PATH,
        Answer(202, _document("doc_new", "new.txt")),
        Answer(200, _document("doc_there", "there.txt")),
    )
    for name in ("new.txt", "there.txt"):
        (tmp_path / name).write_text(f"{name}\n")

    files = [str(tmp_path / "new.txt"), str(tmp_path / "there.txt")]
    summary = json.loads(_run(api, tmp_path, "ingest", *files, "--kb", "handbook", "--json").stdout)
    assert [(f["outcome"], f["document_id"], f["status"]) for f in summary["files"]] == [
        ("new", "doc_new", "indexed"),
        ("unchanged", "doc_there", "indexed"),
    ]
    assert summary["counts"] == {"indexed": 2, "failed": 0, "in_progress": 0, "unchanged": 1}


def test_a_backup_is_written_into_a_folder_and_restored_from_it(
    api: StandIn, tmp_path: Path
) -> None:
    manifest = {"tenant_id": "default", "files": [{"name": "bots.jsonl", "records": 1}]}
    archive = io.BytesIO()
    with tarfile.open(fileobj=archive, mode="w") as tar:
        for name, data in (
            ("manifest.json", json.dumps(manifest).encode()),
            ("bots.jsonl", b"{}\n"),
        ):
            entry = tarfile.TarInfo(name)
            entry.size = len(data)
            tar.addfile(entry, io.BytesIO(data))
    api.script("POST", "/api/v1/backups", Answer(200, archive.getvalue()))
    restored = {"records": {"bots": 1}, "points": 3, "restarted_documents": 0}
    api.script("POST", "/api/v1/restores", Answer(200, restored))
    snapshot = tmp_path / "snapshot"

    assert json.loads(_run(api, tmp_path, "backup", str(snapshot), "--json").stdout) == manifest
    assert (snapshot / "bots.jsonl").read_text() == "{}\n"
    assert json.loads(_run(api, tmp_path, "restore", str(snapshot), "--json").stdout) == restored
    shown = _run(api, tmp_path, "restore", str(snapshot)).stdout
    assert "vector points" in shown
    assert api.sent("POST", "/api/v1/restores") == 2
