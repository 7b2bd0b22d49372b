"""The context LLM is down: documents are still indexed, with the generic context prefix."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.conftest import FIXTURES, RunningPipeline, own_stack
from tests.e2e.client import Api
from tests.local_http import JsonHandler, serving

pytestmark = pytest.mark.e2e


class _BrokenChatApi(JsonHandler):
    """An OpenAI-compatible endpoint that answers every request with a server error."""

    paths: list[str] = []  # noqa: RUF012 - shared by the test and the server

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length", "0")))
        type(self).paths.append(self.path)
        self.send_json(500, {"error": {"message": "overloaded", "type": "server_error"}})


@pytest.fixture(scope="module")
def broken_llm() -> Iterator[str]:
    """The failing endpoint's base URL."""
    with serving(_BrokenChatApi) as url:
        yield f"{url}/v1"


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory, broken_llm: str) -> Iterator[RunningPipeline]:
    """A stack whose chunk stage asks the failing endpoint for chunk contexts."""
    env = {
        "RAGLINE_CONTEXTUAL__PROVIDER": "openai",
        "RAGLINE_CONTEXTUAL__MODEL": "context-model",
        "RAGLINE_CONTEXTUAL__BASE_URL": broken_llm,
        "RAGLINE_CONTEXTUAL__API_KEY": "sk-test",
    }
    with own_stack(tmp_path_factory.mktemp("contextual"), env) as running:
        yield running


MANUAL = b"""# Returns policy

## Refunds

Items bought in a store can be returned within 30 days with a receipt. The money goes back to
the card that paid for them.

## Exchanges

A faulty item is swapped for a new one at any branch, or repaired free of charge.
"""


async def test_documents_are_indexed_with_the_generic_context(api: Api) -> None:
    asked_before = await api.metric(api.worker_metrics("chunk"), "ragline_context_requests_total")
    kb = await api.create_kb("Policies")
    manual = await api.upload(kb["id"], "returns.md", MANUAL)
    pdf = await api.upload(kb["id"], "crazyones.pdf", (FIXTURES / "crazyones.pdf").read_bytes())

    done = await api.wait_final(kb["id"], manual["id"])
    assert done["parse_status"] == "indexed", done
    chunks = await api.chunks(kb["id"], manual["id"])
    # One chunk: the title (the file's first heading, not repeated), then the exact source text.
    assert [(c["context"], c["chunk_text"]) for c in chunks] == [
        ("Returns policy", MANUAL.decode().strip())
    ]

    done_pdf = await api.wait_final(kb["id"], pdf["id"])
    assert done_pdf["parse_status"] == "indexed", done_pdf
    pages = await api.chunks(kb["id"], pdf["id"])
    assert pages
    for chunk in pages:
        assert chunk["context"] == f"{done_pdf['title']} (page {chunk['page']})"
        assert not chunk["chunk_text"].startswith(done_pdf["title"])

    # The model was asked for every chunk (and failed every time): the calls are counted.
    assert _BrokenChatApi.paths
    assert set(_BrokenChatApi.paths) == {"/v1/chat/completions"}
    assert await api.metric(api.worker_metrics("chunk"), "ragline_context_requests_total") >= (
        asked_before + len(chunks) + len(pages)
    )

    # Search finds the passage and cites the source text, without the prefix.
    hits = await api.search([kb["id"]], "How many days do I have to return an item?")
    assert hits[0]["document_id"] == manual["id"]
    assert hits[0]["chunk_text"] == MANUAL.decode().strip()
