"""The `ragline` CLI is a distribution of its own (`cli/`, `ragline-cli`): a pure HTTP client
that loads nothing of the server, reads the API's answers without pydantic, and agrees with the
server on which files it ingests."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from ragline_cli.formats import SUPPORTED_EXTENSIONS, is_supported
from ragline_cli.models import Document, Evaluation, KnowledgeBase, UnexpectedAnswer
from schemas import formats

SERVER_SIDE = ("services", "infra", "workers", "api", "devstack", "core", "schemas", "ragline")


def test_the_cli_loads_nothing_of_the_server_nor_pydantic() -> None:
    probe = (
        "import json, sys; import ragline_cli; "
        "print(json.dumps(sorted({name.split('.')[0] for name in sys.modules})))"
    )
    loaded = json.loads(
        subprocess.run(
            [sys.executable, "-c", probe], check=True, capture_output=True, text=True
        ).stdout
    )
    assert "ragline_cli" in loaded
    assert "typer" in loaded
    assert [name for name in (*SERVER_SIDE, "pydantic") if name in loaded] == []


def test_the_cli_skips_exactly_the_files_the_server_refuses() -> None:
    assert SUPPORTED_EXTENSIONS == formats.SUPPORTED_EXTENSIONS
    for name in ("a.PDF", "notes.md", "x.tar.gz", "README", "page.Htm", ".hidden.txt", "a.docx"):
        assert is_supported(name) == formats.is_supported(name), name


def test_an_answer_is_read_into_typed_fields_and_printed_back_whole() -> None:
    answer = {
        "id": "kb_1",
        "name": "Handbook",
        "status": "active",
        "document_count": 3,
        "added_by_a_newer_api": {"kept": True},
    }
    kb = KnowledgeBase.from_json(answer)
    assert (kb.id, kb.code, kb.document_count, kb.label) == ("kb_1", None, 3, "kb_1")
    assert kb.as_json() == answer


def test_nested_answers_are_read_into_their_models() -> None:
    scores = {"recall_at_k": 1, "recall_at_10": 1.0, "mrr": 0.5, "ndcg_at_10": 0.6}
    config = {"retrieval_mode": "hybrid", "fusion": "rrf", "rrf_k": 60}
    evaluation = Evaluation.from_json(
        {
            "id": "ev_1",
            "kb_id": "kb_1",
            "k": 4,
            "case_count": 2,
            "modes": {"hybrid": {"config": config, "scores": scores}},
            "best": config,
            "best_scores": scores,
        }
    )
    assert evaluation.modes["hybrid"].config.label == "hybrid rrf k=60"
    assert evaluation.best_scores.recall_at_k == 1.0
    assert isinstance(evaluation.best_scores.recall_at_k, float)
    assert evaluation.tried == []


@pytest.mark.parametrize(
    ("answer", "problem"),
    [
        ({"kb_id": "k", "filename": "f", "parse_status": "queued"}, "answer.id is missing"),
        (
            {"id": 7, "kb_id": "k", "filename": "f", "parse_status": "queued"},
            "answer.id: expected str, got int",
        ),
        (
            {"id": "d", "kb_id": "k", "filename": "f", "parse_status": "queued", "version": True},
            "answer.version: expected int, got bool",
        ),
        (
            {
                "id": "d",
                "kb_id": "k",
                "filename": "f",
                "parse_status": "queued",
                "chunk_count": "3",
            },
            "answer.chunk_count: expected int, got str",
        ),
        (["not", "an", "object"], "answer: expected an object, got list"),
    ],
)
def test_an_answer_of_another_shape_is_refused_naming_the_field(
    answer: object, problem: str
) -> None:
    with pytest.raises(UnexpectedAnswer, match=f"^{problem}$"):
        Document.from_json(answer)
