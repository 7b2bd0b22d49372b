"""How the soak and the chaos soak account, at the end, for the documents they uploaded: one
missing from the KB's list is deleted, replaced by a version they never heard of, or lost;
and a lost one is named in the run's verdict, its processes' logs kept (pure logic and a
temporary folder; milliseconds)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from benchmarks import chaos
from benchmarks.chaos import DATA_PROBLEMS, data_problems
from benchmarks.soak import REPLACED, Doc, account_for_unlisted


def test_a_document_missing_from_the_list_is_lost() -> None:
    doc = Doc("doc_a", "markdown", "C1", status="indexed", filename="a.md")
    account_for_unlisted([doc], listed=set(), indexed_files={}, now=5.0)
    assert doc.status == "vanished"


def test_a_version_whose_upload_went_unanswered_replaces_its_file() -> None:
    # The new version's upload was answered 503, yet MongoDB applied its commit: the list
    # shows it indexed under the same file name, and the old version gone.
    old = Doc("doc_old", "markdown", "C1", status="indexed", filename="a.md")
    account_for_unlisted([old], listed={"doc_new"}, indexed_files={"a.md": "doc_new"}, now=5.0)
    assert (old.status, old.replaced_by, old.replaced_at) == (REPLACED, "doc_new", 5.0)


def test_another_files_indexed_document_does_not_explain_a_missing_one() -> None:
    doc = Doc("doc_a", "markdown", "C1", status="indexed", filename="a.md")
    unnamed = Doc("doc_b", "pdf", "C2", status="indexed")
    account_for_unlisted([doc, unnamed], listed={"doc_c"}, indexed_files={"b.md": "doc_c"}, now=5.0)
    assert (doc.status, unnamed.status) == ("vanished", "vanished")


def test_a_document_whose_delete_went_unanswered_is_deleted_not_lost() -> None:
    doc = Doc("doc_a", "markdown", "C1", status="indexed", filename="a.md", delete_sent=3.0)
    account_for_unlisted([doc], listed=set(), indexed_files={}, now=5.0)
    assert (doc.status, doc.deleted) == ("indexed", 3.0)


def test_a_lost_document_is_named_in_the_verdict() -> None:
    result: dict[str, Any] = dict.fromkeys(DATA_PROBLEMS, 0)
    result |= {
        "lost_documents": 1,
        "kb_counts_match": True,
        "events_missing": [],
        "error_samples": {"document:lost": "doc_a (markdown)"},
    }
    assert data_problems(result) == ["lost_documents: 1 (first: doc_a (markdown))"]


def test_a_run_with_a_problem_keeps_every_log(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    work = tmp_path / "work"
    for part, name in (("run", "extract-1.log"), ("services", "kafka.log")):
        (work / part / "logs").mkdir(parents=True)
        (work / part / "logs" / name).write_text(f"{name} lines\n")
    monkeypatch.setattr(chaos, "KEPT_LOGS", tmp_path / "kept")
    chaos.keep_logs(work)
    (kept,) = (tmp_path / "kept").iterdir()
    assert (kept / "run" / "extract-1.log").read_text() == "extract-1.log lines\n"
    assert (kept / "services" / "kafka.log").read_text() == "kafka.log lines\n"
    assert str(kept) in capsys.readouterr().err
